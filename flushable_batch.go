package vigil

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"unsafe"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manual"
	"github.com/vigildb/vigil/memtable"
	"github.com/vigildb/vigil/sst"
)

// Large batches.
//
// A batch bigger than half the write buffer is not inserted into the
// skiplist entry by entry (for a batch of a million random keys that is a
// million searches, each a cache miss per level): it is written to the WAL
// as usual, then sorted once, and the sorted batch itself joins the list of
// immutable memtables, right after the memtable it rotates out, and is
// flushed from there like one. Pebble calls this a flushable batch.
//
// Everything a memtable guarantees holds: the batch is one WAL record and
// gets its sequence numbers under commitMu (atomicity, WAL order); it
// becomes visible through the publisher like any batch (snapshots); Get and
// iterators read it through the same interfaces as a memtable; with
// ParanoidMemoryChecks its iterators check key order at every step, and
// with protection bytes every entry carries a 64-bit KV checksum verified on
// every read and at flush (per-KV protection), over the batch's bytes as
// they were at Apply (the caller's Batch copies its buffer before writing
// to it again, see Batch). A protected batch (Options.BatchProtectionBytesPerKey)
// is checked entry by entry as it is sorted, before it waits for commitMu
// and the WAL: a mismatch refuses it, nothing written. Its entries' own
// checksums are then derived from the batch's, as a memtable's are
// (memtable.AddChecked). The bytes are not checked again between then and
// the WAL write (a copy, under commitMu, of a batch of tens of MB); a flip
// in that window reaches the WAL, and the flushable batch's own checksums,
// derived from the batch's, report it at the first read or at the flush.

// flushable is an entry of the memtable list as reads and flushes see it: a
// memtable, or a flushableBatch.
type flushable interface {
	Get(userKey []byte, snapSeq uint64) (value []byte, seq uint64, kind base.Kind, found bool, err error)
	NewIter(o memtable.IterOptions) base.InternalIterator
	NewRangeDelIter() base.InternalIterator
	RangeDels(snapSeq uint64) ([]base.RangeTombstone, error)
	Count() uint64
	Empty() bool
	Validate() error
	// ValidateEach validates as Validate does and hands each entry that
	// passes to point, then each range tombstone to rangeDel: the flush
	// writes its table from one pass (see writeValidated).
	ValidateEach(point, rangeDel func(ik base.InternalKey, value []byte) error) error
	ApproximateSize() int
	Capacity() int
	Release()
}

var (
	_ flushable = (*memtable.MemTable)(nil)
	_ flushable = (*flushableBatch)(nil)
)

// flushableBatchFraction: batches needing more than WriteBufferSize / this
// of memtable bytes become flushable batches.
const flushableBatchFraction = 2

// fbEntry is one point entry of a flushable batch: where its key is in
// data, its value's length and its kind, the record's index in the batch
// (its seqnum is the batch's first plus it), and an abbreviation of the
// key's first bytes for fast comparisons. 24 bytes, a million of them for a
// batch of a million entries: the value's offset follows from the key's end
// and the value length's varint (the batch encoding), so it is not stored,
// and the kind shares a word with the value's length.
type fbEntry struct {
	abbrev         uint64
	keyOff, keyLen uint32
	// lenKind is the value's length << 4 | the entry's kind.
	lenKind uint32
	idx     uint32
}

// A kind fits in 4 bits and a value's length in 28 (an entry is at most
// sst.MaxEntrySize bytes): fbEntry.lenKind relies on both.
var (
	_ [15 - base.KindMax]struct{}
	_ [1<<28 - 1 - sst.MaxEntrySize]struct{}
)

func (e *fbEntry) kind() base.Kind { return base.Kind(e.lenKind & 15) }
func (e *fbEntry) valLen() uint32  { return e.lenKind >> 4 }

// flushableBatch is a committed batch, sorted, standing in for a memtable.
//
// Concurrency: immutable once built; any number of readers use it at once.
// Invariants: entries are sorted by user key ascending, then seqnum
// descending; every slice handed out aliases data, the committed batch's
// own buffer, which nothing writes to any more (the Batch copies before its
// next write) and which stays reachable until Release (the memTableEntry's
// reference count decides when).
type flushableBatch struct {
	data []byte // the batch encoding: the Batch's buffer, lent (Go heap)
	seq  uint64 // seqnum of record 0
	// entries are the point entries, in manual memory (manual.AllocSlice,
	// one slot per record of the batch).
	entries []fbEntry
	tombs   []base.RangeTombstone // sorted by start, then seqnum descending; alias data
	// prot holds the point entries' KV checksums, by record index (an
	// entry's idx; a range tombstone's slot is unused); nil: no protection.
	prot  []uint64
	cksum checksum.Type
	count uint64
	// paranoid makes iterators check key order at every step.
	paranoid bool
	// cmp orders the keys (the DB's comparer, resolved).
	cmp *base.Comparer
}

