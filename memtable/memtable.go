// Package memtable holds a DB's most recent writes in memory: internal keys
// (user key ‖ 8-byte little-endian trailer seqnum<<8|kind, ordered by user key
// ascending under Options.Comparer, then trailer descending) in a lock-free
// arena skiplist, with optional per-entry checksums and validating
// ("paranoid") reads.
//
// Point entries (Set, Delete) and range tombstones (RangeDelete, key = start,
// value = end) live in two skiplists sharing one arena, so a single size
// limit decides when the memtable is full.
//
// # Entry layout
//
// Each entry is one skiplist node whose key is the encoded internal key and
// whose value is the user value followed by N protection bytes (N =
// ProtectionBytesPerKey, 0 to 8): the low N bytes, little-endian, of
// checksum.KV(ChecksumType, user key, trailer, value). Every read of an entry
// (Get, each iterator positioning and step, RangeDels, Validate) recomputes
// and compares them, so a bit flip in the key, trailer or value of an entry in
// RAM is reported as corruption when the entry is read, not written to an SST.
// The protection bytes are not persisted; the layout is free to change.
package memtable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/bgsys"
	"github.com/vigildb/vigil/internal/manual"
	"github.com/vigildb/vigil/internal/private"
	"github.com/vigildb/vigil/skiplist"
)

// Errors the DB tests for with errors.Is. They are the skiplist's sentinels,
// re-exported so the DB need not import the skiplist.
var (
	// ErrArenaFull: the entry did not fit; rotate to a new memtable. An Add
	// covered by a successful Reserve never returns it.
	ErrArenaFull = skiplist.ErrArenaFull
	// ErrRecordExists: an entry with the same user key, seqnum and kind is
	// already present.
	ErrRecordExists = skiplist.ErrRecordExists
)

// MaxSize is the largest memtable: skiplist offsets are 32-bit.
const MaxSize = skiplist.MaxArenaSize

// MinSize is the smallest memtable: room for both lists' sentinels.
const MinSize = 2 * skiplist.MinArenaSize

// Options configure a MemTable.
type Options struct {
	// Size is the arena capacity in bytes, MinSize..MaxSize. Entries,
	// skiplist towers and both lists' sentinels all come out of it.
	Size int
	// ChecksumType computes the per-KV protection bytes; the zero value,
	// checksum.Default, is XXH3. checksum.None allows no protection bytes.
	ChecksumType checksum.Type
	// ParanoidMemoryChecks makes Get, every iterator and every insert check
	// the order of each pair of neighbouring keys they pass, and the bounds of
	// every link, so that corruption of the skiplist in RAM is reported
	// (ErrCorruption) instead of returning wrong results.
	ParanoidMemoryChecks bool
	// ProtectionBytesPerKey is how many bytes of per-KV checksum each entry
	// stores: 0 (off), 1, 2, 4 or 8. More bytes catch more corruptions: a
	// random corruption escapes N bytes with probability 2^-8N.
	ProtectionBytesPerKey int
	// ManualMemory allocates the arena outside the Go heap (package
	// internal/manual), so that it returns to the operating system the
	// moment the memtable is released instead of at some later garbage
	// collection. The owner must then call Release exactly once, when no
	// reader, iterator or writer can touch the memtable or any slice it
	// handed out; a use after that faults (in invariants builds, always).
	ManualMemory bool
	// Comparer orders the user keys: the DB's Options.Comparer, so that
	// iterators, Get, RangeDels and the flush (ValidateEach) see keys in the
	// order the tables and every other read expect. nil means
	// base.DefaultComparer, bytewise, which costs nothing extra; New
	// resolves it once. It must pass base.Comparer.Check.
	Comparer *base.Comparer

	// FilterBytes sizes a bloom filter over the point entries' user keys
	// (see filter), which lets Get skip the skiplist search for a key the
	// memtable does not hold; it is built once such Gets come (see
	// lazyFilter), and counted in Capacity from the start: 0, none (the
	// DB's is Options.MemtableFilterRatio of the arena). With
	// ParanoidMemoryChecks there is none, whatever it says: a bit lost in
	// RAM could hide a key, and no check could tell.
	FilterBytes int

	// filterAfterGets, if set, replaces filterBuildAfterGets (tests build
	// filters sooner).
	filterAfterGets int

	// maxHeight caps skiplist tower heights (tests force 1 to make
	// neighbours predictable); 0 means the skiplist default.
	maxHeight int
}

