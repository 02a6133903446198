package vigil

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/memtable"
	"github.com/vigildb/vigil/sst"
)

// Batch collects writes that DB.Apply commits atomically: after a crash a
// batch is either all there or not at all, and readers never see part of it.
//
// The encoded form is also the WAL record payload, so its layout is an
// on-disk format (pinned by a golden test):
//
//	+-------------+-----------+---------------------------------------+
//	| seqnum u64  | count u32 | record ... record                     |
//	+-------------+-----------+---------------------------------------+
//	record = kind u8 | uvarint len | key | [uvarint len | value]
//
// Set, Merge and RangeDelete records carry a value (the range's exclusive end for
// RangeDelete); Delete records do not. The i-th record gets sequence number
// seqnum+i.
//
// A Batch is not safe for concurrent use. It may be reused after Apply
// returns (Reset), and Apply does not keep references to it, with one
// exception invisible to the caller: a batch too large for the memtable
// (see flushable_batch.go) lends its buffer to the DB until that data is
// flushed, instead of the DB copying it. The batch then treats the buffer
// as read-only: its next write copies it first (Reset drops it), so the
// committed bytes never change under the DB.
//
// # Protection
//
// With Options.BatchProtectionBytesPerKey a batch made by NewBatch keeps a
// checksum of each entry (checksum.KVUnsequenced of key, kind and value,
// truncated to that many bytes, in a slice beside the buffer: 8 bytes per
// entry) computed from the caller's key and value when Put, Delete or
// DeleteRange adds it. Apply checks every entry against it just before the
// batch is written to the WAL, and again as each entry is copied into the
// memtable (see DB.Apply for what each mismatch does). So a bit flipped in
// the batch's buffer between Put and Apply is ErrCorruption, not a durable
// wrong write. The protection is the batch's own, fixed when it is made:
//
//   - A Batch{} made without a DB, or by NewBatch of a DB without the
//     option, has none. Applied to a DB with the option, it takes the DB's
//     setting: its entries are protected from then on, those already in it
//     from their bytes at that Apply (so a flip before that Apply is not
//     caught), and entries added after it (after Reset, say) from the
//     caller's bytes as for a batch made by NewBatch.
//   - A protected batch applied to a DB without the option is still
//     checked, with its own bytes per key.
//   - Applied to a DB of another checksum type, a protected batch is
//     checked in its own type, then protected again in the DB's, from the
//     bytes just checked, for the memtable's check (none if the DB's type
//     is None).
type Batch struct {
	data []byte
	// shared: a flushable batch holds data (see above); nothing may write
	// to it any more (own).
	shared bool
	// err is the first invalid write added (an entry too large for an
	// SST); Apply returns it and writes nothing.
	err error
	// count is the number of records.
	count uint32
	// memSize is a pessimistic estimate of the memtable bytes the batch needs.
	memSize int
	// prot is the batch's protection (see Batch): per record, in order,
	// checksum.KVUnsequenced(protType, key, kind, value) & protMask(protBytes),
	// computed when the record was added; empty when protBytes is 0.
	prot []uint64
	// protBytes is how many bytes of each checksum the batch keeps, 0 for
	// none, and protType their checksum type (resolved; never None when
	// protBytes is not 0).
	protBytes uint8
	protType  checksum.Type
	// merges counts the batch's merge operands: Apply refuses them on a DB
	// without a Merger.
	merges uint32
	// cmp orders the batch's keys (DB.NewBatch gives the DB's; nil: the
	// default): DeleteRange checks its ranges in it. rangeDels counts
	// the range deletions so checked, which Apply refuses on a DB of
	// another comparer.
	cmp       *base.Comparer
	rangeDels uint32
	// ix is the index of a batch made by NewIndexedBatch (nil for any
	// other): see batch_index.go.
	ix *batchIndex
}

const batchHeaderLen = 12

// batchInitialSize is a new batch's buffer, enough for a few small entries.
const batchInitialSize = 1 << 10

// maxEntrySize bounds key+value: an entry must fit one SST block.
const maxEntrySize = sst.MaxEntrySize

