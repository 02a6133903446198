//go:build !linux

package vfsutil

// osRenameNoReplace is Linux's renameat2 elsewhere: not done, so the
// caller's checked rename (under nameMu, which serialises this process's
// renames; a directory renamed onto a non-empty one fails in the OS
// anyway) does it.
func osRenameNoReplace(from, to string) (done bool, err error) { return false, nil }
