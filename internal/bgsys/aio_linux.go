//go:build linux && (amd64 || arm64)

package bgsys

import (
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's Linux AIO structures (include/uapi/linux/aio_abi.h), laid
// out for a little-endian 64-bit machine (hence the build constraint).
type iocb struct {
	data   uint64 // returned in the event: the waiter's id
	_      uint32 // aio_key
	_      int32  // aio_rw_flags
	opcode uint16
	_      int16 // aio_reqprio
	fildes uint32
	_      uint64 // aio_buf
	_      uint64 // aio_nbytes
	_      int64  // aio_offset
	_      uint64 // aio_reserved2
	flags  uint32
	resfd  uint32 // the eventfd signalled at completion (iocbFlagResfd)
}

// The kernel rejects an iocb of another size.
var _ [64 - unsafe.Sizeof(iocb{})]struct{}
var _ [unsafe.Sizeof(iocb{}) - 64]struct{}

type ioEvent struct {
	data uint64
	obj  uint64
	res  int64 // the fsync's result: 0 or -errno
	res2 int64
}

const (
	iocbCmdFsync  = 2
	iocbCmdFdsync = 3
	iocbFlagResfd = 1
	// aioDepth bounds the syncs in flight (the context's size): a DB has
	// a handful at most; beyond it a call takes the direct path.
	aioDepth = 64
)

// aio is the process's one AIO context, made at the first background
// sync, and the reaper's state. Concurrency: mu guards next and waiting;
// the reaper goroutine is the only reader of efd and the context's
// completion ring.
var aio struct {
	once    sync.Once
	ok      bool // the context and eventfd exist and the reaper runs
	ctx     uintptr
	efd     *os.File
	efdNum  uint32
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan int64
}

func aioInit() {
	var ctx uintptr
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, aioDepth, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		return // ENOSYS, EPERM (a sandbox), EAGAIN (aio-max-nr): the direct path
	}
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		_, _, _ = unix.Syscall(unix.SYS_IO_DESTROY, ctx, 0, 0)
		return
	}
	// A non-blocking descriptor: os registers it with the network
	// poller, so the reaper's Read parks instead of blocking a thread.
	aio.efd = os.NewFile(uintptr(fd), "vigil-aio-eventfd")
	aio.efdNum = uint32(fd)
	aio.ctx = ctx
	aio.waiting = make(map[uint64]chan int64)
	aio.ok = true
	go reap()
}

// asyncSync submits an fsync (fdatasync if data) of fd and waits, parked,
// for its result. done is false if the sync could not be submitted (no
// AIO here, the context full, a file system without fsync, which then
// fails the same way on the direct path): the caller makes the call
// itself.
func asyncSync(fd uintptr, data bool) (done bool, err error) {
	aio.once.Do(aioInit)
	if !aio.ok {
		return false, nil
	}
	ch := make(chan int64, 1)
	aio.mu.Lock()
	id := aio.next
	aio.next++
	aio.waiting[id] = ch
	aio.mu.Unlock()

	cb := &iocb{data: id, opcode: iocbCmdFsync, fildes: uint32(fd), flags: iocbFlagResfd, resfd: aio.efdNum}
	if data {
		cb.opcode = iocbCmdFdsync
	}
	cbs := [1]*iocb{cb}
	for {
		n, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, aio.ctx, 1, uintptr(unsafe.Pointer(&cbs[0])))
		if e == syscall.EINTR {
			continue
		}
		runtime.KeepAlive(cb)
		if e != 0 || n != 1 {
			aio.mu.Lock()
			delete(aio.waiting, id)
			aio.mu.Unlock()
			return false, nil
		}
		break
	}
	if res := <-ch; res < 0 {
		return true, syscall.Errno(-res)
	}
	return true, nil
}

// reap waits for the eventfd, parked in the network poller, and hands
// each completed sync's result to its waiter.
func reap() {
	var buf [8]byte
	events := make([]ioEvent, aioDepth)
	var noWait unix.Timespec
	wait := unix.NsecToTimespec(int64(10 * time.Millisecond))
	for {
		// The first call of a round waits for nothing: the eventfd said
		// completions are there. Should its Read fail (it cannot with a
		// working eventfd), never strand a waiter: block in the ring
		// instead, up to 10 ms for one completion at a time.
		timeout, minNr := &noWait, uintptr(0)
		if _, err := aio.efd.Read(buf[:]); err != nil {
			timeout, minNr = &wait, 1
		}
		for {
			n, _, e := unix.Syscall6(unix.SYS_IO_GETEVENTS, aio.ctx, minNr, aioDepth,
				uintptr(unsafe.Pointer(&events[0])), uintptr(unsafe.Pointer(timeout)), 0)
			if e == syscall.EINTR {
				continue
			}
			if e != 0 || n == 0 {
				break
			}
			aio.mu.Lock()
			for _, ev := range events[:n] {
				if ch, ok := aio.waiting[ev.data]; ok {
					delete(aio.waiting, ev.data)
					ch <- ev.res
				}
			}
			aio.mu.Unlock()
			if int(n) < aioDepth {
				break
			}
			timeout, minNr = &noWait, 0 // a full batch: take what else is there
		}
	}
}

// asyncAvailable reports whether this process can submit asynchronous
// syncs (for tests).
func asyncAvailable() bool {
	aio.once.Do(aioInit)
	return aio.ok
}

const aioDepthForTest = aioDepth
