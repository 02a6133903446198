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
//   - The summary in a link of level i > 0 is 0 or its target's summary
//     under the list's one summary prefix (summary.go); the summaries of
//     keys never decrease as the keys increase.
//   - Offsets are uint32 into one Arena; 0 means "no node". The arena is a
//     hard size cap: when it is full, inserts fail with ErrArenaFull and the
//     list stays intact and readable.
//
// # Node layout
//
// A node's offset points at its level-0 link; the upper part of its tower
// grows towards lower addresses, so the level-0 links, the lengths and the
// first 8 key bytes (everything a level-0 step or a compare touches) lie in 20
// adjacent bytes whatever the node's height. Only level 0 has a back link.
// A link of level 1 and up is one 64-bit word: the target's offset and a
// summary of the target's key (see summary.go), so that a search can see
// that the target lies past its probe without loading it:
//
//	                                             node offset
//	                                                  |
//	                                                  v
//	+---------------+-----+---------------+----------+----------+---------------+-----------+---------------+
//	| link[h-1]     | ... | link[1]       | next[0]  | prev[0]  | lens          | key bytes | value bytes   |
//	| off|sum<<32   |     | off|sum<<32   | uint32   | uint32   | kLen<<20|vLen |           | (pad to >= 8) |
//	+---------------+-----+---------------+----------+----------+---------------+-----------+---------------+
//	 -8(h-1)               -8              +0         +4         +8              +12
//
// The lens word packs a key of up to 4094 bytes and a value of up to 1 MiB
// - 1 into one uint32, which saves 4 bytes on every entry (the cost of the
// link summaries in the tower). A longer key or value sets lens to
// 0xffffffff (lensEscape) and stores both lengths in full after it, as two
// uint32 at +12 and +16; its key starts at +20. Every reader takes the key's
// start and the lengths from layout (abbrevAt inlines the packed case).
//
// Key and value together are padded to at least 8 bytes and to a multiple of
// 4, so that loading the first 8 key bytes never reads past the node. A
// node of height 1 starts at a 4-byte boundary; a taller one at an 8-byte
// boundary (its allocation skips 4 bytes when needed), so that its 64-bit
// links are aligned atomic words. The head sentinel has the maximum height,
// the tail sentinel height 1.
//
// # Abbreviated keys
//
// Searches compare an integer abbreviation of each key before calling the
// full comparison: for most pairs of keys one integer compare decides, on a
// cache line the search has already loaded. The abbreviation is always
// computed from the key bytes themselves (it is not a second copy that could
// disagree with them), so a corrupted key byte is seen by the integer compare
// exactly as by a full compare. Link summaries are the one copy: only
// unvalidated searches read them, and Verify checks them against the keys.
//
// The built-in orders abbreviate a key by its first 8 bytes, loaded
// big-endian as one uint64, with no function call: that needs an order that
// starts with the bytewise order of a key prefix, the default bytewise order
// (prefix = whole key) and InternalKeys (prefix = key minus its 8-byte
// trailer). A caller-given Compare function gets no abbreviation and is
// called for every comparison.
//
// InternalKeys with a UserComparer that is not bytewise orders the user keys
// by the comparer and abbreviates them with its AbbreviatedKey, called on
// the user key in the node each time (so the principle above holds: there
// is no stored abbreviation to disagree with the key); Compare is called
// only when two abbreviations tie, and for every comparison if the comparer
// has no AbbreviatedKey. Such a list searches (find, findValidated, the
// insert's spliceAt) in loops of its own, chosen once per search, so that
// the loops of the built-in orders carry no test or call for it. Its
// iterators' validated steps run the built-in code, in which every built-in
// abbreviation of such a list is 0: each order check falls through to
// checkPairSlow, which compares the comparer's abbreviations of both keys,
// then calls Compare on a tie. Verify compares every pair with Compare. A
// bytewise UserComparer (nil, DefaultComparer, or any comparer that
// resolves to bytewise) is the built-in InternalKeys order itself, at no
// extra cost.
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
// Validating searches and inserts never read link summaries: they decide
// every step by the keys themselves, as if the links had none.
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
	"math"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/vigildb/vigil/internal/base"
)