// NewBatch returns an empty batch, protected as the DB's
// Options.BatchProtectionBytesPerKey asks (see Batch), whose DeleteRange
// orders its bounds by the DB's comparer. Apart from that, batches need no
// DB: a Batch{} works too, but orders range deletions bytewise (a DB with
// Options.Comparer refuses its range deletions).
func (d *DB) NewBatch() *Batch {
	b := &Batch{cmp: d.cmp}
	b.setProtection(d.cksum, d.opts.BatchProtectionBytesPerKey)
	return b
}

// protMask keeps the n low bytes of a checksum (n 1 to 8).
func protMask(n uint8) uint64 { return ^uint64(0) >> (64 - 8*uint(n)) }

// setProtection makes the empty batch keep n bytes (0: none) of type t's
// checksum per entry from its next entry on. A None type means none.
func (b *Batch) setProtection(t checksum.Type, n int) {
	if t == checksum.None {
		n = 0
	}
	b.protBytes, b.protType = uint8(n), t
	b.prot = b.prot[:0]
}

// protectFromBytes gives the batch n bytes of type t's protection (see
// setProtection), computed for the entries already in it from their bytes
// now: from here on they are guarded, not from when they were added. A
// malformed buffer is ErrCorruption.
func (b *Batch) protectFromBytes(t checksum.Type, n int) error {
	b.setProtection(t, n)
	if b.protBytes == 0 || b.count == 0 {
		return nil
	}
	r, err := b.recordReader()
	if err != nil {
		return err
	}
	mask := protMask(b.protBytes)
	for {
		kind, key, value, ok, err := r.next("batch")
		if err != nil || !ok {
			return err
		}
		b.prot = append(b.prot, checksum.KVUnsequenced(t, key, uint8(kind), value)&mask)
	}
}

// recordReader reads the batch's records, stamping the header first: the
// count, and a zero seqnum (Apply stamps the real one when it has it).
// Until Apply the header is nobody's data, so a flip in it must not fail
// the reader's bounds checks.
func (b *Batch) recordReader() (batchReader, error) {
	if !b.shared {
		// (A shared buffer's header was stamped when it was lent, and
		// nothing was added since.)
		b.init()
		binary.LittleEndian.PutUint64(b.data[0:8], 0)
		binary.LittleEndian.PutUint32(b.data[8:12], b.count)
	}
	return newBatchReader(b.data, "batch")
}

// verifyProtection checks every record of the protected batch against the
// checksum it got when it was added: Apply's check before the WAL write. A
// record that changed, a malformed buffer, or a record count other than
// the protection's is an error wrapping ErrCorruption.
func (b *Batch) verifyProtection() error {
	r, err := b.recordReader()
	if err != nil {
		return err
	}
	mask := protMask(b.protBytes)
	for i := 0; ; i++ {
		kind, key, value, ok, err := r.next("batch")
		switch {
		case err != nil:
			return err
		case !ok && i == len(b.prot):
			return nil
		case !ok || i >= len(b.prot):
			return base.CorruptionErrorf("batch: %d records in the buffer, %d protected", r.read, len(b.prot))
		}
		if got := checksum.KVUnsequenced(b.protType, key, uint8(kind), value) & mask; got != b.prot[i] {
			return base.CorruptionErrorf("batch: record %d (%s of key %s) changed since it was added: protection %0*x, now %0*x (%s, %d batch protection bytes)",
				i, kind, base.HexKey(key[:min(len(key), 32)]), 2*int(b.protBytes), b.prot[i], 2*int(b.protBytes), got, b.protType, b.protBytes)
		}
	}
}

func (b *Batch) init() {
	b.own()
	if len(b.data) < batchHeaderLen {
		if cap(b.data) < batchHeaderLen {
			b.data = make([]byte, 0, batchInitialSize)
		}
		b.data = append(b.data[:0], make([]byte, batchHeaderLen)...)
	}
}