// Validate reports every problem with the options at once, as an error
// wrapping ErrInvalidArgument that says why, or nil. It does not check
// Size, which New checks, so the DB can validate protection settings before
// it knows the memtable size.
func (o Options) Validate() error {
	var errs []error
	if !o.ChecksumType.Valid() {
		errs = append(errs, fmt.Errorf("memtable: %w", o.ChecksumType.Check()))
	}
	if msg := o.Comparer.Check(); msg != "" {
		errs = append(errs, errors.New("memtable: "+msg))
	}
	switch o.ProtectionBytesPerKey {
	case 0, 1, 2, 4, 8:
		if o.ProtectionBytesPerKey > 0 && o.ChecksumType == checksum.None {
			errs = append(errs, fmt.Errorf("memtable: ProtectionBytesPerKey %d needs a checksum type to compute them, but ChecksumType is none",
				o.ProtectionBytesPerKey))
		}
	default:
		errs = append(errs, fmt.Errorf("memtable: ProtectionBytesPerKey %d is not supported: it must be 0, 1, 2, 4 or 8",
			o.ProtectionBytesPerKey))
	}
	if len(errs) == 0 {
		return nil
	}
	return base.MarkInvalidArgument(errors.Join(errs...))
}

// MemTable is an in-memory sorted table of internal keys, ordered by user
// key under Options.Comparer (bytewise by default), then by trailer
// descending (newest first): the order of the DB's tables, so that a flush
// writes its entries as they come. Every comparison and equality of user
// keys (Get's same-key check, seeks, the skiplists' order and its checks)
// goes through that one comparer.
//
// Concurrency contract:
//   - Add and Reserve are safe for concurrent use by any number of writers
//     (the DB applies batches to the memtable concurrently).
//   - Get, NewIter, NewRangeDelIter, RangeDels, Count, ApproximateSize and
//     Empty are safe at any time, concurrently with writers and each other.
//     A reader may or may not see an entry whose Add has not returned; the DB
//     hides such entries by sequence number anyway.
//   - Validate reads a quiescent memtable: call it once no Add is in
//     progress (the flush does so on an immutable memtable).
//   - Each iterator belongs to one goroutine.
//
// Invariants: entries are never removed or changed once added; values and
// keys handed out alias the arena and stay valid as long as the MemTable is
// reachable. Count() is the number of Adds that succeeded; after all Adds
// return, both skiplists together hold exactly Count() entries.
type MemTable struct {
	arena *skiplist.Arena
	size  int // Options.Size: the arena's bytes, all held while it lives
	// manualBuf is the arena's memory when allocated with ManualMemory;
	// Release frees it. ahead faults its pages in ahead of the fill point
	// (nil where the platform cannot).
	manualBuf []byte
	ahead     *manual.FaultAhead

	points    *skiplist.Skiplist
	rangeDels *skiplist.Skiplist

	// filter holds the point entries' user keys once Gets come (see
	// lazyFilter and Options.FilterBytes).
	filter lazyFilter

	csType    checksum.Type
	protBytes int
	paranoid  bool
	cmp       *base.Comparer // Options.Comparer, resolved

	count atomic.Uint64
	// pending is capacity reserved by Reserve and not yet consumed by Adds.
	// The invariant Reserve keeps is arena.Size() + pending <= capacity, so
	// every covered Add finds room.
	pending atomic.Int64

	// testHookBeforeLink, if set, runs in Add between its first look at
	// the filter and the link (tests publish a filter there).
	testHookBeforeLink func()

	// inserters caches skiplist.Inserters (per P, through sync.Pool) so that
	// a writer adding keys in order, as a batch or a sequential load does,
	// finds each splice next to the previous one instead of searching from
	// the top.
	inserters sync.Pool
}