// Error sentinels. They are the skiplist's own (the only package of Vigil's
// it imports is internal/base, for the Comparer type), so the memtable wraps
// these with Vigil's own sentinels at its boundary.
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

	towerLink  = 8                           // one upper link: uint32 offset + uint32 summary
	nodeHeader = 12                          // next[0], prev[0], lens
	escHeader  = 20                          // nodeHeader, then keyLen and valueLen in full
	minKV      = 8                           // key+value padded to this, see the package doc
	nodeAlign  = 4                           // every allocation is a multiple of this
	towerAlign = 8                           // and a node with upper links starts at a multiple of this
	maxTower   = (MaxHeight - 1) * towerLink // upper tower of a full-height node

	offNext0  = 0
	offPrev0  = 4
	offLens   = 8
	offKey    = nodeHeader // key start of a node with packed lengths
	offKeyLen = nodeHeader // with lensEscape: the full key length
	offValLen = 16         // with lensEscape: the full value length

	// lens packs a node's key length into its top 12 bits and its value
	// length into the low 20 (see Prepare); lensEscape says that both are
	// in full after it, and the key starts at escHeader.
	lensValBits = 20
	maxPackedK  = 1<<(32-lensValBits) - 2 // 4094: so that no packed lens is lensEscape
	maxPackedV  = 1<<lensValBits - 1
	lensEscape  = math.MaxUint32

	// sentinelSize is the arena space of one empty node of height h.
	headSize = maxTower + nodeHeader + minKV
	tailSize = nodeHeader + minKV
)

// MinArenaSize is the smallest arena that can hold one list's sentinels.
const MinArenaSize = arenaStart + headSize + tailSize + arenaTail

// nodeSize returns the arena bytes of a node of height h with the given key
// and value lengths.
func nodeSize(h int, keyLen, valueLen uint64) uint64 {
	kv := keyLen + valueLen
	if kv < minKV {
		kv = minKV
	}
	kv = (kv + nodeAlign - 1) &^ (nodeAlign - 1)
	return uint64(h-1)*towerLink + headerSize(keyLen, valueLen) + kv
}

// packed reports whether a node's lengths fit its lens word.
func packed(keyLen, valueLen uint64) bool {
	return keyLen <= maxPackedK && valueLen <= maxPackedV
}

// headerSize is a node's header for these lengths: nodeHeader if they are
// packed, escHeader if not.
func headerSize(keyLen, valueLen uint64) uint64 {
	if packed(keyLen, valueLen) {
		return nodeHeader
	}
	return escHeader
}

// MaxNodeSize returns the most arena bytes one insert of a key and value of
// these lengths can consume (a full-height tower, after the padding that
// aligns it). Callers that reserve arena capacity ahead of inserting use it.
func MaxNodeSize(keyLen, valueLen int) int {
	return int(nodeSize(MaxHeight, uint64(keyLen), uint64(valueLen))) + towerAlign - nodeAlign
}

type order uint8

const (
	orderBytewise order = iota
	orderInternal
	orderFunc
	// orderUser is InternalKeys with a UserComparer that is not bytewise:
	// user keys by the comparer, then trailer descending. Its abbreviations
	// are the comparer's (see the package doc), never the built-in ones.
	orderUser
)

// noAbbrev is subtracted from key lengths under a caller-given Compare or a
// UserComparer so that every built-in abbreviation is 0 and the full
// comparison (for a UserComparer: its abbreviation first) always decides.
const noAbbrev = 1 << 40

