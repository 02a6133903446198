// Package bgsys keeps the Go scheduler's processors available to the
// foreground while Vigil's background goroutines (the WAL flusher, flushes,
// compactions) sit in system calls that can block for milliseconds: fsyncs
// above all. (The memtable fault-ahead worker, whose page faults are not
// system calls, leaves its processor another way: manual.populate.)
//
// Why it is needed: a goroutine in a system call keeps its processor (P)
// until the runtime's monitor takes it back, and the monitor, which backs
// off to 10 ms naps while nothing happens, takes it back only on its
// second look: 20 µs to 20 ms after the call began. With as many
// background goroutines blocked in fsync as there are processors, a
// foreground writer made runnable meanwhile waits all that time. Traced on
// the 2-core benchmark machine (kvbench fillrandom, 2M keys): the slowest
// write was the writer runnable for 10.2 ms while a compaction's table
// fsync and the WAL's bytes-per-sync fsync held both processors.
//
// The tools:
//   - Sync and SyncData fsync a background goroutine's file without
//     holding a processor at all where the kernel can run the sync on its
//     own (Linux AIO): the goroutine parks until the completion arrives.
//     Elsewhere, and for files of other file systems, they go through Do.
//   - Do runs a background call so that at most GOMAXPROCS-1 of them are
//     in progress at once in the process (at least one: with GOMAXPROCS=1
//     nothing better is possible); the others wait parked, which frees
//     their processors. Calls a foreground goroutine waits on directly (a
//     synced write's WAL fsync) do not go through Do: they are the
//     foreground.
//   - Yield lets goroutines the caller just woke run before it enters a
//     call that may block: a woken goroutine waits in the waker's run-next
//     slot, and a processor blocked in a system call keeps it there until
//     the monitor notices.
//
// # Platforms
//
// The asynchronous sync is Linux AIO on amd64 and arm64 only (aio_linux.go:
// the kernel's structures are laid out for a little-endian 64-bit machine).
// Everywhere else (other Linux architectures, macOS, the BSDs, Windows),
// and on a Linux kernel or sandbox without AIO, Sync and SyncData call the
// file's own Sync or SyncData through Do: the call vfs.Default makes
// anyway (fsync or fdatasync; F_FULLFSYNC on macOS; FlushFileBuffers on
// Windows, where a directory's sync is a no-op in vfs.Default because
// Windows cannot sync one), with its result. So durability and errors are
// what the platform's file system gives, as without this package; the
// fallback loses only that a blocked sync holds one of the processors Do
// leaves to the background. Do and Yield are plain Go, the same everywhere.
//
// Concurrency: Sync, SyncData, Do and Yield are safe for concurrent use. A function run by
// Do must not call Do (it would hold a slot while waiting for one).
package bgsys

import (
	"runtime"
	"sync"
)

var gate struct {
	mu   sync.Mutex
	cond sync.Cond
	busy int // calls in progress
}

func init() { gate.cond.L = &gate.mu }

// limit is the number of background calls allowed at once: all processors
// but one (read at each call: GOMAXPROCS may change at run time).
func limit() int { return max(runtime.GOMAXPROCS(0)-1, 1) }

// Do runs fn, a background goroutine's system call that may block for long,
// once fewer than GOMAXPROCS-1 such calls are in progress, and returns its
// error. It yields first (see Yield), for the goroutines the caller may
// have woken on its way here.
func Do(fn func() error) error {
	gate.mu.Lock()
	for gate.busy >= limit() {
		gate.cond.Wait()
	}
	gate.busy++
	gate.mu.Unlock()
	defer func() {
		gate.mu.Lock()
		gate.busy--
		gate.cond.Signal()
		gate.mu.Unlock()
	}()
	Yield()
	return fn()
}

// Yield lets the goroutines the caller just woke (by an Unlock, a Signal, a
// channel send) run before the caller enters a system call that may block.
// It costs a trip through the scheduler, a microsecond or two, and has a
// price measured elsewhere: the yielding goroutine resumes on whichever
// processor picks it up next, and a CPU-bound flush that yields every 1,024
// entries picks it up, then waits behind its system calls. With the WAL
// flusher yielding, a sequential fill (2M keys, 64 MiB buffers) flushed at
// half the speed (Flush of the last memtables 0.27-0.41 s -> 0.61-0.85 s)
// and bench/peers' ondisk peak RSS rose from ~190 to ~245 MiB; without it,
// fillrandom's P99 was 21-23 µs instead of 12-14 µs, its slowest write
// 9-11 ms instead of 4-7 ms, and its rate ~10 % lower (2 cores). The WAL
// flusher yields: random writes are the common case.
func Yield() { runtime.Gosched() }

// InProgress returns how many calls Do is running (for tests).
func InProgress() int {
	gate.mu.Lock()
	defer gate.mu.Unlock()
	return gate.busy
}
