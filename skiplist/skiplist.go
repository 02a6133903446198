// Package skiplist is a lock-free, arena-allocated skiplist over []byte keys
// and values: the ordered in-memory structure under Vigil's memtable.
//
// # Concurrency contract
//
// Any number of goroutines may insert (Add, Link, Inserter.Add) at the same
// time, and any number of goroutines may read (iterators) at the same time as
// the writers, without locks. An Iterator itself belongs to one goroutine.
// Insertion links a node bottom-up with one compare-and-swap per level; the
// level-0 CAS is the linearization point, after which every new search and
// every Next step that passes the spot sees the node. Nodes are never removed
// or moved, and a node's key, value and lengths are written before it is
// published and never again, so a reader that reached a node through an atomic
// link load may read them without synchronization.
//
// Level 0 is doubly linked so Prev is one load, not a new search. Back links
// are maintained with a help-along protocol: before an inserter moves a back
// link, it first repairs the back link a previous inserter may not have set
// yet. A back link can therefore lag behind the forward link for the moment
// between an inserter's two CASes (Prev then skips a node that is still being
// inserted, which callers already ignore by sequence number), but once all
// inserts have returned, every node's back link names its level-0 predecessor.
//
// # Invariants
//
//   - At every level, keys strictly increase along the next links from the
//     head sentinel to the tail sentinel; equal keys are rejected
//     (ErrRecordExists).
//   - Every node linked at level i > 0 is linked at all levels below i.
//   - Offsets are uint32 into one Arena; 0 means "no node". The arena is a
//     hard size cap: when it is full, inserts fail with ErrArenaFull and the
//     list stays intact and readable.
//
// # Node layout
//
// A node's offset points at its level-0 link; the upper part of its tower
// grows towards lower addresses, so the level-0 links, the lengths and the
// first 8 key bytes (everything a level-0 step or a compare touches) lie in 24
// adjacent bytes whatever the node's height. Only level 0 has a back link:
//
//	                              node offset
//	                                   |
//	                                   v
//	+------------+-----+---------+-----------+-----------+----------+----------+-----------+---------------+
//	| next[h-1]  | ... | next[1] | next[0]   | prev[0]   | keyLen   | valueLen | key bytes | value bytes   |
//	| uint32     |     | uint32  | uint32    | uint32    | uint32   | uint32   |           | (pad to >= 8) |
//	+------------+-----+---------+-----------+-----------+----------+----------+-----------+---------------+
//	 -4(h-1)            -4        +0          +4          +8         +12        +16
//
// Key and value together are padded to at least 8 bytes (and to a multiple of
// 4) so that loading the first 8 key bytes never reads past the node. The head
// sentinel has the maximum height, the tail sentinel height 1.
//
// # Abbreviated keys
//
// Searches compare the first 8 bytes of a key, loaded big-endian as one
// uint64, before calling the full comparison: for most pairs of keys one
// integer compare decides, on a cache line the search has already loaded. The
// abbreviation is computed from the key bytes themselves (it is not a second
// copy that could disagree with them), so a corrupted key byte is seen by the
// integer compare exactly as by a full compare. Abbreviation needs an order
// that starts with the bytewise order of a key prefix: the default bytewise
// order (prefix = whole key) and InternalKeys (prefix = key minus its 8-byte
// trailer). A caller-given Compare function gets no abbreviation and is called
// for every comparison.
//
// # Validation
//
// In validating mode (Options.Validate, or per iterator) every link a search
// follows and every Next/Prev step checks that the two neighbouring nodes are
// in strictly increasing order and that the link points at a possible node
// inside the arena. First also checks the first node against its successor;
// Last and every Prev also check the node they land on against its
// predecessor (a look-behind the next Prev reuses), so damage is reported on
// the step that reaches it from either side. A violation makes the iterator
// invalid and Error returns an error wrapping ErrCorruption naming both keys
// in hex. The check is folded into the search's own comparisons: a link x→y
// needs its own compare only when the search moves past y (the probe is
// greater than both); otherwise x < probe <= y already proves x < y.
// Validated inserts search the same way before linking.
//
// Without validation the hot paths contain no validation code at all
// (separate loops). A corrupted link can then send a read anywhere: wrong
// results, an endless loop on a cycle, or a crash. Key and value lengths are
// checked either way by Iterator.Entry (an error) or Key/Value (a bounds-check
// panic), never read past the arena.
//
// Order checks see what the order sees: a corruption that keeps every pair of
// neighbours in order (a changed value, or a key byte that does not move the
// key past a neighbour) needs the memtable's per-entry checksums to be found.
package skiplist

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
	"unsafe"
)