// Options configure a Skiplist. The zero value is a bytewise-ordered list
// without validation.
type Options struct {
	// Compare orders keys. nil means bytewise order (bytes.Compare), which
	// gets abbreviated-key comparisons. A caller-given function is called for
	// every comparison; it must not retain its arguments.
	Compare func(a, b []byte) int
	// InternalKeys selects the built-in order for keys laid out as
	// prefix ‖ 8-byte little-endian trailer: prefix bytewise ascending (or
	// by UserComparer), then trailer descending (Vigil's internal keys,
	// where the trailer is seqnum<<8|kind and newer versions sort first).
	// Keys must be at least 8 bytes long. Bytewise, it gets abbreviated
	// keys over the prefix and needs no function call per comparison.
	// Compare must be nil.
	InternalKeys bool
	// UserComparer, with InternalKeys, orders the user keys (the prefix)
	// by the comparer instead of bytewise; trailers still order descending.
	// It is how the memtable keeps the DB's Options.Comparer order, so that
	// a flush writes its keys in the order every table and read expects.
	// nil, DefaultComparer or any comparer that resolves to bytewise
	// (base.Comparer.IsBytewise) is the built-in InternalKeys order, at no
	// extra cost. Another comparer's AbbreviatedKey, if it has one, decides
	// most comparisons before its Compare is called (see the package doc).
	// It must pass base.Comparer.Check and is resolved once, in New; its
	// functions must be safe for concurrent use and must not keep their
	// arguments (which alias the arena).
	UserComparer *base.Comparer
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
	// limit is the largest offset at which a node's header and first 8 key
	// bytes lie inside the arena, escaped or not (the arena never hands out
	// its last arenaTail bytes, so every node's offset is at most limit);
	// validating reads check links against [head, limit]. span4 and span8
	// are (limit-head)/4 and /8, see inBounds and inTower.
	limit uint32
	span4 uint32
	span8 uint32

	height atomic.Uint32 // current list height, 1..maxHeight

	// sum is the prefix link summaries are taken after (see summary.go);
	// nil until an insert at or past arena offset sumAt finds at least
	// sumMinKeys entries to choose it from, and never changed once set.
	sum        atomic.Pointer[summaryPrefix]
	sumAt      atomic.Uint32
	sumMinKeys int

	order        order
	abbrevSuffix int64                 // key bytes after the abbreviated prefix (0, 8, or noAbbrev)
	cmp          func(a, b []byte) int // orderFunc: Options.Compare; orderUser: the comparer's Compare
	validate     bool
	maxHeight    int
	checkNeigh   func(key, value []byte) error

	// internalKeys is set for the orders of keys with a trailer
	// (orderInternal, orderUser). ucmp is the resolved UserComparer under
	// orderUser (nil otherwise), and uabbrev its AbbreviatedKey (nil if it
	// has none).
	internalKeys bool
	ucmp         *base.Comparer
	uabbrev      func(key []byte) uint64

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
	if o.UserComparer != nil {
		if !o.InternalKeys {
			return nil, fmt.Errorf("%w: UserComparer orders the user keys of internal keys and needs InternalKeys (Compare orders whole keys)", ErrInvalidArgument)
		}
		if msg := o.UserComparer.Check(); msg != "" {
			return nil, fmt.Errorf("%w: %s", ErrInvalidArgument, msg)
		}
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
		l.internalKeys = true
		if c := o.UserComparer.Resolve(); !c.IsBytewise() {
			l.order, l.abbrevSuffix, l.cmp = orderUser, noAbbrev, c.Compare
			l.ucmp, l.uabbrev = c, c.AbbreviatedKey
			break
		}
		l.order, l.abbrevSuffix = orderInternal, 8
	case o.Compare != nil:
		l.order, l.abbrevSuffix, l.cmp = orderFunc, noAbbrev, o.Compare
	default:
		l.order = orderBytewise
	}
	h, ok := arena.alloc(headSize, towerAlign)
	if !ok {
		return nil, fmt.Errorf("%w: no room for the list sentinels", ErrArenaFull)
	}
	t, ok := arena.alloc(tailSize, nodeAlign)
	if !ok {
		return nil, fmt.Errorf("%w: no room for the list sentinels", ErrArenaFull)
	}
	l.head = h + maxTower
	l.tail = t
	// The arena is zeroed, so key and value lengths are already 0. Nothing
	// reads the new list before New returns, so plain stores suffice.
	*l.next0Ptr(l.head) = l.tail
	for i := 1; i < MaxHeight; i++ {
		*l.towerPtr(l.head, i) = uint64(l.tail)
	}
	*l.prevPtr(l.tail) = l.head
	l.limit = uint32(len(l.buf) - escHeader - minKV)
	l.span4 = (l.limit - l.head) / nodeAlign
	l.span8 = (l.limit - l.head) / towerAlign
	l.sumAt.Store(math.MaxUint32)
	if l.summaries() {
		l.sumAt.Store(uint32(min(uint64(l.head)+summaryAfter, math.MaxUint32)))
	}
	l.sumMinKeys = summaryMinKeys
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
	case orderUser:
		return l.compareUser(a, b)
	}
	return l.cmp(a, b)
}