// New creates an empty memtable with an arena of o.Size bytes.
func New(o Options) (*MemTable, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Size < MinSize || o.Size > MaxSize {
		return nil, base.InvalidArgumentErrorf("memtable: Size %d outside [%d, %d]", o.Size, MinSize, MaxSize)
	}
	var arena *skiplist.Arena
	var err error
	var manualBuf []byte
	if o.ManualMemory {
		manualBuf = manual.Alloc(o.Size)
		arena, err = skiplist.NewArenaFrom(manualBuf)
	} else {
		arena, err = skiplist.NewArena(o.Size)
	}
	if err != nil {
		manual.Free(manualBuf)
		return nil, base.MarkInvalidArgument(fmt.Errorf("memtable: %w", err))
	}
	cmp := o.Comparer.Resolve()
	so := skiplist.Options{InternalKeys: true, UserComparer: cmp, Validate: o.ParanoidMemoryChecks, MaxHeight: o.maxHeight}
	m := &MemTable{
		cmp:       cmp,
		arena:     arena,
		size:      o.Size,
		manualBuf: manualBuf,
		csType:    o.ChecksumType.Resolve(),
		protBytes: o.ProtectionBytesPerKey,
		paranoid:  o.ParanoidMemoryChecks,
	}
	if o.FilterBytes > 0 && !o.ParanoidMemoryChecks {
		m.filter = lazyFilter{bytes: filterSize(o.FilterBytes), after: filterBuildAfterGets, manualMem: o.ManualMemory}
		if o.filterAfterGets > 0 {
			m.filter.after = o.filterAfterGets
		}
	}
	if m.protBytes > 0 {
		// Verify the entries an insert goes between (see
		// skiplist.Options.CheckNeighbor): two checksums per Add.
		so.CheckNeighbor = func(k, v []byte) error {
			_, _, err := m.decode(k, v)
			return err
		}
	}
	// FaultAhead moves a freed arena's resident pages in ahead of the fill
	// point, past the arena's limit (see manual.FaultAhead); nil for a
	// Go heap arena.
	if m.ahead = manual.NewFaultAhead(manualBuf, arena.RaiseLimit); m.ahead != nil {
		arena.OnLimit(m.ahead.Ready(), m.ahead.Need)
		arena.OnGrow(0, m.ahead.Reached)
	}
	if m.points, err = skiplist.New(arena, so); err != nil {
		m.Release()
		return nil, fmt.Errorf("memtable: %w", err)
	}
	if m.rangeDels, err = skiplist.New(arena, so); err != nil {
		m.Release()
		return nil, fmt.Errorf("memtable: %w", err)
	}
	return m, nil
}

// Release frees the arena of a memtable made with ManualMemory (for other
// memtables it does nothing: the garbage collector frees them). Nothing may
// use the memtable, or any key or value it handed out, afterwards.
func (m *MemTable) Release() {
	ready := m.ahead.Stop()
	m.filter.stop()
	buf := m.manualBuf
	m.manualBuf = nil
	if buf == nil {
		return
	}
	// Unmapping the arena is a system call of a fraction of a millisecond
	// or more (the TLBs of the other processors are flushed); the flush
	// goroutine, which usually makes it, is background work: it first lets
	// the goroutines it woke run (bgsys.Yield).
	bgsys.Yield()
	// The pages FaultAhead made ready are resident: the next arena can
	// have them (none without a FaultAhead: ready is 0).
	manual.FreeFilled(buf, ready)
}

// EntrySize returns the most arena bytes one Add of a key and value of these
// lengths can take: the internal-key trailer, the largest protection (8
// bytes) and a full-height skiplist tower. The DB sums it over a batch and
// passes the total to Reserve.
func EntrySize(keyLen, valueLen int) int {
	return skiplist.MaxNodeSize(keyLen+base.TrailerLen, valueLen+8)
}

// Reserve atomically reserves n bytes of arena capacity for a batch about to
// be applied and reports whether they fit; on false nothing is reserved and
// the DB rotates to a new memtable. If n is the sum of EntrySize over the
// batch, none of the batch's Adds can fail with ErrArenaFull. Each Add gives
// back the EntrySize it was covered by, having used at most that, so the
// pessimism of a reservation lasts only while its batch is being applied.
//
// Reservations are anonymous: if a DB uses Reserve, every Add must be covered
// by one, or an uncovered Add may consume capacity another batch reserved.
// Safe for concurrent use.
func (m *MemTable) Reserve(n int) bool {
	if n < 0 {
		return false
	}
	capacity := int64(m.arena.Capacity())
	for {
		// Read pending before the arena size: an Add in between allocates
		// (size up) before it gives back its reservation (pending down), so
		// this order can only overestimate the space in use.
		p := m.pending.Load()
		used := int64(m.arena.Size())
		if used+p+int64(n) > capacity {
			return false
		}
		if m.pending.CompareAndSwap(p, p+int64(n)) {
			return true
		}
	}
}

// Unreserve returns n reserved bytes that will not be used, for a batch that
// was reserved but is abandoned before (or part-way through) being applied.
func (m *MemTable) Unreserve(n int) { m.release(int64(n)) }

// release lowers pending by up to n, never below zero.
func (m *MemTable) release(n int64) {
	for {
		p := m.pending.Load()
		if p == 0 || n <= 0 {
			return
		}
		if m.pending.CompareAndSwap(p, p-min(p, n)) {
			return
		}
	}
}

// Add inserts one entry: a point entry for KindSet and KindDelete, a range
// tombstone [key, value) for KindRangeDelete. It is safe for concurrent use.
// Errors: ErrArenaFull (nothing inserted; rotate), ErrRecordExists, an error
// wrapping ErrInvalidArgument for an unknown kind or a seqnum above
// SeqNumMax, or, with paranoid checks, one wrapping ErrCorruption
// if the insert's search found the list damaged.
func (m *MemTable) Add(seq uint64, kind Kind, key, value []byte) error {
	return m.add(seq, kind, key, value, 0, 0)
}

