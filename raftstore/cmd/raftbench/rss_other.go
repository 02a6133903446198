//go:build !unix

package main

import "os"

// maxRSSKiB returns 0: peak RSS is measured on Unix only.
func maxRSSKiB(*os.ProcessState) int64 { return 0 }
