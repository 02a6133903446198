//go:build !linux || !(amd64 || arm64)

package bgsys

// asyncSync has no asynchronous fsync to offer here: the caller syncs
// directly (see SyncData).
func asyncSync(fd uintptr, data bool) (done bool, err error) { return false, nil }

func asyncAvailable() bool { return false }

const aioDepthForTest = 64