// AddChecked is Add for an entry that comes with its write batch's
// protection (end-to-end protection, as RocksDB's protection info handed
// from a WriteBatch to its memtable): u is checksum.KVUnsequenced, of the
// memtable's ChecksumType, over the entry's key, kind and value as they
// were when the entry entered its batch, of which the low n bytes (1 to 8)
// were kept. Once the entry is copied into the arena, AddChecked derives
// the same checksum from the copied bytes and compares the n bytes: a
// mismatch (the batch's bytes, or the copy, changed since) is an error
// wrapping ErrCorruption naming the key and both values, and the entry is
// not inserted (its arena bytes are lost, as a failed insert's are). The
// entry's own protection bytes are then derived from u with
// checksum.KVSequence, not recomputed: with n = 8 they are exactly the
// batch's; with fewer, the bytes the batch did not keep come from the copy,
// which agreed with it in those it did. The hashing replaces Add's, so with
// protection bytes an AddChecked costs about what an Add does.
func (m *MemTable) AddChecked(seq uint64, kind Kind, key, value []byte, u uint64, n int) error {
	if n < 1 || n > 8 {
		return base.InvalidArgumentErrorf("memtable: %d batch protection bytes: must be 1 to 8", n)
	}
	return m.add(seq, kind, key, value, u, ^uint64(0)>>(64-8*n))
}

// add is Add, and AddChecked when mask is not 0 (the bytes of u to check).
func (m *MemTable) add(seq uint64, kind Kind, key, value []byte, u, mask uint64) error {
	list := m.points
	switch kind {
	case base.KindSet, base.KindDelete, base.KindMerge:
	case base.KindRangeDelete:
		list = m.rangeDels
	default:
		return base.InvalidArgumentErrorf("memtable: cannot add key kind %s", kind)
	}
	if seq > base.SeqNumMax {
		return base.InvalidArgumentErrorf("memtable: seqnum %d above the maximum %d", seq, base.SeqNumMax)
	}
	pn, err := list.Prepare(len(key)+base.TrailerLen, len(value)+m.protBytes)
	if err != nil {
		if errors.Is(err, skiplist.ErrArenaFull) {
			return err
		}
		return base.MarkInvalidArgument(fmt.Errorf("memtable: %w", err))
	}
	m.release(int64(EntrySize(len(key), len(value))))
	trailer := base.MakeTrailer(seq, kind)
	n := copy(pn.Key, key)
	binary.LittleEndian.PutUint64(pn.Key[n:], trailer)
	copy(pn.Value, value)
	if mask != 0 {
		if err := m.protectFromBatch(pn.Key[:n], trailer, pn.Value[:len(value)], pn.Value[len(value):], u, mask); err != nil {
			return err
		}
	} else if m.protBytes > 0 {
		putProtection(pn.Value[len(value):], checksum.KV(m.csType, key, trailer, value))
	}
	if list == m.points {
		var h uint64
		f := m.filter.f.Load()
		if f != nil {
			// Load the key's filter line now, so that its cache miss
			// overlaps the skiplist search instead of adding to it.
			h = filterHash(key)
			runtime.KeepAlive(f.touch(h))
		}
		if m.testHookBeforeLink != nil {
			m.testHookBeforeLink()
		}
		ins, _ := m.inserters.Get().(*skiplist.Inserter)
		if ins == nil {
			ins = m.points.NewInserter()
		}
		err = ins.Link(pn)
		m.inserters.Put(ins)
		if err == nil {
			// After the link (see lazyFilter): a filter published
			// since the load above is loaded again.
			if f == nil {
				if f = m.filter.f.Load(); f != nil {
					h = filterHash(key)
				}
			}
			if f != nil {
				f.add(h)
			}
		}
	} else {
		err = list.Link(pn)
	}
	if err != nil {
		if errors.Is(err, skiplist.ErrRecordExists) {
			return fmt.Errorf("memtable: add %s: %w", base.MakeInternalKey(key, seq, kind), err)
		}
		return base.CorruptionErrorf("memtable: add %s: %w", base.MakeInternalKey(key, seq, kind), err)
	}
	m.count.Add(1)
	return nil
}