func (b *Batch) add(kind base.Kind, key, value []byte, hasValue bool) {
	if n := len(key) + len(value); n > maxEntrySize && b.err == nil {
		b.err = base.InvalidArgumentErrorf("entry of %d bytes (key %s) exceeds the maximum of %d", n, base.HexKey(key[:min(len(key), 16)]), maxEntrySize)
	}
	b.init()
	b.grow(1 + 2*binary.MaxVarintLen32 + len(key) + len(value))
	b.data = append(b.data, byte(kind))
	b.data = binary.AppendUvarint(b.data, uint64(len(key)))
	keyOff := len(b.data)
	b.data = append(b.data, key...)
	valOff := len(b.data)
	if hasValue {
		b.data = binary.AppendUvarint(b.data, uint64(len(value)))
		valOff = len(b.data)
		b.data = append(b.data, value...)
	}
	if b.ix != nil {
		b.ix.add(b.data, kind, keyOff, len(key), valOff, len(value), b.count)
	}
	b.count++
	b.memSize += memtable.EntrySize(len(key)+base.TrailerLen, len(value))
	if b.protBytes != 0 {
		// From the caller's buffers, not the batch's copy: a flip in the
		// copy is then a mismatch.
		b.prot = append(b.prot, checksum.KVUnsequenced(b.protType, key, uint8(kind), value)&protMask(b.protBytes))
	}
}

// own makes data the batch's alone before it is written to: a buffer that a
// flushable batch shares is copied (the copy, of the batch's length, grows
// on the next append as any buffer does).
func (b *Batch) own() {
	if b.shared {
		b.data = bytes.Clone(b.data)
		b.shared = false
	}
}

// lend marks data as shared with a flushable batch: from now on the batch
// copies before writing (own). Apply calls it once the batch's header is
// stamped and its record written to the WAL.
func (b *Batch) lend() { b.shared = true }

// grow makes room for n more bytes, doubling the buffer when it must grow.
// append would grow a large one by a quarter at a time: a 67 MB batch of 1M
// small entries then went through some twenty copies, and their garbage
// (about five times the batch) took the heap to 310 MB before the batch was
// even applied.
func (b *Batch) grow(n int) {
	if len(b.data)+n <= cap(b.data) {
		return
	}
	c := max(2*cap(b.data), len(b.data)+n, batchInitialSize)
	d := make([]byte, len(b.data), c)
	copy(d, b.data)
	b.data = d
}

// Put adds a write of key=value. The batch copies both.
func (b *Batch) Put(key, value []byte) { b.add(base.KindSet, key, value, true) }

// Delete adds a deletion of key.
func (b *Batch) Delete(key []byte) { b.add(base.KindDelete, key, nil, false) }

// Merge adds a merge operand for key: Options.Merger combines it with the
// key's value when the key is read (see Merger). The batch copies both.
// Applying the batch to a DB without a Merger fails with
// ErrInvalidArgument.
func (b *Batch) Merge(key, operand []byte) {
	b.add(base.KindMerge, key, operand, true)
	b.merges++
}

// DeleteRange adds a deletion of every key in [start, end). As in RocksDB,
// an empty range (start == end) deletes nothing and is not recorded, and an
// inverted one (start > end) makes Apply fail with ErrInvalidArgument
// before anything reaches the WAL: a tombstone that can never be written to
// a table must never become durable, or every later flush would fail.
// The order is the batch's comparer's: a batch for a DB with
// Options.Comparer must come from its NewBatch (Apply refuses range
// deletions of a batch of another comparer).
func (b *Batch) DeleteRange(start, end []byte) {
	switch c := b.comparer().Cmp(start, end); {
	case c == 0:
		return
	case c > 0:
		if b.err == nil {
			b.err = base.InvalidArgumentErrorf("DeleteRange: end key %s comes before start key %s", base.HexKey(end), base.HexKey(start))
		}
		return
	}
	b.add(base.KindRangeDelete, start, end, true)
	b.rangeDels++
}

// comparer returns the batch's comparer: its DB's, or the default.
func (b *Batch) comparer() *base.Comparer {
	if b.cmp == nil {
		return base.DefaultComparer
	}
	return b.cmp
}

// Count returns the number of writes in the batch.
func (b *Batch) Count() int { return int(b.count) }