// Error sentinels. The skiplist imports nothing of Vigil's, so the memtable
// wraps these with Vigil's own sentinels at its boundary.
var (
	// ErrArenaFull means the arena cannot hold the new node. Nothing was
	// inserted and nothing was consumed; the caller rotates to a new list.
	ErrArenaFull = errors.New("skiplist: arena full")
	// ErrRecordExists means a key equal to the new one is already in the list.
	ErrRecordExists = errors.New("skiplist: record already exists")
	// ErrCorruption means a validating read or insert found keys out of order,
	// or a link or length pointing outside the arena.
	ErrCorruption = errors.New("skiplist: corruption")
	// ErrInvalidArgument marks bad options, sizes or keys given by the caller.
	ErrInvalidArgument = errors.New("skiplist: invalid argument")
)

const (
	// MaxHeight is the tallest tower a node can have. With a branching factor
	// of 2 searches stay logarithmic up to 2^19 (about 520k) nodes, a 64 MiB
	// memtable of db_bench entries; a list ten times larger has about 20
	// nodes per top-level step, all of them cache-hot.
	MaxHeight = 20

	linkSize   = 4                          // one uint32 offset
	nodeHeader = 16                         // next[0], prev[0], keyLen, valueLen
	minKV      = 8                          // key+value padded to this, see the package doc
	nodeAlign  = 4                          // every allocation is a multiple of this
	maxTower   = (MaxHeight - 1) * linkSize // upper tower of a full-height node

	offNext0  = 0
	offPrev0  = 4
	offKeyLen = 8
	offValLen = 12
	offKey    = nodeHeader

	// sentinelSize is the arena space of one empty node of height h.
	headSize = maxTower + nodeHeader + minKV
	tailSize = nodeHeader + minKV
)

// MinArenaSize is the smallest arena that can hold one list's sentinels.
const MinArenaSize = arenaStart + headSize + tailSize

// nodeSize returns the arena bytes of a node of height h with the given key
// and value lengths.
func nodeSize(h int, keyLen, valueLen uint64) uint64 {
	kv := keyLen + valueLen
	if kv < minKV {
		kv = minKV
	}
	kv = (kv + nodeAlign - 1) &^ (nodeAlign - 1)
	return uint64(h-1)*linkSize + nodeHeader + kv
}

// MaxNodeSize returns the most arena bytes one insert of a key and value of
// these lengths can consume (a full-height tower). Callers that reserve arena
// capacity ahead of inserting use it.
func MaxNodeSize(keyLen, valueLen int) int {
	return int(nodeSize(MaxHeight, uint64(keyLen), uint64(valueLen)))
}

type order uint8

const (
	orderBytewise order = iota
	orderInternal
	orderFunc
)

// noAbbrev is subtracted from key lengths under a caller-given Compare so that
// every abbreviation is 0 and the full comparison always decides.
const noAbbrev = 1 << 40

// Options configure a Skiplist. The zero value is a bytewise-ordered list
// without validation.
type Options struct {
	// Compare orders keys. nil means bytewise order (bytes.Compare), which
	// gets abbreviated-key comparisons. A caller-given function is called for
	// every comparison; it must not retain its arguments.
	Compare func(a, b []byte) int
	// InternalKeys selects the built-in order for keys laid out as
	// prefix ‖ 8-byte little-endian trailer: prefix bytewise ascending, then
	// trailer descending (Vigil's internal keys, where the trailer is
	// seqnum<<8|kind and newer versions sort first). Keys must be at least 8
	// bytes long. It gets abbreviated keys over the prefix and needs no
	// function call per comparison. Compare must be nil.
	InternalKeys bool
	// Validate turns on validating mode for every iterator and insert of the
	// list (see the package doc). Iterators can also turn it on one by one.
	Validate bool
	// MaxHeight caps the tower height of new nodes, 1..MaxHeight; 0 means
	// MaxHeight. Tests use 1 to get a plain linked list whose neighbours are
	// predictable.
	MaxHeight int
	// CheckNeighbor, if set, is called on the key and value of the nodes
	// an insert is about to link its node between at level 0, before it
	// does; an error aborts the insert. The memtable verifies their
	// per-entry checksums there: an insert's search compares those nodes
	// with the new key without reading them whole, so a corrupted key
	// could otherwise steer the new node to a wrong place, where later
	// reads would miss it without any error.
	CheckNeighbor func(key, value []byte) error
}