// protectFromBatch checks an entry just copied into the arena (its user
// key, trailer and value there) against its batch's protection u (the bytes
// in mask) and stores the entry's protection bytes, derived from u (see
// AddChecked) into prot, the entry's protection bytes.
func (m *MemTable) protectFromBatch(key []byte, trailer uint64, value, prot []byte, u, mask uint64) error {
	got := checksum.KVUnsequenced(m.csType, key, uint8(trailer), value)
	if (got^u)&mask != 0 {
		nb := bits.OnesCount64(mask) / 8
		return base.CorruptionErrorf("memtable: entry %s does not match its batch's protection when copied into the memtable: batch %0*x, copy %0*x (%s, %d batch protection bytes)",
			base.MakeInternalKey(key, trailer>>8, base.Kind(trailer)), 2*nb, u&mask, 2*nb, got&mask, m.csType, nb)
	}
	if len(prot) > 0 {
		putProtection(prot, checksum.KVSequence(u&mask|got&^mask, trailer))
	}
	return nil
}

// putProtection stores the low len(dst) bytes of sum, little-endian.
func putProtection(dst []byte, sum uint64) {
	if len(dst) == 8 {
		binary.LittleEndian.PutUint64(dst, sum)
		return
	}
	for i := range dst {
		dst[i] = byte(sum >> (8 * i))
	}
}

// getProtection reads back what putProtection stored.
func getProtection(src []byte) uint64 {
	if len(src) == 8 {
		return binary.LittleEndian.Uint64(src)
	}
	var v uint64
	for i, b := range src {
		v |= uint64(b) << (8 * i)
	}
	return v
}

// decode splits a skiplist entry into internal key and user value, checking
// its protection bytes. rangeDel says which list the entry came from, so an
// entry of the wrong kind is reported too (a flipped kind byte that the
// protection bytes, if any, would also catch).
func (m *MemTable) decode(k, v []byte) (base.InternalKey, []byte, error) {
	n := len(k) - base.TrailerLen
	if n < 0 || len(v) < m.protBytes {
		return base.InternalKey{}, nil, base.CorruptionErrorf(
			"memtable: entry with key length %d and value length %d is too short for its trailer and %d protection bytes (key %s)",
			len(k), len(v), m.protBytes, base.HexKey(k))
	}
	ik := base.InternalKey{UserKey: k[:n:n], Trailer: binary.LittleEndian.Uint64(k[n:])}
	vn := len(v) - m.protBytes
	val := v[:vn:vn]
	if m.protBytes > 0 {
		stored := getProtection(v[vn:])
		mask := ^uint64(0) >> (64 - 8*m.protBytes)
		if sum := checksum.KV(m.csType, ik.UserKey, ik.Trailer, val) & mask; sum != stored {
			return base.InternalKey{}, nil, base.CorruptionErrorf(
				"memtable: per-KV checksum mismatch for key %s: stored %0*x, computed %0*x (%s, %d protection bytes)",
				ik, 2*m.protBytes, stored, 2*m.protBytes, sum, m.csType, m.protBytes)
		}
	}
	return ik, val, nil
}

// verifyBoundary checks the protection bytes of the entry on the other side
// of where a seek stopped: the predecessor of the landing entry after
// SeekGE or Get (dir -1), its successor after SeekLT (dir +1); when the seek
// found nothing, the last or first entry. A search compares that entry with
// the probe but does not read it whole, so a bit flip that moves its key
// without breaking the order (a newest version flipped just below its key,
// or the last entry flipped upward) would otherwise make the read skip it
// silently. One more checksum per seek, only with protection bytes on.
func (m *MemTable) verifyBoundary(sit skiplist.Iterator, landed bool, dir int) error {
	if m.protBytes == 0 {
		return nil
	}
	var ok bool
	switch {
	case landed && dir < 0:
		ok = sit.Prev()
	case landed:
		ok = sit.Next()
	case dir < 0:
		ok = sit.Last()
	default:
		ok = sit.First()
	}
	if !ok {
		if err := sit.Error(); err != nil {
			return base.CorruptionErrorf("memtable: checking the entry next to a seek: %w", err)
		}
		return nil
	}
	k, v, err := sit.Entry()
	if err != nil {
		return base.CorruptionErrorf("memtable: checking the entry next to a seek: %w", err)
	}
	_, _, err = m.decode(k, v)
	return err
}