// Empty reports whether the batch holds no writes.
func (b *Batch) Empty() bool { return b.count == 0 }

// Len returns the size of the encoded batch in bytes.
func (b *Batch) Len() int {
	if len(b.data) < batchHeaderLen {
		return batchHeaderLen
	}
	return len(b.data)
}

// Reset empties the batch, keeping its buffer for reuse (unless the DB
// still holds it: see Batch) and its protection setting.
func (b *Batch) Reset() {
	if b.shared {
		b.data, b.shared = nil, false
	}
	b.data = b.data[:0]
	b.err = nil
	b.count = 0
	b.merges = 0
	b.rangeDels = 0
	b.memSize = 0
	b.prot = b.prot[:0]
	if b.ix != nil {
		b.ix.reset()
	}
}

// setSeqNum stamps the first sequence number and count into the header.
func (b *Batch) setSeqNum(seq uint64) {
	b.init()
	binary.LittleEndian.PutUint64(b.data[0:8], seq)
	binary.LittleEndian.PutUint32(b.data[8:12], b.count)
}

// batchReader decodes an encoded batch (from a Batch or a WAL record),
// checking every length against the buffer: bad bytes give ErrCorruption.
type batchReader struct {
	data  []byte
	seq   uint64
	count uint32
	read  uint32
	off   int
}

// newBatchReader checks the header. where names the source for errors.
func newBatchReader(data []byte, where string) (batchReader, error) {
	if len(data) < batchHeaderLen {
		return batchReader{}, base.CorruptionErrorf("%s: batch of %d bytes is shorter than its %d-byte header", where, len(data), batchHeaderLen)
	}
	r := batchReader{
		data:  data,
		seq:   binary.LittleEndian.Uint64(data[0:8]),
		count: binary.LittleEndian.Uint32(data[8:12]),
		off:   batchHeaderLen,
	}
	// Each record takes at least 2 bytes (kind + key length), which bounds a
	// corrupt count before anyone sizes anything by it.
	if uint64(r.count) > uint64(len(data)-batchHeaderLen)/2 {
		return batchReader{}, base.CorruptionErrorf("%s: batch count %d is impossible in %d bytes", where, r.count, len(data))
	}
	if r.seq > base.SeqNumMax || r.seq+uint64(r.count) > base.SeqNumMax {
		return batchReader{}, base.CorruptionErrorf("%s: batch seqnum %d + count %d overflows", where, r.seq, r.count)
	}
	return r, nil
}

// next returns the next record; ok is false at the end. err reports a
// malformed record or a count that disagrees with the records present.
func (r *batchReader) next(where string) (kind base.Kind, key, value []byte, ok bool, err error) {
	if r.off == len(r.data) {
		if r.read != r.count {
			return 0, nil, nil, false, base.CorruptionErrorf("%s: batch header says %d records, found %d", where, r.count, r.read)
		}
		return 0, nil, nil, false, nil
	}
	if r.read == r.count {
		return 0, nil, nil, false, base.CorruptionErrorf("%s: batch has bytes after its %d records at offset %d", where, r.count, r.off)
	}
	start := r.off
	kind = base.Kind(r.data[r.off])
	r.off++
	if !kind.Valid() {
		return 0, nil, nil, false, base.CorruptionErrorf("%s: batch record %d at offset %d has unknown kind %d", where, r.read, start, kind)
	}
	key, err = r.varstring(where, "key")
	if err != nil {
		return 0, nil, nil, false, err
	}
	if kind != base.KindDelete {
		value, err = r.varstring(where, "value")
		if err != nil {
			return 0, nil, nil, false, err
		}
	}
	r.read++
	return kind, key, value, true, nil
}