// Skiplist is an ordered set of key/value pairs in an Arena. See the package
// doc for the concurrency contract and invariants.
type Skiplist struct {
	arena *Arena
	buf   []byte         // arena.buf
	base  unsafe.Pointer // &buf[0]
	head  uint32
	tail  uint32
	// limit is the largest offset a node may have and still own its header
	// and first 8 key bytes inside the arena; validating reads check links
	// against [head, limit]. span4 is (limit-head)/4, see inBounds.
	limit uint32
	span4 uint32

	height atomic.Uint32 // current list height, 1..maxHeight

	order        order
	abbrevSuffix int64 // key bytes after the abbreviated prefix (0, 8, or noAbbrev)
	cmp          func(a, b []byte) int
	validate     bool
	maxHeight    int
	checkNeigh   func(key, value []byte) error

	// testYield, when set by tests, runs between the steps of an insert to
	// widen the race windows the help-along protocol must cover.
	testYield func()
}

// New creates an empty list whose nodes live in arena. It allocates the head
// and tail sentinels in the arena, so it fails with ErrArenaFull if the arena
// has no room for them.
func New(arena *Arena, o Options) (*Skiplist, error) {
	if arena == nil {
		return nil, fmt.Errorf("%w: nil arena", ErrInvalidArgument)
	}
	if o.InternalKeys && o.Compare != nil {
		return nil, fmt.Errorf("%w: Compare and InternalKeys are exclusive", ErrInvalidArgument)
	}
	if o.MaxHeight < 0 || o.MaxHeight > MaxHeight {
		return nil, fmt.Errorf("%w: MaxHeight %d outside [0, %d]", ErrInvalidArgument, o.MaxHeight, MaxHeight)
	}
	l := &Skiplist{
		arena:      arena,
		buf:        arena.buf,
		base:       arena.base,
		validate:   o.Validate,
		maxHeight:  o.MaxHeight,
		checkNeigh: o.CheckNeighbor,
	}
	if l.maxHeight == 0 {
		l.maxHeight = MaxHeight
	}
	switch {
	case o.InternalKeys:
		l.order, l.abbrevSuffix = orderInternal, 8
	case o.Compare != nil:
		l.order, l.abbrevSuffix, l.cmp = orderFunc, noAbbrev, o.Compare
	default:
		l.order = orderBytewise
	}
	h, ok := arena.alloc(headSize)
	if !ok {
		return nil, fmt.Errorf("%w: no room for the list sentinels", ErrArenaFull)
	}
	t, ok := arena.alloc(tailSize)
	if !ok {
		return nil, fmt.Errorf("%w: no room for the list sentinels", ErrArenaFull)
	}
	l.head = h + maxTower
	l.tail = t
	// The arena is zeroed, so key and value lengths are already 0. Nothing
	// reads the new list before New returns, so plain stores suffice.
	for i := 0; i < MaxHeight; i++ {
		*l.nextPtr(l.head, i) = l.tail
	}
	*l.prevPtr(l.tail) = l.head
	l.limit = uint32(len(l.buf) - offKey - minKV)
	l.span4 = (l.limit - l.head) / nodeAlign
	l.height.Store(1)
	return l, nil
}

// Arena returns the arena the list allocates from.
func (l *Skiplist) Arena() *Arena { return l.arena }

// Height returns the current height of the list (the tallest tower, at least 1).
func (l *Skiplist) Height() int { return int(l.height.Load()) }

// Validating reports whether the list validates every read and insert.
func (l *Skiplist) Validating() bool { return l.validate }

// Compare compares two keys under the list's order.
func (l *Skiplist) Compare(a, b []byte) int {
	switch l.order {
	case orderBytewise:
		return bytes.Compare(a, b)
	case orderInternal:
		return compareInternal(a, b)
	}
	return l.cmp(a, b)
}

