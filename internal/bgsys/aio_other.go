//go:build !linux || !(amd64 || arm64)

package bgsys

// asyncSync has no asynchronous fsync to offer here (no Linux AIO, or an
// architecture aio_linux.go's structures do not fit): the caller makes the
// file's own call through Do, with the same durability (see the package
// doc's Platforms).
func asyncSync(fd uintptr, data bool) (done bool, err error) { return false, nil }

func asyncAvailable() bool { return false }

const aioDepthForTest = 64