// Get returns the newest point entry of userKey with seqnum <= snapSeq: its
// value (aliasing the arena), seqnum and kind (Set or Delete). found is false
// if there is none. The same user key means equal under the comparer
// (Comparer.Equal), which need not mean equal bytes. With paranoid checks
// the search validates every link it follows; with protection bytes the
// entry it lands on is verified whether or not it matches. Corruption gives
// an error wrapping ErrCorruption and found = false.
//
// A memtable no Add has completed in holds nothing a reader can see (an
// entry is counted before its batch is published), so Get returns at once:
// a DB's mutable memtable is empty after every flush, and probing its filter
// would cost a cache miss per Get for nothing (2.5 % of readrandom on a
// flushed DB larger than the cache).
func (m *MemTable) Get(userKey []byte, snapSeq uint64) (value []byte, seq uint64, kind Kind, found bool, err error) {
	if m.count.Load() == 0 {
		return nil, 0, 0, false, nil
	}
	f := m.filter.forGet()
	if f != nil && !f.mayContain(filterHash(userKey)) {
		return nil, 0, 0, false, nil
	}
	value, seq, kind, found, err = m.search(userKey, snapSeq)
	if !found && err == nil && f == nil && m.filter.missed() {
		m.filter.start(m.backfillFilter)
	}
	return value, seq, kind, found, err
}

// search is Get's search of the skiplist.
func (m *MemTable) search(userKey []byte, snapSeq uint64) (value []byte, seq uint64, kind Kind, found bool, err error) {
	if snapSeq > base.SeqNumMax {
		snapSeq = base.SeqNumMax
	}
	it := m.points.NewIter(m.paranoid)
	landed := it.SeekGESplit(userKey, base.MakeTrailer(snapSeq, base.KindMax))
	if err := it.Error(); err != nil {
		return nil, 0, 0, false, base.CorruptionErrorf("memtable: get %s: %w", base.HexKey(userKey), err)
	}
	if err := m.verifyBoundary(it, landed, -1); err != nil {
		return nil, 0, 0, false, fmt.Errorf("memtable: get %s: %w", base.HexKey(userKey), err)
	}
	if !landed {
		return nil, 0, 0, false, nil
	}
	k, v, err := it.Entry()
	if err != nil {
		return nil, 0, 0, false, base.CorruptionErrorf("memtable: get %s: %w", base.HexKey(userKey), err)
	}
	ik, val, err := m.decode(k, v)
	if err != nil {
		return nil, 0, 0, false, err
	}
	if !m.cmp.Eq(ik.UserKey, userKey) {
		return nil, 0, 0, false, nil
	}
	if k := ik.Kind(); !k.IsPoint() {
		return nil, 0, 0, false, base.CorruptionErrorf("memtable: point entry %s has kind %s", ik, k)
	}
	return val, ik.SeqNum(), ik.Kind(), true, nil
}

// IterOptions configure NewIter.
type IterOptions struct {
	// Validate forces validating mode even if the memtable is not paranoid;
	// the flush uses it so that corruption never reaches an SST.
	Validate bool
}

// NewIter returns an iterator over the point entries, implementing the
// InternalIterator contract. It verifies the protection bytes of every
// entry it lands on, and validates neighbour order if the memtable is
// paranoid or o.Validate is set.
func (m *MemTable) NewIter(o IterOptions) InternalIterator {
	it := new(Iter)
	m.InitIter(it, o)
	return it
}

// InitIter makes *it what NewIter returns, in memory the caller provides:
// the DB builds its iterators in one pooled allocation (see iterAlloc in
// package vigil). Whatever *it held before is overwritten.
func (m *MemTable) InitIter(it *Iter, o IterOptions) {
	*it = Iter{m: m, sit: m.points.NewIter(o.Validate || m.paranoid), what: "point"}
}

// NewRangeDelIter returns an iterator over the range tombstones:
// Key().UserKey is the start, Value() the end, ordered by start ascending
// (under the comparer) then seqnum descending. Checks as NewIter.
func (m *MemTable) NewRangeDelIter() InternalIterator {
	return &Iter{m: m, sit: m.rangeDels.NewIter(m.paranoid), what: "range deletion"}
}

// RangeDels returns every range tombstone with seqnum <= snapSeq, in
// iteration order (start ascending under the comparer, then seqnum
// descending). Start and End alias the arena.
func (m *MemTable) RangeDels(snapSeq uint64) ([]RangeTombstone, error) {
	it := m.rangeDels.NewIter(m.paranoid)
	var out []RangeTombstone
	for ok := it.First(); ok; ok = it.Next() {
		k, v, err := it.Entry()
		if err != nil {
			return nil, base.CorruptionErrorf("memtable: range deletions: %w", err)
		}
		ik, end, err := m.decode(k, v)
		if err != nil {
			return nil, err
		}
		if ik.Kind() != base.KindRangeDelete {
			return nil, base.CorruptionErrorf("memtable: range deletion entry %s has kind %s", ik, ik.Kind())
		}
		if ik.SeqNum() <= snapSeq {
			out = append(out, RangeTombstone{Start: ik.UserKey, End: end, Seq: ik.SeqNum()})
		}
	}
	if err := it.Error(); err != nil {
		return nil, base.CorruptionErrorf("memtable: range deletions: %w", err)
	}
	return out, nil
}