// compareInternal orders prefix ‖ LE trailer keys. A key shorter than the
// trailer (only possible through corruption) compares by its raw bytes.
func compareInternal(a, b []byte) int {
	na, nb := len(a)-8, len(b)-8
	if na < 0 || nb < 0 {
		return bytes.Compare(a, b)
	}
	if c := bytes.Compare(a[:na], b[:nb]); c != 0 {
		return c
	}
	return compareTrailers(binary.LittleEndian.Uint64(a[na:]), binary.LittleEndian.Uint64(b[nb:]))
}

// compareTrailers orders trailers descending: the newer version sorts first.
func compareTrailers(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// ---- raw node access ----------------------------------------------------

func (l *Skiplist) nextPtr(off uint32, level int) *uint32 {
	return (*uint32)(unsafe.Add(l.base, int(off)-linkSize*level))
}

func (l *Skiplist) prevPtr(off uint32) *uint32 {
	return (*uint32)(unsafe.Add(l.base, int(off)+offPrev0))
}

func (l *Skiplist) loadNext(off uint32, level int) uint32 {
	return atomic.LoadUint32(l.nextPtr(off, level))
}

func (l *Skiplist) loadPrev(off uint32) uint32 {
	return atomic.LoadUint32(l.prevPtr(off))
}

func (l *Skiplist) keyLen(off uint32) uint32 {
	return *(*uint32)(unsafe.Add(l.base, int(off)+offKeyLen))
}

func (l *Skiplist) valueLen(off uint32) uint32 {
	return *(*uint32)(unsafe.Add(l.base, int(off)+offValLen))
}

// abbrevAt returns the abbreviated key of the node at off: the first 8 bytes
// of its key prefix, big-endian, zero-padded. It reads 8 bytes at the key
// start, which the node layout keeps inside the node.
func (l *Skiplist) abbrevAt(off uint32) uint64 {
	p := unsafe.Add(l.base, off)
	kl := *(*uint32)(unsafe.Add(p, offKeyLen))
	v := binary.BigEndian.Uint64((*[8]byte)(unsafe.Add(p, offKey))[:])
	return v & prefixMask(int64(kl)-l.abbrevSuffix)
}

// prefixMask keeps the first n bytes of a big-endian abbreviation.
func prefixMask(n int64) uint64 {
	if n >= 8 {
		return ^uint64(0)
	}
	if n <= 0 {
		return 0
	}
	return ^uint64(0) << (64 - 8*uint(n))
}

// abbrevOf is abbrevAt for a probe held in a slice (the key prefix).
func (l *Skiplist) abbrevOf(prefix []byte) uint64 {
	if l.order == orderFunc {
		return 0
	}
	if len(prefix) >= 8 {
		return binary.BigEndian.Uint64(prefix)
	}
	var v uint64
	for i, c := range prefix {
		v |= uint64(c) << (56 - 8*uint(i))
	}
	return v
}

// keyAt returns the key of the node at off. Slicing is bounds-checked, so a
// corrupted length panics rather than reading outside the arena; validating
// paths call checkExtent first and report an error instead.
func (l *Skiplist) keyAt(off uint32) []byte {
	s := int(off) + offKey
	e := s + int(l.keyLen(off))
	return l.buf[s:e:e]
}

func (l *Skiplist) valueAt(off uint32) []byte {
	s := int(off) + offKey + int(l.keyLen(off))
	e := s + int(l.valueLen(off))
	return l.buf[s:e:e]
}

// inBounds reports whether off can be a node: at or after the head, 4-aligned,
// with its header and 8 key bytes inside the arena. One compare: rotating
// off-head right by 2 moves misalignment bits to the top, where they exceed
// span4 (< 2^30), and leaves (off-head)/4 for aligned offsets.
func (l *Skiplist) inBounds(off uint32) bool {
	return bits.RotateLeft32(off-l.head, -2) <= l.span4
}

// entry returns the key and value of the node at off after one check that
// both lie inside the arena; ok is false if a corrupted length says
// otherwise. It replaces the two bounds-checked slicings of keyAt and valueAt.
func (l *Skiplist) entry(off uint32) (key, value []byte, ok bool) {
	p := unsafe.Add(l.base, off)
	kl := uint64(*(*uint32)(unsafe.Add(p, offKeyLen)))
	vl := uint64(*(*uint32)(unsafe.Add(p, offValLen)))
	if uint64(off)+offKey+kl+vl > uint64(len(l.buf)) {
		return nil, nil, false
	}
	k := unsafe.Add(p, offKey)
	return unsafe.Slice((*byte)(k), kl), unsafe.Slice((*byte)(unsafe.Add(k, kl)), vl), true
}

// checkExtent verifies that the node's key and value lie inside the arena.
func (l *Skiplist) checkExtent(off uint32) error {
	end := uint64(off) + offKey + uint64(l.keyLen(off)) + uint64(l.valueLen(off))
	if end > uint64(len(l.buf)) {
		return fmt.Errorf("%w: skiplist node at offset %d claims key length %d and value length %d, past the arena end %d",
			ErrCorruption, off, l.keyLen(off), l.valueLen(off), len(l.buf))
	}
	return nil
}

func (l *Skiplist) linkError(from, to uint32, level int) error {
	return fmt.Errorf("%w: skiplist link at level %d from node at offset %d points to offset %d, outside the arena's nodes [%d, %d]",
		ErrCorruption, level, from, to, l.head, l.limit)
}

// splitProbe turns a whole key into the (prefix, trailer) form searches use.
func (l *Skiplist) splitProbe(key []byte) (prefix []byte, trailer uint64, ok bool) {
	if l.order != orderInternal {
		return key, 0, true
	}
	n := len(key) - 8
	if n < 0 {
		return nil, 0, false
	}
	return key[:n:n], binary.LittleEndian.Uint64(key[n:]), true
}

// cmpProbe compares the probe (prefix, trailer) with the key of the node at
// off: >0 means the node sorts before the probe.
func (l *Skiplist) cmpProbe(prefix []byte, trailer uint64, off uint32) int {
	k := l.keyAt(off)
	switch l.order {
	case orderBytewise:
		return bytes.Compare(prefix, k)
	case orderInternal:
		n := len(k) - 8
		if n < 0 {
			return bytes.Compare(prefix, k)
		}
		if c := bytes.Compare(prefix, k[:n]); c != 0 {
			return c
		}
		return compareTrailers(trailer, binary.LittleEndian.Uint64(k[n:]))
	}
	return l.cmp(prefix, k)
}

// HexKeyLimit is how many bytes of a key corruption errors show in hex.
const HexKeyLimit = 32

// hexKey renders up to HexKeyLimit bytes of k for error messages, which end up
// in logs, marking truncation with the full length.
func hexKey(k []byte) string {
	if len(k) <= HexKeyLimit {
		return hex.EncodeToString(k)
	}
	return fmt.Sprintf("%s...(%d bytes)", hex.EncodeToString(k[:HexKeyLimit]), len(k))
}

// orderError reports that the node at a does not sort strictly before the
// node at b although b follows a.
func (l *Skiplist) orderError(a, b uint32, how string) error {
	return fmt.Errorf("%w: skiplist keys out of order (%s): key %s at offset %d is not below key %s at offset %d",
		ErrCorruption, how, hexKey(l.keyAt(a)), a, hexKey(l.keyAt(b)), b)
}

// checkPair verifies a < b for two nodes whose abbreviations are known. Only
// equal abbreviations need the full comparison. Both nodes must already be
// in bounds; their extents are checked here before the keys are read.
func (l *Skiplist) checkPair(a uint32, aa uint64, b uint32, ba uint64, how string) error {
	if aa < ba {
		return nil
	}
	return l.checkPairSlow(a, aa, b, ba, how)
}

//go:noinline
func (l *Skiplist) checkPairSlow(a uint32, aa uint64, b uint32, ba uint64, how string) error {
	if err := l.checkExtent(a); err != nil {
		return err
	}
	if err := l.checkExtent(b); err != nil {
		return err
	}
	if aa == ba && l.Compare(l.keyAt(a), l.keyAt(b)) < 0 {
		return nil
	}
	return l.orderError(a, b, how)
}

// ---- insertion -------------------------------------------------------------

// randomHeight draws a tower height with P(height >= k) = 2^-(k-1): one
// random word, one bit per level.
//
// Why 1/2 and not the 1/4 of LevelDB or the 1/e of Pebble: a search in a
// memtable larger than the CPU cache costs its cache misses, and with p =
// 1/2 the node a search stops before at one level is more often the one it
// compares first at the next level down, already loaded. Measured on 2^20
// db_bench entries (BenchmarkGet, BenchmarkInsert/random, 3-5 alternating
// runs): Get 5.07 -> 3.67 us and random insert 1.70 -> 1.39 us against
// p = 1/4, with 1/e in between. Towers grow from 1.33 to 2 links on
// average, under 2% of a 140-byte entry.
func (l *Skiplist) randomHeight() int {
	h := 1 + bits.TrailingZeros64(rand.Uint64())
	if h > l.maxHeight {
		h = l.maxHeight
	}
	return h
}

// Pending is a node allocated in the arena but not linked into the list yet.
// The caller fills Key and Value in place (so an entry assembled from several
// parts needs no temporary copy) and then links it with Link or
// Inserter.Link. A Pending that is never linked wastes its arena bytes and is
// otherwise harmless.
type Pending struct {
	// Key and Value are the node's key and value bytes in the arena. Write
	// them completely before linking; never write them afterwards.
	Key, Value []byte
	off        uint32
	height     int
}

// Prepare allocates a node for a key and value of the given lengths. It fails
// with ErrArenaFull if the arena lacks room (nothing is consumed then), and
// with ErrInvalidArgument for negative lengths or, under InternalKeys, keys
// shorter than the 8-byte trailer.
func (l *Skiplist) Prepare(keyLen, valueLen int) (Pending, error) {
	if keyLen < 0 || valueLen < 0 {
		return Pending{}, fmt.Errorf("%w: negative key or value length", ErrInvalidArgument)
	}
	if l.order == orderInternal && keyLen < 8 {
		return Pending{}, fmt.Errorf("%w: internal key of %d bytes is shorter than its 8-byte trailer", ErrInvalidArgument, keyLen)
	}
	h := l.randomHeight()
	size := nodeSize(h, uint64(keyLen), uint64(valueLen))
	if size > uint64(len(l.buf)) {
		return Pending{}, fmt.Errorf("%w: entry of %d+%d bytes exceeds the arena capacity %d",
			ErrArenaFull, keyLen, valueLen, len(l.buf))
	}
	start, ok := l.arena.alloc(uint32(size))
	if !ok {
		return Pending{}, ErrArenaFull
	}
	off := start + uint32(h-1)*linkSize
	p := unsafe.Add(l.base, off)
	*(*uint32)(unsafe.Add(p, offKeyLen)) = uint32(keyLen)
	*(*uint32)(unsafe.Add(p, offValLen)) = uint32(valueLen)
	ks := int(off) + offKey
	vs := ks + keyLen
	return Pending{
		Key:    l.buf[ks:vs:vs],
		Value:  l.buf[vs : vs+valueLen : vs+valueLen],
		off:    off,
		height: h,
	}, nil
}

// Add copies key and value into the arena and links them into the list. It
// returns ErrArenaFull if the arena is full and ErrRecordExists if an equal
// key is present (the node's arena bytes are then wasted). Safe for
// concurrent use.
func (l *Skiplist) Add(key, value []byte) error {
	p, err := l.Prepare(len(key), len(value))
	if err != nil {
		return err
	}
	copy(p.Key, key)
	copy(p.Value, value)
	return l.link(p, nil)
}

// Link links a prepared node into the list. See Add for the errors.
func (l *Skiplist) Link(p Pending) error { return l.link(p, nil) }

type splice struct{ prev, next uint32 }

// spliceAt walks level lvl forward from start, which must sort before the
// probe, and returns the adjacent pair (prev, next) with prev < probe <= next.
// eq reports next == probe. With validate it checks every link it moves
// along, and bounds.
func (l *Skiplist) spliceAt(prefix []byte, trailer, pa uint64, lvl int, start uint32, validate bool) (prev, next uint32, eq bool, err error) {
	x := start
	xa := l.abbrevAt(x)
	for {
		nx := l.loadNext(x, lvl)
		if nx == l.tail {
			return x, nx, false, nil
		}
		if validate && !l.inBounds(nx) {
			return 0, 0, false, l.linkError(x, nx, lvl)
		}
		na := l.abbrevAt(nx)
		var c int
		switch {
		case na < pa:
			c = 1
		case na > pa:
			c = -1
		default:
			if validate {
				if err := l.checkExtent(nx); err != nil {
					return 0, 0, false, err
				}
			}
			c = l.cmpProbe(prefix, trailer, nx)
		}
		if c <= 0 {
			return x, nx, c == 0, nil
		}
		if validate && x != l.head {
			if err := l.checkPair(x, xa, nx, na, "insert search"); err != nil {
				return 0, 0, false, err
			}
		}
		x, xa = nx, na
	}
}

// findSplice computes the splice of every level from the top. eq reports an
// equal key in the list.
func (l *Skiplist) findSplice(prefix []byte, trailer, pa uint64, spl *[MaxHeight]splice, validate bool) (eq bool, err error) {
	x := l.head
	for lvl := int(l.height.Load()) - 1; lvl >= 0; lvl-- {
		p, n, e, err := l.spliceAt(prefix, trailer, pa, lvl, x, validate)
		if err != nil || e {
			return e, err
		}
		spl[lvl] = splice{p, n}
		x = p
	}
	return false, nil
}

// link inserts the prepared node. With ins non-nil it starts from (and
// refreshes) the inserter's cached splice.
func (l *Skiplist) link(pn Pending, ins *Inserter) error {
	nd, h := pn.off, pn.height
	prefix, trailer, _ := l.splitProbe(pn.Key)
	pa := l.abbrevOf(prefix)
	validate := l.validate

	// Raise the list height first so that the search below fills the splice
	// of every level the new tower will occupy. New levels run head→tail.
	for {
		lh := l.height.Load()
		if int(lh) >= h || l.height.CompareAndSwap(lh, uint32(h)) {
			break
		}
	}

	var local [MaxHeight]splice
	spl := &local
	var eq bool
	var err error
	if ins != nil {
		spl = &ins.spl
		eq, err = ins.findSplice(prefix, trailer, pa, validate)
	} else {
		eq, err = l.findSplice(prefix, trailer, pa, spl, validate)
	}
	if err != nil || eq {
		if ins != nil {
			ins.height = 0
		}
		if err != nil {
			return err
		}
		return ErrRecordExists
	}

	// Link bottom-up. The level-0 CAS publishes the node; its fields were
	// written before and are never written again, so plain stores suffice
	// for them and for the node's own links, which nobody can reach through
	// level i before the level-i CAS.
	//
	//   before:  prev ──────────► next        after:  prev ──► nd ──► next
	//            prev ◄────────── next                prev ◄── nd ◄── next (level 0)
	//
	//   1. nd.next[i] = next (and nd.prev[0] = prev)
	//   2. level 0 only: if next.prev[0] still names an older node although
	//      prev.next[0] == next, an earlier inserter has linked prev but not
	//      yet moved the back link: do it for them (CAS), so that step 4
	//      cannot race with their late back-link update.
	//   3. CAS prev.next[i]: next → nd. On failure another node went in
	//      between: recompute the splice at this level from prev and retry.
	//   4. level 0 only: CAS next.prev[0]: prev → nd. Failure is fine: a
	//      later inserter already helped (step 2 on their side) and moved it
	//      to nd or to a node after nd.
	for i := 0; i < h; i++ {
		prev, next := spl[i].prev, spl[i].next
		for {
			if l.testYield != nil {
				l.testYield()
			}
			*l.nextPtr(nd, i) = next
			if i == 0 && l.checkNeigh != nil {
				if err := l.checkNeighbors(prev, next); err != nil {
					if ins != nil {
						ins.height = 0
					}
					return err
				}
			}
			if i == 0 {
				*l.prevPtr(nd) = prev
				np := l.loadPrev(next)
				if np != prev && l.loadNext(prev, 0) == next {
					atomic.CompareAndSwapUint32(l.prevPtr(next), np, prev)
				}
			}
			if atomic.CompareAndSwapUint32(l.nextPtr(prev, i), next, nd) {
				if i == 0 {
					if l.testYield != nil {
						l.testYield()
					}
					atomic.CompareAndSwapUint32(l.prevPtr(next), prev, nd)
				}
				break
			}
			p, n, e, err := l.spliceAt(prefix, trailer, pa, i, prev, validate)
			if err == nil && e {
				if i == 0 {
					err = ErrRecordExists
				} else {
					// Level 0 holds nd, so no equal key can be linked anywhere;
					// finding one above means the list is damaged. nd stays
					// linked at the levels below i.
					err = fmt.Errorf("%w: skiplist key %s found twice (level %d) while linking it",
						ErrCorruption, hexKey(pn.Key), i)
				}
			}
			if err != nil {
				if ins != nil {
					ins.height = 0
				}
				return err
			}
			prev, next = p, n
		}
		spl[i] = splice{nd, next}
	}
	return nil
}

// checkNeighbors runs Options.CheckNeighbor on the nodes a new node goes
// between at level 0 (sentinels excepted).
func (l *Skiplist) checkNeighbors(prev, next uint32) error {
	for _, x := range [2]uint32{prev, next} {
		if x == l.head || x == l.tail {
			continue
		}
		if !l.inBounds(x) {
			return l.linkError(prev, next, 0)
		}
		if err := l.checkExtent(x); err != nil {
			return err
		}
		if err := l.checkNeigh(l.keyAt(x), l.valueAt(x)); err != nil {
			return fmt.Errorf("%w: neighbour of an insert at offset %d: %w", ErrCorruption, x, err)
		}
	}
	return nil
}

// Inserter speeds up a run of inserts from one goroutine by remembering where
// the previous insert went: for keys that arrive in order (a sorted batch, a
// sequential load) the next splice is usually right there and no search from
// the top is needed. Its cache is only a starting point that is re-checked
// against the list, so concurrent inserts through other inserters are safe.
// An Inserter is used by one goroutine at a time. With a validating list the
// cache stays in use: a hit compares the probe with both cached neighbours,
// which proves their order, and the levels below are searched validated.
type Inserter struct {
	list   *Skiplist
	height uint32 // list height when the cache was filled; 0 = no cache
	spl    [MaxHeight]splice
}

// NewInserter returns an inserter for l.
func (l *Skiplist) NewInserter() *Inserter { return &Inserter{list: l} }

// Add is Skiplist.Add through the inserter's cache.
func (ins *Inserter) Add(key, value []byte) error {
	p, err := ins.list.Prepare(len(key), len(value))
	if err != nil {
		return err
	}
	copy(p.Key, key)
	copy(p.Value, value)
	return ins.list.link(p, ins)
}

// Link is Skiplist.Link through the inserter's cache.
func (ins *Inserter) Link(p Pending) error { return ins.list.link(p, ins) }

// cmpProbeAbbrev compares the probe with a node, abbreviation first.
func (l *Skiplist) cmpProbeAbbrev(prefix []byte, trailer, pa uint64, off uint32) int {
	na := l.abbrevAt(off)
	switch {
	case na < pa:
		return 1
	case na > pa:
		return -1
	}
	return l.cmpProbe(prefix, trailer, off)
}

// findSplice fills ins.spl for the probe. It looks for the lowest cached level
// whose two nodes are still adjacent and bracket the probe, searches only the
// levels below it, and keeps the cached splices above (they bracket the probe
// too: cached splices are nested, each level's pair enclosing the one below).
// Otherwise it searches from the top.
func (ins *Inserter) findSplice(prefix []byte, trailer, pa uint64, validate bool) (eq bool, err error) {
	l := ins.list
	lh := l.height.Load()
	start, startLvl := l.head, int(lh)
	if ins.height == lh {
		for lvl := 0; lvl < int(lh); lvl++ {
			s := ins.spl[lvl]
			if l.loadNext(s.prev, lvl) != s.next {
				continue // nodes went in between; a wider level may still do
			}
			if validate {
				// Cached offsets were bounds-checked when first read, but
				// the lengths behind them are read again now.
				for _, nd := range [2]uint32{s.prev, s.next} {
					if nd != l.head && nd != l.tail {
						if err := l.checkExtent(nd); err != nil {
							ins.height = 0
							return false, err
						}
					}
				}
			}
			if s.prev != l.head && l.cmpProbeAbbrev(prefix, trailer, pa, s.prev) <= 0 {
				break // probe at or before the splice: full search
			}
			if s.next != l.tail {
				c := l.cmpProbeAbbrev(prefix, trailer, pa, s.next)
				if c == 0 {
					return true, nil
				}
				if c > 0 {
					break // probe after the splice: full search
				}
			}
			start, startLvl = s.prev, lvl+1
			// Level lvl itself is still exact.
			break
		}
	}
	ins.height = lh
	if startLvl == int(lh) {
		start = l.head
	}
	for lvl := startLvl - 1; lvl >= 0; lvl-- {
		p, n, e, err := l.spliceAt(prefix, trailer, pa, lvl, start, validate)
		if err != nil || e {
			return e, err
		}
		ins.spl[lvl] = splice{p, n}
		start = p
	}
	return false, nil
}
