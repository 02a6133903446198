package skiplist

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"
)

// MaxArenaSize is the largest arena: node and key offsets are uint32, and the
// last 8-byte key-prefix load of a node must still be addressable. On 32-bit
// platforms an int bounds it further.
const MaxArenaSize = min(1<<32-64, math.MaxInt)

// arenaStart is the first offset handed out. Offset 0 means "no node", so it
// is never a valid allocation; starting at 8 puts the first allocation (the
// head sentinel's, tall) at the 8-byte boundary (towerAlign) that 64-bit
// atomic tower links need.
const arenaStart = 8

// arenaTail is how many bytes at the buffer's end the arena never hands
// out: a node's header and its first 8 key bytes take 20 bytes, or 28 when
// its lengths are escaped (see layout), and searches load them from any
// offset that can be a node before they know which. Keeping 8 bytes back
// keeps those loads inside the buffer whatever a damaged lens word says.
const arenaTail = 8

// Arena is a fixed-size byte buffer that Skiplist nodes, keys and values are
// bump-allocated from. It is allocated once; nothing is ever freed or moved,
// so an offset stays valid (and the bytes behind it stay put) for the arena's
// whole life. That is what lets readers follow links without locks.
//
// Concurrency: alloc is lock-free and safe for concurrent use (a CAS loop on
// the used counter), but for an allocation that would end past the limit
// (see OnLimit), which waits for the limit hook. A failed allocation
// consumes nothing, so a caller that reserved capacity up front (see
// memtable.Reserve) can rely on it.
//
// Invariant: used <= limit, so no allocation has handed out a byte at or
// past the limit: the limit hook's owner may replace the pages there
// (manual.FaultAhead moves warm pages in) while the list is in use.
//
// Several skiplists may share one arena (the memtable keeps its point entries
// and its range tombstones in one arena so one size limit covers both).
type Arena struct {
	used atomic.Uint64
	buf  []byte
	base unsafe.Pointer // &buf[0], cached for offset->pointer conversion

	// growAt is the used size at which alloc calls grow next (MaxUint64:
	// no hook, or a call in progress). See OnGrow.
	growAt atomic.Uint64
	grow   func(used int) (next int)

	// limit is the end of the part of buf that allocations may use without
	// asking (MaxUint64: no limit hook); it only grows. extend is the hook
	// that moves it (OnLimit), called under extendMu.
	limit    atomic.Uint64
	extendMu sync.Mutex
	extend   func(need int) (limit int)
}

// NewArena allocates an arena of the given capacity in bytes. The capacity
// must be at least large enough for one list's sentinels (MinArenaSize) and at
// most MaxArenaSize; otherwise the error wraps ErrInvalidArgument.
func NewArena(capacity int) (*Arena, error) {
	if capacity < MinArenaSize || capacity > MaxArenaSize {
		return nil, fmt.Errorf("%w: arena capacity %d outside [%d, %d]",
			ErrInvalidArgument, capacity, MinArenaSize, MaxArenaSize)
	}
	a := &Arena{buf: make([]byte, capacity)}
	a.base = unsafe.Pointer(unsafe.SliceData(a.buf))
	a.used.Store(arenaStart)
	a.growAt.Store(math.MaxUint64)
	a.limit.Store(math.MaxUint64)
	return a, nil
}

