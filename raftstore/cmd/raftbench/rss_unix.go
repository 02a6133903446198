//go:build unix

package main

import (
	"os"
	"runtime"
	"syscall"
)

// maxRSSKiB returns the peak resident set of an exited process in KiB
// (getrusage's ru_maxrss: KiB on Linux and the BSDs, bytes on Darwin), 0
// if unknown.
func maxRSSKiB(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss) / 1024
	}
	return int64(ru.Maxrss)
}