// Comparer returns the comparer the memtable orders user keys by
// (Options.Comparer, resolved: base.DefaultComparer for nil), so that code
// merging its iterators with others' can check it orders the same way.
func (m *MemTable) Comparer() *base.Comparer { return m.cmp }

// Count returns the number of successful Adds (point entries and range
// tombstones).
func (m *MemTable) Count() uint64 { return m.count.Load() }

// ApproximateSize returns the arena bytes in use, including skiplist
// overhead and the bytes of failed or duplicate inserts.
func (m *MemTable) ApproximateSize() int { return m.arena.Size() }

// Capacity returns the memory the memtable holds: the arena's size
// (Options.Size; its entries can use a few bytes less, see
// skiplist.Arena.Capacity) and its filter's, built or not (so that the
// DB's accounts stay exact; see lazyFilter).
func (m *MemTable) Capacity() int { return m.size + m.filter.bytes }

// Filtered reports whether Get consults the filter now: it has one (see
// Options.FilterBytes), built once Gets came (see lazyFilter).
func (m *MemTable) Filtered() bool { return m.filter.ready.Load() }

// backfillFilter adds the user key of every point entry the skiplist holds
// to f, checking each entry's protection bytes, and reports whether it got
// through them all: false if stop was set, or an entry failed its check
// (a key changed in RAM must not be filtered under its new bytes; a Get
// that searches reports it).
func (m *MemTable) backfillFilter(f *filter, stop *atomic.Bool) bool {
	it := m.points.NewIter(false)
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n%1024 == 0 && stop.Load() {
			return false
		}
		k, v, err := it.Entry()
		if err != nil {
			return false
		}
		ik, _, err := m.decode(k, v)
		if err != nil {
			return false
		}
		f.add(filterHash(ik.UserKey))
	}
	return it.Error() == nil
}

// Empty reports whether no Add has succeeded.
func (m *MemTable) Empty() bool { return m.count.Load() == 0 }

// Validate is the flush-side check of a quiescent memtable: it scans both
// skiplists fully and verifies key order under the comparer (full
// comparisons at every level), links, back links and lengths, every entry's
// protection bytes and kind, and that the number of entries equals Count().
// Any failure is an error wrapping ErrCorruption that names the key(s) in
// hex and what failed.
func (m *MemTable) Validate() error { return m.ValidateEach(nil, nil) }

// ValidateEach is Validate that also hands every entry, as its check
// passes, to point (the point entries in order: user key ascending under
// the comparer, seqnum descending) and then to rangeDel (the range
// tombstones, by start key; value is the end key). A flush writes its table
// from these calls, so the memtable is read once, not once to validate and
// once more to write: on a memtable far larger than the CPU caches each
// pass costs a cache miss per entry. If the check fails after some entries were handed over, the caller
// must discard what it made of them. An error returned by point or
// rangeDel stops the walk and is returned as it is (not as corruption).
// Either may be nil.
func (m *MemTable) ValidateEach(point, rangeDel func(ik InternalKey, value []byte) error) error {
	var cbErr error
	np, err := m.points.Verify(func(k, v []byte) error {
		ik, val, err := m.decode(k, v)
		if err == nil && !ik.Kind().IsPoint() {
			err = base.CorruptionErrorf("memtable: point entry %s has kind %s", ik, ik.Kind())
		}
		if err == nil && point != nil {
			if cbErr = point(ik, val); cbErr != nil {
				return cbErr
			}
		}
		return err
	})
	if cbErr != nil {
		return cbErr
	}
	if err != nil {
		return base.CorruptionErrorf("memtable: validate point entries: %w", err)
	}
	nr, err := m.rangeDels.Verify(func(k, v []byte) error {
		ik, val, err := m.decode(k, v)
		if err == nil && ik.Kind() != base.KindRangeDelete {
			err = base.CorruptionErrorf("memtable: range deletion entry %s has kind %s", ik, ik.Kind())
		}
		if err == nil && rangeDel != nil {
			if cbErr = rangeDel(ik, val); cbErr != nil {
				return cbErr
			}
		}
		return err
	})
	if cbErr != nil {
		return cbErr
	}
	if err != nil {
		return base.CorruptionErrorf("memtable: validate range deletions: %w", err)
	}
	if c := m.count.Load(); uint64(np+nr) != c {
		return base.CorruptionErrorf("memtable: found %d entries (%d point, %d range deletions) but %d were added",
			np+nr, np, nr, c)
	}
	return nil
}

