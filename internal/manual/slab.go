package manual

import (
	"math/bits"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/vigildb/vigil/internal/invariants"
)

// MaxSlabSize is the largest buffer an Allocator carves out of a chunk;
// larger ones are mapped on their own (their waste, less than a page, is
// under 2% of them).
const MaxSlabSize = 256 << 10

// The size classes. Up to 1 KiB they are multiples of 64 bytes; above, each
// power-of-two range (2^k, 2^(k+1)] is cut into classSteps equal steps of
// 2^k/classSteps, so no buffer wastes more than 1/classSteps (6.25%) of its
// slot: a 4 KiB data block plus the entry that closed it (4097..4352 bytes)
// gets a 4352-byte slot, where powers of two would give it 8192. jemalloc
// uses quarter steps; finer ones cost only more partly filled chunks, which
// for a block cache (a few sizes dominate) are few.
const (
	smallStep    = 64
	smallLimit   = 1 << 10
	numSmall     = smallLimit / smallStep // classes 64, 128, ..., 1024
	classSteps   = 16
	firstLog     = 10 // log2(smallLimit)
	numDoublings = 8  // 1 KiB .. 256 KiB
	numClasses   = numSmall + numDoublings*classSteps
)

// A chunk holds between minSlots and maxSlots slots (maxSlots is the width
// of its free bitmap), aiming at chunkTarget bytes: a 4352-byte class gets
// 64 slots (272 KiB chunks), a 256 KiB class 16 (4 MiB). Small chunks are
// released to the OS sooner (all their slots must be free) and strand less
// memory in a size class that went out of use; 16 slots or more amortize the
// mmap, the page faults and the munmap over many buffers.
const (
	minSlots    = 16
	maxSlots    = 64
	chunkTarget = 1 << 20
	// maxRetired bounds, in invariants builds, the empty chunks a size class
	// keeps mapped but inaccessible before unmapping the oldest (see
	// Allocator).
	maxRetired = 16
)

var pageSize = os.Getpagesize()

const invariantsEnabled = invariants.Enabled

// protectFailures counts the mprotect calls of invariants builds that failed
// (so a freed slot was only poisoned, not made inaccessible).
var protectFailures atomic.Int64

// ProtectFailures returns how many freed buffers invariants builds could
// only poison, not make inaccessible, because mprotect failed (typically
// the kernel's limit on the number of mappings, vm.max_map_count, which
// per-slot protections split). Always 0 in other builds.
func ProtectFailures() int64 { return protectFailures.Load() }

// classOf returns the size class index for a buffer of n bytes, 0 < n <=
// MaxSlabSize.
func classOf(n int) int {
	if n <= smallLimit {
		return (n+smallStep-1)/smallStep - 1
	}
	k := bits.Len(uint(n-1)) - 1 // 2^k < n <= 2^(k+1)
	step := 1 << (k - 4)
	j := (n - 1<<k + step - 1) >> (k - 4) // 1..classSteps
	return numSmall + (k-firstLog)*classSteps + j - 1
}

// classSize returns the largest buffer size of class c.
func classSize(c int) int {
	if c < numSmall {
		return (c + 1) * smallStep
	}
	c -= numSmall
	k := firstLog + c/classSteps
	return 1<<k + (c%classSteps+1)<<(k-4)
}

// Stats are an Allocator's current memory use.
type Stats struct {
	// Mapped is the memory mapped from the operating system: every chunk
	// that is not yet returned (their free slots included, and one spare
	// empty chunk per size class) plus the buffers mapped on their own.
	Mapped int64
	// InUse is the slot (or mapping) size of every buffer allocated and not
	// yet freed: Mapped - InUse is the allocator's own overhead.
	InUse int64
	// Buffers is the number of buffers allocated and not yet freed.
	Buffers int64
}