// NewArenaFrom makes an arena of buf, which the caller allocated (outside
// the Go heap, say) and must keep alive, unmodified but by the arena, for as
// long as any list in it is used. buf must be all zeros, and start at an
// 8-byte boundary (tower links are 64-bit atomic words).
func NewArenaFrom(buf []byte) (*Arena, error) {
	if len(buf) < MinArenaSize || len(buf) > MaxArenaSize {
		return nil, fmt.Errorf("%w: arena capacity %d outside [%d, %d]",
			ErrInvalidArgument, len(buf), MinArenaSize, MaxArenaSize)
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%towerAlign != 0 {
		return nil, fmt.Errorf("%w: arena buffer does not start at an 8-byte boundary", ErrInvalidArgument)
	}
	a := &Arena{buf: buf}
	a.base = unsafe.Pointer(unsafe.SliceData(a.buf))
	a.used.Store(arenaStart)
	a.growAt.Store(math.MaxUint64)
	a.limit.Store(math.MaxUint64)
	return a, nil
}

// OnGrow makes the arena call fn(used) from the allocation that takes its
// used size to or past at, and then to or past whatever fn returned, for
// as long as the arena is used. It is how the memtable faults the arena's
// pages in ahead of its fill point (manual.FaultAhead) without a cost per
// allocation beyond one comparison.
//
// fn runs on the allocating goroutine, after its allocation, never
// concurrently with itself (allocations that cross meanwhile skip it); it
// must be quick and must not block. OnGrow must be called before the
// arena is shared.
func (a *Arena) OnGrow(at int, fn func(used int) (next int)) {
	a.grow = fn
	a.growAt.Store(uint64(max(at, 0)))
}

// OnLimit limits allocations to the first limit bytes of the buffer until
// fn says otherwise: an allocation that would end past the limit first
// calls fn(need), its end offset, which must make the buffer usable up to
// at least need (or to its end) and return the new limit. RaiseLimit
// moves the limit from elsewhere. Bytes at and past the limit are never
// handed out, so their pages are the hook owner's to replace until then:
// that is how the memtable lets manual.FaultAhead move resident pages of a
// freed arena in ahead of the fill point.
//
// fn is called under a mutex, never concurrently with itself, and may
// block (the allocation waits for it). OnLimit must be called before the
// arena is shared, and at most once.
func (a *Arena) OnLimit(limit int, fn func(need int) (limit int)) {
	a.extend = fn
	a.limit.Store(uint64(max(limit, 0)))
}

// RaiseLimit moves the limit set by OnLimit up to limit, if it is below.
// Safe for concurrent use.
func (a *Arena) RaiseLimit(limit int) {
	for {
		old := a.limit.Load()
		if uint64(limit) <= old || a.limit.CompareAndSwap(old, uint64(limit)) {
			return
		}
	}
}

// reach makes the limit at least n by calling the limit hook.
func (a *Arena) reach(n uint64) {
	a.extendMu.Lock()
	defer a.extendMu.Unlock()
	if n <= a.limit.Load() {
		return
	}
	l := uint64(max(a.extend(int(n)), 0))
	if l < n {
		// The hook could not make the bytes ready: nothing is replaced
		// from now on, so they fault in as in any arena.
		l = math.MaxUint64
	}
	a.RaiseLimit(int(min(l, math.MaxInt)))
}

// Size returns the number of bytes allocated so far, including the reserved
// first bytes and the sentinels of every list in the arena.
func (a *Arena) Size() int { return int(a.used.Load()) }

// Capacity returns the arena's size limit in bytes: the buffer's size less
// the arenaTail bytes it never hands out.
func (a *Arena) Capacity() int { return len(a.buf) - arenaTail }

// Bytes returns the allocated part of the arena, [0, Size()). It aliases the
// arena: it exists for diagnostics and for tests that simulate memory
// corruption by flipping bytes in place. Writing to it while other goroutines
// read the list is a data race.
func (a *Arena) Bytes() []byte { return a.buf[:a.used.Load()] }

// alloc reserves size bytes (a multiple of nodeAlign) and returns the offset of
// the first, which is a multiple of align (nodeAlign or towerAlign; the
// nodeAlign bytes skipped to align are zero and belong to no node). ok is
// false if the arena cannot hold them; nothing is consumed then.
func (a *Arena) alloc(size, align uint32) (off uint32, ok bool) {
	for {
		old := a.used.Load()
		start := (old + uint64(align) - 1) &^ uint64(align-1)
		n := start + uint64(size)
		if n > uint64(len(a.buf)-arenaTail) {
			return 0, false
		}
		if n > a.limit.Load() {
			a.reach(n)
			continue
		}
		if a.used.CompareAndSwap(old, n) {
			if n >= a.growAt.Load() {
				a.grew(n)
			}
			return uint32(start), true
		}
	}
}

// grew calls the OnGrow hook for used size n, unless another allocation
// is already calling it.
func (a *Arena) grew(n uint64) {
	at := a.growAt.Load()
	if n < at || !a.growAt.CompareAndSwap(at, math.MaxUint64) {
		return
	}
	a.growAt.Store(uint64(max(a.grow(int(n)), 0)))
}