// newFlushableBatch sorts and (with protect) protects b, over b's own
// buffer: the caller lends it (Batch.lend) once the batch is committed, and
// until then nothing else writes to it but the header's seqnum, which the
// flushable batch does not read. Copying it instead would hold the batch
// twice at the moment memory peaks (a batch this size is a good part of the
// write buffer). Its first seqnum is set later (fb.seq), under commitMu. A
// protected b is checked entry by entry against its protection (see
// protectRecord): a mismatch is an error wrapping ErrCorruption. Keys
// are sorted in cmp's order (the DB's comparer, resolved).
func newFlushableBatch(cmp *base.Comparer, b *Batch, cksum checksum.Type, protect, paranoid bool) (*flushableBatch, error) {
	fb := &flushableBatch{cksum: cksum, paranoid: paranoid, cmp: cmp}
	// Checked against the batch's protection as the records are read, when
	// it is of this type; in its own type first otherwise (only when the
	// DB's type is None: Apply converts the others, see protectBatch).
	var mask uint64
	switch {
	case b.protBytes != 0 && b.protType == cksum:
		mask = protMask(b.protBytes)
	case b.protBytes != 0:
		if err := b.verifyProtection(); err != nil {
			return nil, err
		}
	}
	// A buffer still lent to an earlier flushable batch (the batch applied
	// again unchanged) is copied first: each aliases its own.
	b.init()
	r, err := b.recordReader()
	if err != nil {
		return nil, err
	}
	fb.data = b.data[:len(b.data):len(b.data)]
	if mask != 0 && uint64(len(b.prot)) != uint64(r.count) {
		return nil, base.CorruptionErrorf("batch: %d records, %d protected", r.count, len(b.prot))
	}
	if r.count > 0 {
		// Outside the Go heap, as the memtables' arenas: a batch's index
		// is tens of MB that the collector would neither need to scan nor
		// free promptly.
		fb.entries = manual.AllocSlice[fbEntry](int(r.count))[:0]
	}
	if protect || mask != 0 {
		// A protected batch keeps its entries' checksums even without
		// memtable protection: it waits for commitMu (maybe through a
		// stall) after this check, and the flush's validation must catch a
		// flip made meanwhile.
		fb.prot = make([]uint64, r.count)
	}
	if err := fb.index(&r, b.prot, mask); err != nil {
		fb.Release()
		return nil, err
	}
	slices.SortFunc(fb.entries, fb.compare)
	slices.SortFunc(fb.tombs, func(a, b base.RangeTombstone) int {
		if c := cmp.Cmp(a.Start, b.Start); c != 0 {
			return c
		}
		return -cmpUint64(a.Seq, b.Seq)
	})
	return fb, nil
}

// index reads the batch's records into entries and tombs, in batch order,
// checking each against its batch protection (batchProt, the bytes in mask;
// mask 0: none) and protecting it (protectRecord).
func (fb *flushableBatch) index(r *batchReader, batchProt []uint64, mask uint64) error {
	for idx := uint32(0); ; idx++ {
		kind, key, value, ok, err := r.next("batch")
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		var u uint64
		if mask != 0 {
			u = batchProt[idx]
		}
		if err := fb.protectRecord(idx, kind, key, value, u, mask); err != nil {
			return err
		}
		fb.count++
		if kind == base.KindRangeDelete {
			fb.tombs = append(fb.tombs, base.RangeTombstone{Start: key, End: value, Seq: uint64(idx)}) // + fb.seq, see setSeq
			continue
		}
		keyOff, inside := fb.offset(key)
		if !inside {
			return fmt.Errorf("vigil: internal error: batch record %d's key is not inside the batch's buffer", idx)
		}
		// (Within the capacity reserved for the batch's records, so append
		// never reallocates onto the Go heap.)
		fb.entries = append(fb.entries, fbEntry{
			abbrev: abbrevKey(key),
			keyOff: keyOff, keyLen: uint32(len(key)),
			lenKind: uint32(len(value))<<4 | uint32(kind),
			idx:     idx,
		})
	}
}