// UserComparer returns the comparer that orders the user keys of an
// InternalKeys list, resolved: DefaultComparer for the built-in order. It is
// nil for a list without InternalKeys.
func (l *Skiplist) UserComparer() *base.Comparer {
	switch {
	case l.ucmp != nil:
		return l.ucmp
	case l.internalKeys:
		return base.DefaultComparer
	}
	return nil
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

// next0Ptr points at a node's level-0 link.
func (l *Skiplist) next0Ptr(off uint32) *uint32 {
	return (*uint32)(unsafe.Add(l.base, off))
}

// towerPtr points at a node's link word of level >= 1 (see linkWord).
func (l *Skiplist) towerPtr(off uint32, level int) *uint64 {
	return (*uint64)(unsafe.Add(l.base, int(off)-towerLink*level))
}

// loadLink loads the link word of level >= 1 of the node at off.
func (l *Skiplist) loadLink(off uint32, level int) uint64 {
	return atomic.LoadUint64(l.towerPtr(off, level))
}

func (l *Skiplist) prevPtr(off uint32) *uint32 {
	return (*uint32)(unsafe.Add(l.base, int(off)+offPrev0))
}

// loadStep loads the link of level lvl of the node at off: the target and
// the link's summary (0 at level 0, which has none).
func (l *Skiplist) loadStep(off uint32, lvl int) (next, sum uint32) {
	if lvl == 0 {
		return atomic.LoadUint32(l.next0Ptr(off)), 0
	}
	w := l.loadLink(off, lvl)
	return uint32(w), uint32(w >> 32)
}

// loadNext loads the offset the node at off links to at level.
func (l *Skiplist) loadNext(off uint32, level int) uint32 {
	next, _ := l.loadStep(off, level)
	return next
}

func (l *Skiplist) loadPrev(off uint32) uint32 {
	return atomic.LoadUint32(l.prevPtr(off))
}

// layout returns where the key of the node at off starts and the key's and
// value's lengths. The escape form's lengths lie inside the arena for any
// off <= limit; the lengths themselves are not checked (checkExtent).
func (l *Skiplist) layout(off uint32) (ks uint64, kl, vl uint32) {
	p := unsafe.Add(l.base, off)
	lens := *(*uint32)(unsafe.Add(p, offLens))
	ks, kl, vl = uint64(off)+offKey, lens>>lensValBits, lens&maxPackedV
	if lens == lensEscape {
		ks, kl, vl = uint64(off)+escHeader, *(*uint32)(unsafe.Add(p, offKeyLen)), *(*uint32)(unsafe.Add(p, offValLen))
	}
	return ks, kl, vl
}

// keySpan is layout without the value length, cheap enough for keyAt to
// inline.
func (l *Skiplist) keySpan(off uint32) (ks uint64, kl uint32) {
	p := unsafe.Add(l.base, off)
	lens := *(*uint32)(unsafe.Add(p, offLens))
	ks, kl = uint64(off)+offKey, lens>>lensValBits
	if lens == lensEscape {
		ks, kl = uint64(off)+escHeader, *(*uint32)(unsafe.Add(p, offKeyLen))
	}
	return ks, kl
}

// keyStart returns the arena offset of the key of the node at off.
func (l *Skiplist) keyStart(off uint32) int {
	ks, _ := l.keySpan(off)
	return int(ks)
}

// abbrevAt returns the abbreviated key of the node at off: the first 8 bytes
// of its key prefix, big-endian, zero-padded. It reads 8 bytes at the key
// start, which the node layout keeps inside the node, and limit inside the
// arena whatever the lens word says (escaped or not). It repeats keySpan
// rather than calling it: with the call it no longer inlines into the
// search loops (cost 80 written out, over the budget through keySpan).
func (l *Skiplist) abbrevAt(off uint32) uint64 {
	p := unsafe.Add(l.base, off)
	lens := *(*uint32)(unsafe.Add(p, offLens))
	ks, kl := uintptr(offKey), lens>>lensValBits
	if lens == lensEscape {
		ks, kl = escHeader, *(*uint32)(unsafe.Add(p, offKeyLen))
	}
	v := binary.BigEndian.Uint64((*[8]byte)(unsafe.Add(p, ks))[:])
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

// abbrevOf is abbrevAt for a probe held in a slice (the key prefix). The
// searches of orderUser use userAbbrevOf instead.
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
	ks, kl := l.keySpan(off)
	return l.buf[ks : ks+uint64(kl) : ks+uint64(kl)]
}

func (l *Skiplist) valueAt(off uint32) []byte {
	ks, kl, vl := l.layout(off)
	s := ks + uint64(kl)
	return l.buf[s : s+uint64(vl) : s+uint64(vl)]
}

// inBounds reports whether off can be a node: at or after the head, 4-aligned,
// with its header and 8 key bytes inside the arena. One compare: rotating
// off-head right by 2 moves misalignment bits to the top, where they exceed
// span4 (< 2^30), and leaves (off-head)/4 for aligned offsets.
func (l *Skiplist) inBounds(off uint32) bool {
	return bits.RotateLeft32(off-l.head, -2) <= l.span4
}

// inTower is inBounds for the target of a link of level >= 1: such a node
// has upper links, so it is also 8-aligned (towerAlign; the head is), and
// loading its 64-bit link words is an aligned atomic load.
func (l *Skiplist) inTower(off uint32) bool {
	return bits.RotateLeft32(off-l.head, -3) <= l.span8
}

// linkInBounds checks the target of a link of level lvl: inBounds at level
// 0, inTower above.
func (l *Skiplist) linkInBounds(off uint32, lvl int) bool {
	if lvl == 0 {
		return l.inBounds(off)
	}
	return l.inTower(off)
}

// checkExtent verifies that the node's key and value lie inside the arena
// (and, for the built-in abbreviations, its first 8 key bytes).
func (l *Skiplist) checkExtent(off uint32) error {
	ks, kl, vl := l.layout(off)
	if end := ks + uint64(kl) + uint64(vl); end > uint64(len(l.buf)) || ks+minKV > uint64(len(l.buf)) {
		return fmt.Errorf("%w: skiplist node at offset %d claims key length %d and value length %d, past the arena end %d",
			ErrCorruption, off, kl, vl, len(l.buf))
	}
	return nil
}

func (l *Skiplist) linkError(from, to uint32, level int) error {
	return fmt.Errorf("%w: skiplist link at level %d from node at offset %d points to offset %d, outside the arena's nodes of that level [%d, %d]",
		ErrCorruption, level, from, to, l.head, l.limit)
}

// splitProbe turns a whole key into the (prefix, trailer) form searches use.
func (l *Skiplist) splitProbe(key []byte) (prefix []byte, trailer uint64, ok bool) {
	if !l.internalKeys {
		return key, 0, true
	}
	n := len(key) - 8
	if n < 0 {
		return nil, 0, false
	}
	return key[:n:n], binary.LittleEndian.Uint64(key[n:]), true
}

// cmpProbe compares the probe (prefix, trailer) with the key of the node at
// off: >0 means the node sorts before the probe. Not for orderUser, whose
// searches call cmpUserAt: that keeps this function, on the path of every
// tie of the built-in orders, as it was.
//
// Callers call it only where the abbreviations tie. Under InternalKeys,
// when both key prefixes have 16 bytes or more, the second 8 bytes are
// compared the same way first, as one integer: a tie of the first 8 bytes
// is what keys with a common start (zero-padded decimal ids, table
// prefixes, "user:..." strings) give on nearly every step, and the full
// comparison cost such a random insert a sixth of its time
// (BenchmarkInsertShapes/decimal).
func (l *Skiplist) cmpProbe(prefix []byte, trailer uint64, off uint32) int {
	ks, kl := l.keySpan(off)
	if l.order == orderInternal && len(prefix) >= 16 {
		if s := int(ks); kl >= 24 && s+16 <= len(l.buf) {
			a := binary.BigEndian.Uint64(prefix[8:16])
			b := binary.BigEndian.Uint64(l.buf[s+8 : s+16])
			if a != b {
				if a < b {
					return -1
				}
				return 1
			}
		}
	}
	k := l.buf[ks : ks+uint64(kl) : ks+uint64(kl)]
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
// Under orderUser the abbreviations given are the comparer's (from that
// order's own search loops) or the built-in ones, all 0 (from iterator
// steps); checkPairSlow compares the comparer's, computed from the keys.
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
	if l.order == orderUser {
		// The built-in abbreviations given are 0: compare the comparer's.
		if aa, ba = l.userAbbrevAt(a), l.userAbbrevAt(b); aa < ba {
			return nil
		}
	}
	if aa == ba && l.Compare(l.keyAt(a), l.keyAt(b)) < 0 {
		return nil
	}
	return l.orderError(a, b, how)
}