// Allocator is a slab allocator of buffers outside the Go heap, for many
// short- or long-lived buffers of a few sizes: the block cache's blocks.
// (Memtable arenas, few and large, use Alloc and Free.)
//
// Buffers up to MaxSlabSize bytes are slots of chunks mapped from the OS
// (anonymous mmap): each size class (see classOf) has its own chunks, a
// doubly linked list of those with a free slot, allocation from the list's
// head, and a free bitmap per chunk. A chunk whose slots are all free is
// unmapped at once, returning its memory to the OS, except that each class
// keeps one empty spare chunk, so a buffer allocated and freed over and over
// (a read buffer, a block too large to cache) does not map and unmap a chunk
// each time. Larger buffers get mappings of their own, unmapped by Free.
// The memory is not zeroed on reuse and holds no Go pointers, so the garbage
// collector neither scans nor frees it: the owner of a Buf frees it, exactly
// once, when nothing can read it any more (the block cache counts
// references for that).
//
// # Concurrency
//
// An Allocator is safe for concurrent use: each size class has its own
// mutex, held for a few bitmap and list operations (the mmap and munmap
// calls run outside it), and the Stats counters are atomics. A Buf is
// owned by one party at a time; Free may run on any goroutine.
//
// # Invariants builds
//
// With the invariants build tag, every slot is a whole number of pages (the
// class size rounded up), and Free fills the slot with Poison and makes its
// pages inaccessible (mprotect PROT_NONE) before the slot can be reused, so
// a read or write of a freed buffer faults at once (the runtime reports the
// address and the goroutine's stack; debug.SetPanicOnFault turns it into a
// panic). Alloc makes the slot accessible again and checks that the poison
// is intact (a write after free that mprotect could not stop panics). A
// chunk hands out its free slots round robin rather than lowest first, so a
// freed slot is reused only after the other free slots of its chunk; empty
// chunks are not kept as spares nor unmapped at once: their pages are
// dropped (madvise DONTNEED, returning the memory) and stay inaccessible,
// and only the oldest beyond maxRetired per class is unmapped, so stale
// pointers into a recently emptied chunk fault too rather than reach a new
// mapping at the same address. Buffers mapped on their own are poisoned and
// made inaccessible for good, as Free does. What is not caught: a use after
// free of a slot that has since been reallocated reads the new owner's
// bytes (the window is the time until the chunk's other free slots are
// used), and if mprotect fails (the kernel's limit on mappings, which
// per-slot protections split) the slot is only poisoned. Double frees and
// frees of foreign pointers panic in every build (a bitmap check).
//
// # Lifetime
//
// An Allocator needs no Close. When it becomes unreachable (live Bufs do
// not keep it alive: they reference its state, not it), a cleanup
// (runtime.AddCleanup) unmaps its spare and retired chunks and marks the
// state closed, so that a chunk emptied later, as the last Bufs are freed,
// is unmapped at once. (A Buf dropped without Free leaks its chunk.) So a
// process that opens and closes many caches (tests: a DB per test) does
// not accumulate their spare chunks.
type Allocator struct {
	s *slabs
}

// slabs is an Allocator's state, separate so that the cleanup can reach it
// without keeping the Allocator alive. The chunks point to it, not to the
// Allocator.
type slabs struct {
	classes [numClasses]sizeClass
	// dropFreed: Free drops the whole pages inside a freed slot (see
	// NewDroppingAllocator). Set before the allocator is shared.
	dropFreed bool
	stats     struct {
		mapped, inUse, buffers atomic.Int64
	}
}

// sizeClass is one size class's chunks. Invariants (under mu): partial
// holds exactly the chunks with both free and used slots; a full chunk is
// in no list; an empty one is the spare, retired (invariants builds) or
// unmapped. Alloc takes the slot freed last if it is still free (hot, not
// in invariants builds nor dropping allocators: see takeHot), else
// partial's head; a chunk that gets a free slot goes to the tail, so
// allocation favours older, fuller chunks and lets the others drain. hot
// is nil or the chunk of the last Free, which left it partly used (it may
// have filled since).
type sizeClass struct {
	mu       sync.Mutex
	a        *slabs
	closed   bool // the Allocator is unreachable: unmap empty chunks at once
	slot     int  // bytes per slot
	nslots   int
	chunkLen int
	all      uint64 // bitmap with the nslots low bits set
	partial  chunkList
	spare    *chunk // an empty chunk kept mapped (not in invariants builds)
	// hot, hotIdx: the slot freed last (not in invariants builds, nor
	// when Free drops pages), which Alloc takes first while it is free
	// (see takeHot).
	hot     *chunk
	hotIdx  uint
	retired []*chunk // invariants builds: empty, inaccessible, oldest first
	_       [64]byte
}