// protectRecord checks record idx (kind, key and value, in fb.data) against
// its batch's protection u, in the bytes of mask (mask 0: the batch has
// none), and, if fb keeps protection, stores the record's KV checksum with
// the trailer of its index (kvChecksum), derived from u as a memtable
// derives its own (memtable.AddChecked) rather than recomputed.
func (fb *flushableBatch) protectRecord(idx uint32, kind base.Kind, key, value []byte, u, mask uint64) error {
	trailer := base.MakeTrailer(uint64(idx), kind)
	if mask == 0 {
		if fb.prot != nil && kind != base.KindRangeDelete {
			fb.prot[idx] = checksum.KV(fb.cksum, key, trailer, value)
		}
		return nil
	}
	got := checksum.KVUnsequenced(fb.cksum, key, uint8(kind), value)
	if (got^u)&mask != 0 {
		nb := bits.OnesCount64(mask) / 8
		return base.CorruptionErrorf("batch: record %d (%s of key %s) changed since it was added: protection %0*x, now %0*x (%s, %d batch protection bytes)",
			idx, kind, base.HexKey(key[:min(len(key), 32)]), 2*nb, u&mask, 2*nb, got&mask, fb.cksum, nb)
	}
	if fb.prot != nil && kind != base.KindRangeDelete {
		fb.prot[idx] = checksum.KVSequence(u&mask|got&^mask, trailer)
	}
	return nil
}

// setSeq sets the batch's first seqnum, once it is assigned.
func (fb *flushableBatch) setSeq(seq uint64) {
	fb.seq = seq
	for i := range fb.tombs {
		fb.tombs[i].Seq += seq
	}
}

// offset returns the offset of s in fb.data, which s must lie within (the
// batch reader's slices do); ok is false if it does not.
func (fb *flushableBatch) offset(s []byte) (off uint32, ok bool) {
	if len(s) == 0 {
		return 0, true
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(fb.data)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	if p < start || p-start > uintptr(len(fb.data)) || uintptr(len(s)) > uintptr(len(fb.data))-(p-start) {
		return 0, false
	}
	return uint32(p - start), true
}

// abbrevKey is the first 8 bytes of key, big-endian, zero-padded: ordering
// abbreviations orders keys unless they tie.
func abbrevKey(key []byte) uint64 {
	var b [8]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:])
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (fb *flushableBatch) key(e *fbEntry) []byte {
	return fb.data[e.keyOff : e.keyOff+e.keyLen : e.keyOff+e.keyLen]
}

func (fb *flushableBatch) value(e *fbEntry) []byte {
	off := fb.valueOffset(e)
	end := off + e.valLen()
	return fb.data[off:end:end]
}

// valueOffset returns where e's value starts in data: after the key, the
// uvarint of its length (the batch encoding). An empty value (a deletion's)
// is taken at the key's end.
func (fb *flushableBatch) valueOffset(e *fbEntry) uint32 {
	end := e.keyOff + e.keyLen
	if n := e.valLen(); n > 0 {
		end += uint32(base.UvarintLen(uint64(n)))
	}
	return end
}

// compare orders entries: user key ascending, then seqnum descending.
func (fb *flushableBatch) compare(a, b fbEntry) int {
	if a.abbrev != b.abbrev {
		return cmpUint64(a.abbrev, b.abbrev)
	}
	if c := fb.cmp.Cmp(fb.key(&a), fb.key(&b)); c != 0 {
		return c
	}
	return -cmpUint64(uint64(a.idx), uint64(b.idx))
}

func (fb *flushableBatch) trailer(e *fbEntry) uint64 {
	return base.MakeTrailer(fb.seq+uint64(e.idx), e.kind())
}

// kvChecksum is entry i's protection: the KV checksum of its key, value,
// kind and index in the batch. It leaves out the batch's first seqnum, which
// is assigned after the batch is sorted and protected (outside commitMu).
func (fb *flushableBatch) kvChecksum(i int) uint64 {
	e := &fb.entries[i]
	return checksum.KV(fb.cksum, fb.key(e), base.MakeTrailer(uint64(e.idx), e.kind()), fb.value(e))
}

