package bgsys

import (
	"os"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/vfs"
)

// Sync fsyncs f, a background goroutine's file (a table, the data
// directory, a WAL no writer waits on), without holding a processor while
// the kernel writes: see SyncData.
func Sync(f vfs.File) error { return syncFile(f, false) }

// SyncData is Sync with fdatasync's semantics (f.SyncData).
//
// Why: an fsync blocks for milliseconds (9 ms on average for the WAL's
// bytes-per-sync on the benchmark machine), and a goroutine in a system
// call keeps its processor until the runtime's monitor takes it back,
// 10-20 ms later when the monitor naps: with 2 processors, a flush or a
// writer stays runnable that long. Where the kernel allows it (Linux
// AIO's IOCB_CMD_FSYNC and IOCB_CMD_FDSYNC, 4.18 on, run by a kernel
// worker) and f is a file of the OS's own file system (vfs.Default), the
// sync is submitted and the goroutine parks until an eventfd watched by
// the network poller reports the completion: no processor is held, so no
// gate is needed. Otherwise (another file system, a wrapper such as
// errorfs that must see the call, a kernel or sandbox without AIO) it is
// f's own method through Do. The result is the same fsync(2) or
// fdatasync(2) result either way.
//
// The price: a completion is noticed when a processor next polls the
// network, at once if one is idle, within ~10 ms (the monitor's poll) if
// all are busy. Only background calls come here: a synced write's fsync
// is the foreground and calls f.Sync directly.
func SyncData(f vfs.File) error { return syncFile(f, true) }

func syncFile(f vfs.File, data bool) error {
	if fd, ok := osFileFd(f); ok {
		if done, err := asyncSync(fd, data); done {
			asyncSyncs.Add(1)
			if err != nil {
				op := "sync"
				if data {
					op = "fdatasync"
				}
				return &os.PathError{Op: op, Path: fileName(f), Err: err}
			}
			return nil
		}
	}
	if data {
		return Do(f.SyncData)
	}
	return Do(f.Sync)
}

// asyncSyncs counts the syncs that took the asynchronous path.
var asyncSyncs atomic.Uint64

// AsyncSyncs returns how many Sync and SyncData calls the kernel ran
// asynchronously (for tests: the others went through Do).
func AsyncSyncs() uint64 { return asyncSyncs.Load() }

// osTypes are the dynamic types of vfs.Default's files and directories:
// only their Fd is the file itself, with nothing (fault injection, a
// health check) between Sync and the kernel.
var osTypes struct {
	once      sync.Once
	file, dir reflect.Type
}

func osFileFd(f vfs.File) (uintptr, bool) {
	osTypes.once.Do(func() {
		if f, err := vfs.Default.Open(os.DevNull); err == nil {
			osTypes.file = reflect.TypeOf(f)
			_ = f.Close()
		}
		if d, err := vfs.Default.OpenDir(string(os.PathSeparator)); err == nil {
			osTypes.dir = reflect.TypeOf(d)
			_ = d.Close()
		}
	})
	t := reflect.TypeOf(f)
	if t == nil || (t != osTypes.file && t != osTypes.dir) {
		return 0, false
	}
	fd := f.Fd()
	return fd, fd != vfs.InvalidFd
}

func fileName(f vfs.File) string {
	if n, ok := f.(interface{ Name() string }); ok {
		return n.Name()
	}
	return ""
}