// chunk is one mapping: nslots slots of a size class, or (cls == nil) one
// buffer larger than MaxSlabSize. free, poisoned, cursor, prev, next and
// inList are guarded by the class's mutex.
type chunk struct {
	a       *slabs
	cls     *sizeClass
	mem     []byte
	base    uintptr
	mmapped bool   // mem is a mapping (else a Go heap fallback)
	free    uint64 // bit i set: slot i is free
	// poisoned (invariants builds): bit i set: slot i was freed, so it
	// holds Poison and is inaccessible until allocated again.
	poisoned   uint64
	cursor     uint
	prev, next *chunk
	inList     bool
}

type chunkList struct{ head, tail *chunk }

func (l *chunkList) pushBack(c *chunk) {
	c.prev, c.next, c.inList = l.tail, nil, true
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
}

func (l *chunkList) remove(c *chunk) {
	if !c.inList {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.prev, c.next, c.inList = nil, nil, false
}

// Buf is a buffer from an Allocator. The zero Buf is empty and freeing it
// does nothing. A Buf is a small value: copy it freely, but free it once.
type Buf struct {
	b []byte
	c *chunk
}

// NewAllocator returns an empty allocator; it maps nothing until used.
func NewAllocator() *Allocator {
	a := &slabs{}
	for i := range a.classes {
		cls := &a.classes[i]
		cls.a = a
		cls.slot = classSize(i)
		if invariants.Enabled {
			cls.slot = roundUp(cls.slot, pageSize)
		}
		cls.nslots = min(max(chunkTarget/cls.slot, minSlots), maxSlots)
		cls.chunkLen = roundUp(cls.nslots*cls.slot, pageSize)
		cls.all = ^uint64(0) >> (64 - cls.nslots)
	}
	al := &Allocator{a}
	runtime.AddCleanup(al, (*slabs).close, a)
	return al
}

// NewDroppingAllocator returns an empty allocator whose Free returns a
// freed slot's memory to the OS at once: the whole pages inside the slot
// are dropped (madvise DONTNEED, on Linux) before the slot is free again,
// and its next user faults in zeroed pages.
//
// Why: an allocator of long-lived buffers of many sizes (the open tables'
// index and filter blocks, whose sizes follow their tables') ends up with
// a partly used chunk, and a spare, in each of dozens of size classes; the
// free slots there keep the pages their last owners touched, which can add
// up to many times what is in use. Dropping them costs one madvise per Free
// (which takes the kernel's mapping lock for reading only, unlike munmap)
// and page faults on reuse: right for buffers that live as long as a
// table, wrong for a block cache's churn. Elsewhere than Linux, and in
// invariants builds (which poison and protect freed slots instead), it is
// NewAllocator.
func NewDroppingAllocator() *Allocator {
	al := NewAllocator()
	al.s.dropFreed = true
	return al
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// Stats returns the allocator's current memory use (atomics, not one
// snapshot).
func (a *Allocator) Stats() Stats { return a.s.statsNow() }

// Alloc returns a buffer of n bytes (n >= 0; its length and capacity are
// n) outside the Go heap. Its contents are unspecified (a reused slot keeps
// its last owner's bytes; Poison in invariants builds). Where memory cannot
// be mapped it falls back to the Go heap, transparently.
func (a *Allocator) Alloc(n int) Buf { return a.s.alloc(n) }

// ReleaseSpares unmaps every size class's spare empty chunk (and, in
// invariants builds, every retired one). Tests use it to check that no
// memory is left mapped once every buffer is freed.
func (a *Allocator) ReleaseSpares() { a.s.releaseSpares(false) }

func (a *slabs) statsNow() Stats {
	return Stats{Mapped: a.stats.mapped.Load(), InUse: a.stats.inUse.Load(), Buffers: a.stats.buffers.Load()}
}

func (a *slabs) alloc(n int) Buf {
	if n < 0 {
		panic("manual: negative allocation")
	}
	if n > MaxSlabSize {
		return a.allocLarge(n)
	}
	cls := &a.classes[classOf(max(n, 1))]
	cls.mu.Lock()
	c, i, ok := cls.takeHot()
	if !ok {
		if c = cls.partial.head; c == nil {
			if c = cls.spare; c != nil {
				cls.spare = nil
			} else {
				cls.mu.Unlock()
				c = cls.newChunk()
				cls.mu.Lock()
			}
			cls.partial.pushBack(c)
		}
		i = c.take()
	}
	if c.free == 0 {
		cls.partial.remove(c)
	}
	poisoned := invariants.Enabled && c.poisoned&(1<<i) != 0
	c.poisoned &^= 1 << i
	cls.mu.Unlock()
	a.stats.inUse.Add(int64(cls.slot))
	a.stats.buffers.Add(1)
	off := int(i) * cls.slot
	slot := c.mem[off : off+cls.slot : off+cls.slot]
	if poisoned {
		c.unprotect(slot)
		for j, x := range slot {
			if x != Poison {
				panic("manual: a freed buffer was written to (write after free) at byte " + itoa(j))
			}
		}
	}
	return Buf{b: slot[:n:n], c: c}
}

// takeHot claims the slot freed last, if it is still free (cls.mu held);
// the caller takes c out of partial if that filled it.
//
// Why: a buffer freed a moment ago is still in the CPU's caches, and one
// filled next costs less than half what a cold one does (decoding a 4 KiB
// snappy block: 0.4 against 1.1 µs on the CI machine kind): a
// block the cache did not keep is read, used and freed, and the next miss
// writes over the same lines instead of a slot untouched for seconds.
func (cls *sizeClass) takeHot() (*chunk, uint, bool) {
	c := cls.hot
	if c == nil {
		return nil, 0, false
	}
	cls.hot = nil
	bit := uint64(1) << cls.hotIdx
	if c.free&bit == 0 {
		return nil, 0, false
	}
	c.free &^= bit
	return c, cls.hotIdx, true
}

// take claims a free slot of c (which has one) and returns its index.
func (c *chunk) take() uint {
	m := c.free
	if invariants.Enabled {
		// Round robin: the first free slot at or after the cursor.
		if r := m &^ (1<<c.cursor - 1); r != 0 {
			m = r
		}
	}
	i := uint(bits.TrailingZeros64(m))
	c.free &^= 1 << i
	c.cursor = (i + 1) % uint(c.cls.nslots)
	return i
}

func (cls *sizeClass) newChunk() *chunk {
	mem, mmapped := mapMem(cls.chunkLen)
	c := &chunk{a: cls.a, cls: cls, mem: mem, base: uintptr(unsafe.Pointer(unsafe.SliceData(mem))), mmapped: mmapped, free: cls.all}
	cls.a.stats.mapped.Add(int64(cls.chunkLen))
	return c
}

func (a *slabs) allocLarge(n int) Buf {
	size := roundUp(n, pageSize)
	mem, mmapped := mapMem(size)
	c := &chunk{a: a, mem: mem, base: uintptr(unsafe.Pointer(unsafe.SliceData(mem))), mmapped: mmapped}
	a.stats.mapped.Add(int64(size))
	a.stats.inUse.Add(int64(size))
	a.stats.buffers.Add(1)
	return Buf{b: mem[:n:n], c: c}
}

// HeapBuf wraps b, a slice of the Go heap, as a Buf, for code that holds
// either kind (the block cache's entries, whose buffers are on the heap
// when there is no cache): Bytes returns b, Size 0, and Free does nothing,
// leaving b to the collector.
func HeapBuf(b []byte) Buf { return Buf{b: b} }

// Bytes returns the buffer (length and capacity as allocated). It must not
// be used after Free.
func (b Buf) Bytes() []byte { return b.b }

// Size returns the memory the buffer takes: its slot's size, or for a large
// buffer its mapping's (whole pages). 0 for the zero Buf.
func (b Buf) Size() int {
	switch {
	case b.c == nil:
		return 0
	case b.c.cls == nil:
		return len(b.c.mem)
	}
	return b.c.cls.slot
}

// Free returns the buffer to its allocator. b must come from Alloc and not
// be freed already; nothing may use its bytes afterwards.
func (b Buf) Free() {
	c := b.c
	if c == nil {
		return
	}
	a := c.a
	if c.cls == nil {
		a.stats.mapped.Add(-int64(len(c.mem)))
		a.stats.inUse.Add(-int64(len(c.mem)))
		a.stats.buffers.Add(-1)
		if c.mmapped {
			creditWarm(len(c.mem)) // see warm: as mapMem's releaseWarm
			freeLarge(c.mem)
		}
		return
	}
	cls := c.cls
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b.b))) - c.base
	i := uint(off / uintptr(cls.slot))
	if off%uintptr(cls.slot) != 0 || i >= uint(cls.nslots) {
		panic("manual: Free of a buffer that does not start a slot of its chunk")
	}
	bit := uint64(1) << i
	if a.dropFreed && !invariants.Enabled && c.mmapped {
		// Before the slot is free: once it is, another Alloc may fill it.
		creditWarm(dropPages(c.mem[off : off+uintptr(cls.slot)])) // see warm
	}
	var unmap *chunk
	cls.mu.Lock()
	if c.free&bit != 0 {
		cls.mu.Unlock()
		panic("manual: buffer freed twice")
	}
	if invariants.Enabled {
		// Before the slot is free for another Alloc: poison it, then make
		// it fault.
		slot := c.mem[off : off+uintptr(cls.slot)]
		for j := range slot {
			slot[j] = Poison
		}
		c.protect(slot)
		c.poisoned |= bit
	}
	wasFull := c.free == 0
	c.free |= bit
	if !invariants.Enabled && !a.dropFreed {
		// A dropping allocator's freed slot has no pages left to be hot.
		cls.hot, cls.hotIdx = c, i
	}
	switch {
	case c.free == cls.all:
		cls.hot = nil
		cls.partial.remove(c)
		switch {
		case cls.closed:
			unmap = c
			a.stats.mapped.Add(-int64(len(c.mem)))
		case invariants.Enabled:
			unmap = cls.retire(c)
		case cls.spare == nil:
			cls.spare = c
		default:
			unmap = c
			a.stats.mapped.Add(-int64(len(c.mem)))
		}
	case wasFull:
		cls.partial.pushBack(c)
	}
	cls.mu.Unlock()
	a.stats.inUse.Add(-int64(cls.slot))
	a.stats.buffers.Add(-1)
	if unmap != nil && unmap.mmapped {
		creditWarm(len(unmap.mem)) // see warm: as mapMem's releaseWarm
		unmapMem(unmap.mem)
	}
}