// check verifies entry i's protection.
func (fb *flushableBatch) check(i int) error {
	if fb.prot == nil {
		return nil
	}
	e := &fb.entries[i]
	if got, want := fb.kvChecksum(i), fb.prot[e.idx]; got != want {
		return base.CorruptionErrorf("flushable batch: entry %s#%d: KV checksum mismatch (stored %#016x, computed %#016x)",
			base.HexKey(fb.key(e)), fb.seq+uint64(e.idx), want, got)
	}
	return nil
}

// seekGE returns the index of the first entry with user key >= key.
func (fb *flushableBatch) seekGE(key []byte) int {
	ab := abbrevKey(key)
	lo, hi := 0, len(fb.entries)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		e := &fb.entries[m]
		c := cmpUint64(e.abbrev, ab)
		if c == 0 {
			c = fb.cmp.Cmp(fb.key(e), key)
		}
		if c < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Get returns the newest version of userKey visible at snapSeq.
func (fb *flushableBatch) Get(userKey []byte, snapSeq uint64) (value []byte, seq uint64, kind base.Kind, found bool, err error) {
	for i := fb.seekGE(userKey); i < len(fb.entries); i++ {
		e := &fb.entries[i]
		if !fb.cmp.Eq(fb.key(e), userKey) {
			break
		}
		if s := fb.seq + uint64(e.idx); s <= snapSeq {
			if err := fb.check(i); err != nil {
				return nil, 0, 0, false, err
			}
			return fb.value(e), s, e.kind(), true, nil
		}
	}
	return nil, 0, 0, false, nil
}

// RangeDels returns the batch's range tombstones visible at snapSeq.
func (fb *flushableBatch) RangeDels(snapSeq uint64) ([]base.RangeTombstone, error) {
	var out []base.RangeTombstone
	for _, t := range fb.tombs {
		if t.Seq <= snapSeq {
			out = append(out, t)
		}
	}
	return out, nil
}

// Count returns the number of records (points and range tombstones).
func (fb *flushableBatch) Count() uint64 { return fb.count }

// Empty reports whether the batch holds nothing.
func (fb *flushableBatch) Empty() bool { return fb.count == 0 }

// ApproximateSize returns the memory the batch holds.
func (fb *flushableBatch) ApproximateSize() int { return fb.Capacity() }

// Capacity returns the memory the batch holds: its copy, its index and its
// protection.
func (fb *flushableBatch) Capacity() int {
	return len(fb.data) + cap(fb.entries)*int(unsafe.Sizeof(fbEntry{})) + 8*len(fb.prot)
}

// Validate re-checks the order and protection of every entry and the count,
// as a flush does before writing a table.
func (fb *flushableBatch) Validate() error { return fb.ValidateEach(nil, nil) }

// ValidateEach is Validate that hands every entry, as its checks pass, to
// point (in order) and then every range tombstone to rangeDel (value: the
// end key), as MemTable.ValidateEach does: the flush writes its table from
// these calls. An error of point or rangeDel is returned as it is. Either
// may be nil.
func (fb *flushableBatch) ValidateEach(point, rangeDel func(ik base.InternalKey, value []byte) error) error {
	for i := range fb.entries {
		e := &fb.entries[i]
		if i > 0 && fb.compare(fb.entries[i-1], *e) >= 0 {
			return base.CorruptionErrorf("flushable batch: entries %d and %d out of order (%s, %s)", i-1, i,
				base.HexKey(fb.key(&fb.entries[i-1])), base.HexKey(fb.key(e)))
		}
		if err := fb.check(i); err != nil {
			return err
		}
		if point != nil {
			if err := point(base.InternalKey{UserKey: fb.key(e), Trailer: fb.trailer(e)}, fb.value(e)); err != nil {
				return err
			}
		}
	}
	if rangeDel != nil {
		for _, t := range fb.tombs {
			if err := rangeDel(base.MakeInternalKey(t.Start, t.Seq, base.KindRangeDelete), t.End); err != nil {
				return err
			}
		}
	}
	if n := uint64(len(fb.entries) + len(fb.tombs)); n != fb.count {
		return base.CorruptionErrorf("flushable batch: %d entries, the batch counted %d", n, fb.count)
	}
	return nil
}

// Release drops the batch's memory (the buffer goes back to its Batch, or
// to the collector). Nothing may use it afterwards.
func (fb *flushableBatch) Release() {
	manual.FreeSlice(fb.entries)
	fb.data, fb.entries, fb.tombs, fb.prot = nil, nil, nil, nil
}

// NewIter returns an iterator over the point entries. With o.Validate (or
// ParanoidMemoryChecks) every step checks key order and protection.
func (fb *flushableBatch) NewIter(o memtable.IterOptions) base.InternalIterator {
	return &fbIter{fb: fb, i: -1, validate: o.Validate || fb.paranoid}
}

// NewRangeDelIter returns an iterator over the range tombstones, keyed by
// start (value: end).
func (fb *flushableBatch) NewRangeDelIter() base.InternalIterator {
	return &fbTombIter{fb: fb, i: -1}
}

// fbIter iterates a flushable batch's point entries.
type fbIter struct {
	fb       *flushableBatch
	i        int
	validate bool
	err      error
}

func (it *fbIter) at(i int) bool {
	it.i = i
	if i < 0 || i >= len(it.fb.entries) {
		return false
	}
	if it.validate {
		if err := it.fb.check(i); err != nil {
			it.err = err
			it.i = -1
			return false
		}
	}
	return true
}

// step moves by d, checking order against the entry left when validating.
func (it *fbIter) step(d int) bool {
	from := it.i
	if !it.at(from + d) {
		return false
	}
	if it.validate {
		a, b := it.fb.entries[from], it.fb.entries[it.i]
		if d < 0 {
			a, b = b, a
		}
		if it.fb.compare(a, b) >= 0 {
			it.err = base.CorruptionErrorf("flushable batch: keys out of order: %s then %s",
				base.HexKey(it.fb.key(&a)), base.HexKey(it.fb.key(&b)))
			it.i = -1
			return false
		}
	}
	return true
}

func (it *fbIter) SeekGE(key []byte) bool { it.err = nil; return it.at(it.fb.seekGE(key)) }
func (it *fbIter) SeekLT(key []byte) bool { it.err = nil; return it.at(it.fb.seekGE(key) - 1) }
func (it *fbIter) First() bool            { it.err = nil; return it.at(0) }
func (it *fbIter) Last() bool             { it.err = nil; return it.at(len(it.fb.entries) - 1) }
func (it *fbIter) Next() bool             { return it.step(1) }
func (it *fbIter) Prev() bool             { return it.step(-1) }
func (it *fbIter) Valid() bool            { return it.i >= 0 && it.i < len(it.fb.entries) }
func (it *fbIter) Error() error           { return it.err }
func (it *fbIter) Close() error           { return it.err }

func (it *fbIter) Key() base.InternalKey {
	e := &it.fb.entries[it.i]
	return base.InternalKey{UserKey: it.fb.key(e), Trailer: it.fb.trailer(e)}
}

func (it *fbIter) Value() []byte { return it.fb.value(&it.fb.entries[it.i]) }

// fbTombIter iterates a flushable batch's range tombstones.
type fbTombIter struct {
	fb *flushableBatch
	i  int
}

func (it *fbTombIter) at(i int) bool { it.i = i; return it.Valid() }

// SeekGE moves to the first tombstone starting at or after key.
func (it *fbTombIter) SeekGE(key []byte) bool {
	return it.at(sort.Search(len(it.fb.tombs), func(i int) bool { return it.fb.cmp.Cmp(it.fb.tombs[i].Start, key) >= 0 }))
}

// SeekLT moves to the last tombstone starting before key.
func (it *fbTombIter) SeekLT(key []byte) bool {
	return it.at(sort.Search(len(it.fb.tombs), func(i int) bool { return it.fb.cmp.Cmp(it.fb.tombs[i].Start, key) >= 0 }) - 1)
}
func (it *fbTombIter) First() bool   { return it.at(0) }
func (it *fbTombIter) Last() bool    { return it.at(len(it.fb.tombs) - 1) }
func (it *fbTombIter) Next() bool    { return it.at(it.i + 1) }
func (it *fbTombIter) Prev() bool    { return it.at(it.i - 1) }
func (it *fbTombIter) Valid() bool   { return it.i >= 0 && it.i < len(it.fb.tombs) }
func (it *fbTombIter) Error() error  { return nil }
func (it *fbTombIter) Close() error  { return nil }
func (it *fbTombIter) Value() []byte { return it.fb.tombs[it.i].End }
func (it *fbTombIter) Key() base.InternalKey {
	t := it.fb.tombs[it.i]
	return base.MakeInternalKey(t.Start, t.Seq, base.KindRangeDelete)
}

func (fb *flushableBatch) String() string {
	return fmt.Sprintf("flushable batch of %d records at seq %d", fb.count, fb.seq)
}
