//go:build !linux && !darwin

package peers

import "os"

// maxRSSKiB: no rusage here; the table leaves RSS out.
func maxRSSKiB(*os.ProcessState) int64 { return 0 }

func interrupted(*os.ProcessState) bool { return false }