// The fault-injection hooks (see internal/private): tests flip bits in a
// memtable's arena to simulate memory corruption.
func init() {
	private.MemtableArena = func(mt any) []byte { return mt.(*MemTable).arenaForTesting() }
	private.MemtableEntry = func(mt any, userKey []byte) (int, int, int, int, bool, bool) {
		return mt.(*MemTable).entryKindForTesting(userKey)
	}
}

// arenaForTesting returns the live arena bytes [0, ApproximateSize()).
func (m *MemTable) arenaForTesting() []byte { return m.arena.Bytes() }

// entryForTesting locates the newest entry of userKey (a point entry, or
// else a range tombstone starting at userKey) and returns the offsets inside
// arenaForTesting() of its user-key bytes and of its value bytes (without the
// protection bytes), with their lengths.
func (m *MemTable) entryForTesting(userKey []byte) (keyOff, keyLen, valOff, valLen int, ok bool) {
	keyOff, keyLen, valOff, valLen, _, ok = m.entryKindForTesting(userKey)
	return keyOff, keyLen, valOff, valLen, ok
}

// entryKindForTesting is entryForTesting that also reports whether the entry
// found is a range tombstone.
func (m *MemTable) entryKindForTesting(userKey []byte) (keyOff, keyLen, valOff, valLen int, rangeDel, ok bool) {
	for i, l := range []*skiplist.Skiplist{m.points, m.rangeDels} {
		it := l.NewIter(false)
		if it.SeekGESplit(userKey, ^uint64(0)) {
			k := it.Key()
			if len(k) >= base.TrailerLen && m.cmp.Eq(k[:len(k)-base.TrailerLen], userKey) {
				return it.KeyOffset(), len(userKey), it.ValueOffset(), len(it.Value()) - m.protBytes, i == 1, true
			}
		}
	}
	return 0, 0, 0, 0, false, false
}

// Iter is a memtable iterator (NewIter, InitIter, NewRangeDelIter): it
// implements InternalIterator over one of the skiplists. It is exported
// only so that a caller can hold one in memory of its own (InitIter); its
// zero value is not usable. Not safe for concurrent use.
type Iter struct {
	m     *MemTable
	sit   skiplist.Iterator
	what  string // "point" or "range deletion", for errors
	valid bool
	err   error
	key   base.InternalKey
	val   []byte
}

// land decodes and verifies the entry the skiplist iterator reached.
func (it *Iter) land(ok bool) bool {
	if !ok {
		it.valid = false
		if err := it.sit.Error(); err != nil {
			it.err = base.CorruptionErrorf("memtable: %s iterator: %w", it.what, err)
		}
		return false
	}
	k, v, err := it.sit.Entry()
	if err != nil {
		it.valid, it.err = false, base.CorruptionErrorf("memtable: %s iterator: %w", it.what, err)
		return false
	}
	ik, val, err := it.m.decode(k, v)
	if err != nil {
		it.valid, it.err = false, err
		return false
	}
	it.key, it.val, it.valid = ik, val, true
	return true
}

func (it *Iter) SeekGE(userKey []byte) bool {
	it.err = nil
	ok := it.sit.SeekGESplit(userKey, ^uint64(0))
	if err := it.boundary(ok, -1); err != nil {
		it.valid, it.err = false, err
		return false
	}
	return it.land(ok)
}

func (it *Iter) SeekLT(userKey []byte) bool {
	it.err = nil
	ok := it.sit.SeekLTSplit(userKey, ^uint64(0))
	if err := it.boundary(ok, +1); err != nil {
		it.valid, it.err = false, err
		return false
	}
	return it.land(ok)
}

// boundary runs verifyBoundary after a seek that did not fail.
func (it *Iter) boundary(landed bool, dir int) error {
	if it.m.protBytes == 0 || it.sit.Error() != nil {
		return nil
	}
	return it.m.verifyBoundary(it.sit, landed, dir)
}

func (it *Iter) First() bool {
	it.err = nil
	return it.land(it.sit.First())
}

func (it *Iter) Last() bool {
	it.err = nil
	return it.land(it.sit.Last())
}

func (it *Iter) Next() bool {
	if !it.valid {
		return false
	}
	return it.land(it.sit.Next())
}

func (it *Iter) Prev() bool {
	if !it.valid {
		return false
	}
	return it.land(it.sit.Prev())
}

func (it *Iter) Valid() bool           { return it.valid }
func (it *Iter) Key() base.InternalKey { return it.key }
func (it *Iter) Value() []byte         { return it.val }
func (it *Iter) Error() error          { return it.err }

func (it *Iter) Close() error {
	it.valid = false
	return nil
}
