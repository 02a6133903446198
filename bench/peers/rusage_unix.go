//go:build linux || darwin

package peers

import (
	"os"
	"runtime"
	"syscall"
)

// rusageKiB converts ru_maxrss to KiB: Linux reports KiB, macOS bytes.
func rusageKiB(maxrss int64) int64 {
	if runtime.GOOS == "darwin" {
		return maxrss >> 10
	}
	return maxrss
}

// maxRSSKiB returns an exited child's peak RSS from the rusage wait4
// returned with its status.
func maxRSSKiB(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return 0
	}
	return rusageKiB(int64(ru.Maxrss))
}

// interrupted says whether the child died of SIGINT (Ctrl-C reaches the
// whole process group).
func interrupted(ps *os.ProcessState) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGINT
}