func (r *batchReader) varstring(where, what string) ([]byte, error) {
	n, w := binary.Uvarint(r.data[r.off:])
	if w <= 0 {
		return nil, base.CorruptionErrorf("%s: batch record %d: bad %s length varint at offset %d", where, r.read, what, r.off)
	}
	r.off += w
	if n > uint64(len(r.data)-r.off) {
		return nil, base.CorruptionErrorf("%s: batch record %d: %s length %d at offset %d runs past the end (%d bytes)", where, r.read, what, n, r.off, len(r.data))
	}
	s := r.data[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return s, nil
}

// BatchKind is the kind of one write, as users see it: a record of a Batch
// (BatchReader), and an op of raftstore's commands (raftstore.OpKind is
// this type). Inside the engine a write is stored with the internal key
// kind (sst.Kind: LevelDB's on-disk numbers, 0 delete, 1 set, 2 merge,
// 15 range delete), which the batch maps it onto; the numbers here are fixed too,
// since raftstore's command format stores them.
type BatchKind uint8

// Batch record kinds.
const (
	// BatchPut sets Key to Value.
	BatchPut BatchKind = iota + 1
	// BatchDelete removes Key.
	BatchDelete
	// BatchDeleteRange removes every key in [Key, Value).
	BatchDeleteRange
	// BatchMerge merges the operand Value into Key (see Merger).
	BatchMerge
)

func (k BatchKind) String() string {
	switch k {
	case BatchPut:
		return "put"
	case BatchDelete:
		return "delete"
	case BatchDeleteRange:
		return "delete-range"
	case BatchMerge:
		return "merge"
	}
	return fmt.Sprintf("BatchKind(%d)", uint8(k))
}

// BatchReader iterates over the records of a Batch in the order they were
// added. Key and Value alias the batch's buffer: valid until the batch is
// modified or reset. It is not safe for concurrent use.
type BatchReader struct {
	r   batchReader
	err error
}

// Reader returns a reader over the batch's records, in order.
func (b *Batch) Reader() *BatchReader {
	r, err := b.recordReader()
	return &BatchReader{r: r, err: err}
}

// Next returns the next record; ok is false at the end (or on error).
// For BatchDeleteRange, value is the exclusive end of the range.
func (br *BatchReader) Next() (kind BatchKind, key, value []byte, ok bool) {
	if br.err != nil {
		return 0, nil, nil, false
	}
	k, key, value, ok, err := br.r.next("batch")
	if err != nil {
		br.err = err
		return 0, nil, nil, false
	}
	if !ok {
		return 0, nil, nil, false
	}
	switch k {
	case base.KindSet:
		return BatchPut, key, value, true
	case base.KindDelete:
		return BatchDelete, key, nil, true
	case base.KindMerge:
		return BatchMerge, key, value, true
	default:
		return BatchDeleteRange, key, value, true
	}
}

// Error returns the error that stopped the reader (a batch built by Batch's
// methods never has one).
func (br *BatchReader) Error() error { return br.err }

// BatchHandler receives a batch's records from Replay.
type BatchHandler interface {
	Put(key, value []byte) error
	Delete(key []byte) error
	DeleteRange(start, end []byte) error
}

// BatchMergeHandler is a BatchHandler that takes merge operands too.
type BatchMergeHandler interface {
	BatchHandler
	Merge(key, operand []byte) error
}

// Replay calls h for each record of the batch, in order, stopping at the
// first error h returns (go-ethereum's ethdb.Batch.Replay, RocksDB's
// WriteBatch::Iterate). The slices alias the batch's buffer. A merge goes
// to h's Merge if h is a BatchMergeHandler; otherwise it stops the replay
// with ErrInvalidArgument.
func (b *Batch) Replay(h BatchHandler) error {
	r := b.Reader()
	for {
		kind, key, value, ok := r.Next()
		if !ok {
			return r.Error()
		}
		var err error
		switch kind {
		case BatchPut:
			err = h.Put(key, value)
		case BatchDelete:
			err = h.Delete(key)
		case BatchDeleteRange:
			err = h.DeleteRange(key, value)
		case BatchMerge:
			mh, ok := h.(BatchMergeHandler)
			if !ok {
				return base.InvalidArgumentErrorf("Batch.Replay: the batch holds a merge for key %s and the handler (%T) has no Merge method", base.HexKey(key), h)
			}
			err = mh.Merge(key, value)
		}
		if err != nil {
			return err
		}
	}
}