// retire (invariants builds; cls.mu held) takes empty chunk c out of use:
// its pages (all inaccessible already) are dropped and it stays mapped,
// inaccessible, until maxRetired younger chunks of its class are retired.
// It returns the chunk to unmap now, if any. Retired chunks no longer count
// as Mapped: their memory is returned.
func (cls *sizeClass) retire(c *chunk) *chunk {
	cls.a.stats.mapped.Add(-int64(len(c.mem)))
	if c.mmapped {
		dontNeed(c.mem)
	}
	cls.retired = append(cls.retired, c)
	if len(cls.retired) <= maxRetired {
		return nil
	}
	old := cls.retired[0]
	copy(cls.retired, cls.retired[1:])
	cls.retired[len(cls.retired)-1] = nil
	cls.retired = cls.retired[:len(cls.retired)-1]
	return old
}

// close is the cleanup of an unreachable Allocator.
func (a *slabs) close() { a.releaseSpares(true) }

func (a *slabs) releaseSpares(closing bool) {
	for i := range a.classes {
		cls := &a.classes[i]
		cls.mu.Lock()
		spare, retired := cls.spare, cls.retired
		cls.spare, cls.retired = nil, nil
		if closing {
			cls.closed = true
		}
		cls.mu.Unlock()
		if spare != nil {
			a.stats.mapped.Add(-int64(len(spare.mem)))
			if spare.mmapped {
				creditWarm(len(spare.mem))
				unmapMem(spare.mem)
			}
		}
		for _, c := range retired {
			if c.mmapped {
				unmapMem(c.mem)
			}
		}
	}
}

func (c *chunk) protect(slot []byte) {
	if c.mmapped {
		protectMem(slot, false)
	}
}

func (c *chunk) unprotect(slot []byte) {
	if c.mmapped {
		protectMem(slot, true)
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(b[i:])
		}
	}
}
