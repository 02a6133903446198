package sst

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/bgsys"
)

// writeBufferSize is how many bytes the writer gathers before handing them
// to the file: one system call per 256 KiB rather than per 4 KiB block.
const writeBufferSize = 256 << 10

// Meta is what the DB needs to know about a table it has just written (it
// records these in the MANIFEST). Keys are copies owned by the Meta.
type Meta struct {
	// Smallest and Largest bound the table over point keys AND range
	// tombstones: a tombstone [s,e)#seq contributes s#seq,RANGEDEL and the
	// exclusive sentinel e#SeqNumMax,RANGEDEL. Zero for an empty table.
	Smallest, Largest InternalKey
	// SmallestSeq and LargestSeq are over point entries and tombstones (0,
	// 0 for an empty table).
	SmallestSeq, LargestSeq uint64
	// Size is the file's length in bytes.
	Size uint64
	// NumEntries counts point entries (Set and Delete), NumDeletions the
	// Deletes among them, NumRangeDels the range tombstones.
	NumEntries, NumDeletions, NumRangeDels uint64
	// FileChecksum is the whole-file checksum stored in the properties (see
	// the package comment), 0 for checksum type None.
	FileChecksum uint64
	ChecksumType checksum.Type
	// Identity is WriterOptions.Identity, as stored in the properties.
	Identity Identity
}

// Writer builds one table, streaming it to a file: point entries with Add
// (strictly increasing internal keys), range tombstones with AddRangeDel, then
// Close.
//
// Invariant: nothing out of order, oversized or otherwise invalid ever
// reaches the file. Every error is sticky: once an Add fails, every later
// call returns the same error and Close closes the file without finishing
// it, so the caller removes it. An out-of-order key means a bug or memory
// corruption upstream (the memtable or a compaction input), so it is
// reported as ErrCorruption naming both keys.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	f   vfs.File
	o   WriterOptions
	fid fileID
	err error
	// cmp is o.Comparer resolved: every comparison of keys goes through
	// it. prefixFilter: the filter holds cmp.Split's prefixes.
	cmp          *base.Comparer
	prefixFilter bool

	closed  bool
	offset  uint64 // bytes emitted so far (written or buffered)
	wbuf    []byte
	hasher  *fileHasher // over [0, properties offset); nil for None and after
	base    uint32
	created int64

	data     blockWriter
	index    blockWriter
	rangeDel blockWriter

	keyBuf        []byte // the key being added, encoded
	lastKey       []byte // the last point key added, encoded
	lastPrefixLen int    // with a prefix filter, lastKey[:lastPrefixLen] is its prefix
	pendingIndex  bool   // a data block was flushed; its index entry waits for the next key
	pendingHandle handle
	sepBuf        []byte
	handleBuf     []byte
	cbuf          []byte        // compressed output
	filterBuf     []byte        // the filter block
	zstd          *zstd.Encoder // while the writer compresses with zstd; back to the pool at Close

	hashes *hashBuf // filter hashes of distinct user keys (outside the Go heap); nil without a filter

	firstPoint   InternalKey // copy of the first point key
	tombKey      []byte      // the last tombstone's encoded start key
	firstTomb    InternalKey // copy of the first tombstone's start key
	maxTombEnd   []byte      // the largest tombstone end so far
	lastTombEnd  []byte      // External: the last tombstone's end
	haveSeq      bool
	smallSeq     uint64
	largeSeq     uint64
	filterHandle handle
	rangeHandle  handle
	propsHandle  handle
	props        Properties
	rawDataSize  uint64 // uncompressed size of the data blocks written
}

// NewWriter returns a Writer that writes a table to f, which it owns from now
// on: Close or Abort closes it. Invalid options make every call fail with
// ErrInvalidArgument.
func NewWriter(f vfs.File, o WriterOptions) *Writer {
	w := &Writer{f: f, o: o, fid: fileID{num: o.FileNum}, cmp: base.DefaultComparer}
	if err := o.validate(); err != nil {
		w.err = err
		return w
	}
	w.cmp = o.Comparer.Resolve()
	w.o.Comparer = w.cmp
	w.prefixFilter = o.BloomBitsPerKey > 0 && w.cmp.Split != nil
	// The footer, the properties and the Meta record what the defaults
	// mean, never "default".
	w.o.ChecksumType = o.ChecksumType.Resolve()
	w.o.Compression = o.Compression.Resolve()
	if w.o.BlockSize == 0 {
		w.o.BlockSize = DefaultBlockSize
	}
	if w.o.BlockRestartInterval == 0 {
		w.o.BlockRestartInterval = DefaultBlockRestartInterval
	}
	w.base = o.BaseContext
	for w.base == 0 {
		w.base = rand.Uint32()
	}
	w.created = o.CreationTime
	if w.created == 0 {
		w.created = time.Now().Unix()
	}
	if w.o.ChecksumType != checksum.None {
		w.hasher = newFileHasher(w.o.ChecksumType)
	}
	w.takeScratch()
	if w.o.BloomBitsPerKey > 0 {
		w.hashes = new(hashBuf)
		// A writer dropped without Close or Abort (a misused
		// ExternalWriter) must not leak the hashes' mapping.
		runtime.AddCleanup(w, (*hashBuf).release, w.hashes)
	}
	w.data.init(w.o.BlockRestartInterval)
	w.index.init(1)
	w.rangeDel.init(w.o.BlockRestartInterval)
	// The reader materialises range tombstones and rejects a block whose
	// keys total more than maxRangeDelKeyAmp times its size.
	w.rangeDel.maxKeyAmp = maxRangeDelKeyAmp
	return w
}

func (w *Writer) check() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return invalidArgf("writer for %s is closed", w.fid)
	}
	return nil
}

// Add appends a point entry. Keys must be strictly increasing in internal
// key order (user key ascending under the comparer, then seqnum
// descending) and of kind Set or Delete. value is copied; the caller may
// reuse both buffers.
func (w *Writer) Add(key InternalKey, value []byte) error {
	if err := w.check(); err != nil {
		return err
	}
	kind := key.Kind()
	if !kind.IsPoint() {
		w.err = invalidArgf("cannot add key %s of kind %s to %s: only SET and DEL", key, kind, w.fid)
		return w.err
	}
	if len(key.UserKey)+len(value) > MaxEntrySize {
		w.err = invalidArgf("entry of %d key bytes and %d value bytes exceeds the limit of %d in %s",
			len(key.UserKey), len(value), MaxEntrySize, w.fid)
		return w.err
	}
	w.keyBuf = key.Append(w.keyBuf[:0])
	first := w.props.NumEntries == 0
	if !first && compareEncoded(w.cmp, w.lastKey, w.keyBuf) >= 0 {
		prev, _ := base.DecodeInternalKey(w.lastKey)
		w.err = base.CorruptionErrorf("sst: keys added out of order to %s: %s then %s", w.fid, prev, key)
		return w.err
	}
	if w.o.External {
		if err := w.checkExternalPoint(key, first); err != nil {
			return err
		}
	}
	if !w.data.empty() && (w.data.estimatedSize() >= w.o.BlockSize ||
		w.data.sizeWith(len(w.keyBuf), len(value)) > MaxBlockSize) {
		if err := w.flushData(); err != nil {
			return err
		}
	}
	if w.pendingIndex {
		if err := w.addIndexEntry(w.separator(w.lastKey, w.keyBuf)); err != nil {
			return err
		}
	}
	if w.o.BloomBitsPerKey > 0 {
		// Each distinct user key once, or each distinct prefix (see
		// addPrefix): keys of one user key, or of one prefix, are
		// contiguous.
		if w.prefixFilter {
			if err := w.addPrefix(key.UserKey, first); err != nil {
				return err
			}
		} else if first || !bytes.Equal(w.lastKey[:len(w.lastKey)-base.TrailerLen], key.UserKey) {
			w.hashes.add(filterHash(key.UserKey))
		}
	}
	w.data.add(w.keyBuf, value)
	w.lastKey = append(w.lastKey[:0], w.keyBuf...)
	if first {
		w.firstPoint = key.Clone()
	}
	w.props.NumEntries++
	if kind == base.KindDelete {
		w.props.NumDeletions++
	}
	w.props.RawKeySize += uint64(len(w.keyBuf))
	w.props.RawValueSize += uint64(len(value))
	w.noteSeq(key.SeqNum())
	return nil
}

// AddRangeDel appends the range tombstone [start, end)#seq, start < end
// under the comparer. Tombstones must come in internal-key order of their
// start keys (start ascending, then seq descending); they are independent
// of the point entries' order. start and end are copied.
func (w *Writer) AddRangeDel(start, end []byte, seq uint64) error {
	if err := w.check(); err != nil {
		return err
	}
	switch {
	case seq > base.SeqNumMax:
		w.err = invalidArgf("range tombstone seqnum %d exceeds the maximum in %s", seq, w.fid)
	case w.cmp.Cmp(start, end) >= 0:
		w.err = invalidArgf("empty or inverted range tombstone [%s, %s) in %s", base.HexKey(start), base.HexKey(end), w.fid)
	case len(start)+len(end) > MaxEntrySize:
		w.err = invalidArgf("range tombstone of %d+%d bytes exceeds the limit of %d in %s", len(start), len(end), MaxEntrySize, w.fid)
	}
	if w.err != nil {
		return w.err
	}
	k := base.MakeInternalKey(start, seq, base.KindRangeDelete)
	enc := k.Append(nil)
	if w.props.NumRangeDels > 0 && compareEncoded(w.cmp, w.tombKey, enc) >= 0 {
		prev, _ := base.DecodeInternalKey(w.tombKey)
		w.err = base.CorruptionErrorf("sst: range tombstones added out of order to %s: %s then %s", w.fid, prev, k)
		return w.err
	}
	if w.o.External {
		switch {
		case seq != 0:
			w.err = invalidArgf("range tombstone [%s, %s)#%d in external table %s: external entries have seqnum 0",
				base.HexKey(start), base.HexKey(end), seq, w.fid)
		case w.props.NumRangeDels > 0 && w.cmp.Cmp(start, w.lastTombEnd) < 0:
			w.err = invalidArgf("range tombstone [%s, %s) in external table %s overlaps the previous one, which ends at %s",
				base.HexKey(start), base.HexKey(end), w.fid, base.HexKey(w.lastTombEnd))
		}
		if w.err != nil {
			return w.err
		}
		w.lastTombEnd = append(w.lastTombEnd[:0], end...)
	}
	if w.rangeDel.sizeWith(len(enc), len(end)) > MaxBlockSize {
		w.err = invalidArgf("range tombstones of %s exceed the maximum block size %d", w.fid, MaxBlockSize)
		return w.err
	}
	w.rangeDel.add(enc, end)
	if w.props.NumRangeDels == 0 {
		w.firstTomb = k.Clone()
	}
	w.tombKey = enc
	if w.maxTombEnd == nil || w.cmp.Cmp(end, w.maxTombEnd) > 0 {
		w.maxTombEnd = bytes.Clone(end)
	}
	w.props.NumRangeDels++
	w.noteSeq(seq)
	return nil
}

// checkExternalPoint checks what an external table promises of a point
// key: seqnum 0 and a user key above the previous one (so the table holds
// one entry per user key, which a global seqnum cannot make ambiguous).
func (w *Writer) checkExternalPoint(key InternalKey, first bool) error {
	if key.SeqNum() != 0 {
		w.err = invalidArgf("key %s in external table %s: external entries have seqnum 0", key, w.fid)
		return w.err
	}
	if !first && w.cmp.Eq(w.lastKey[:len(w.lastKey)-base.TrailerLen], key.UserKey) {
		w.err = invalidArgf("key %s added twice to external table %s: an external table holds one entry per user key", key, w.fid)
		return w.err
	}
	return nil
}

// addPrefix gives a prefix filter userKey's prefix, unless it is the
// previous key's: keys of one prefix are contiguous (a comparer's
// promise), so that hashes every distinct prefix once. Repeats are found
// by bytes, not by the comparer's Equal: the filter hashes bytes, so each
// distinct byte string must be in it. lastKey still holds the previous
// key, whose prefix is lastKey[:lastPrefixLen].
func (w *Writer) addPrefix(userKey []byte, first bool) error {
	n, ok := splitKey(w.cmp, userKey)
	if !ok {
		w.err = invalidArgf("comparer %s splits key %s of %s at %d, outside the key", w.cmp.Name, base.HexKey(userKey), w.fid, n)
		return w.err
	}
	if first || !bytes.Equal(w.lastKey[:w.lastPrefixLen], userKey[:n]) {
		w.hashes.add(filterHash(userKey[:n]))
	}
	w.lastPrefixLen = n
	return nil
}

func (w *Writer) noteSeq(seq uint64) {
	if !w.haveSeq {
		w.smallSeq, w.largeSeq, w.haveSeq = seq, seq, true
		return
	}
	w.smallSeq = min(w.smallSeq, seq)
	w.largeSeq = max(w.largeSeq, seq)
}

// EstimatedSize returns roughly how large the file would be if closed now;
// the DB uses it to cut compaction outputs at the target file size.
func (w *Writer) EstimatedSize() uint64 {
	pending := uint64(w.data.estimatedSize())
	if w.rawDataSize > 0 {
		// Scale the unfinished block by the compression ratio seen so far.
		pending = pending * w.props.DataSize / w.rawDataSize
	}
	return w.offset + pending + uint64(w.index.estimatedSize()) +
		uint64(w.rangeDel.estimatedSize()) + uint64(w.hashes.len()*w.o.BloomBitsPerKey/8) + FooterLen
}

// separator returns an encoded internal key >= a and < b (a < b), as short
// as the comparer's Separator makes it (see "Index block" in the package
// comment): if the user keys differ, the Separator of the two, with
// trailer (SeqNumMax, KindMax), when it is strictly between them; else a
// itself. A separator strictly between the user keys is what Get relies
// on: a seek that runs off a block has passed every version of its key.
// For the default comparer this is the rule the format always had
// (base.BytewiseSeparator).
func (w *Writer) separator(a, b []byte) []byte {
	au, bu := a[:len(a)-base.TrailerLen], b[:len(b)-base.TrailerLen]
	if w.cmp.Cmp(au, bu) < 0 {
		w.sepBuf = w.cmp.Separator(w.sepBuf[:0], au, bu)
		// A separator equal to a (the comparer could not shorten) or,
		// from a faulty comparer, outside (a, b) is not used.
		if s := w.sepBuf; w.cmp.Cmp(au, s) < 0 && w.cmp.Cmp(s, bu) < 0 {
			w.sepBuf = binary.LittleEndian.AppendUint64(w.sepBuf, base.MakeTrailer(base.SeqNumMax, base.KindMax))
			return w.sepBuf
		}
	}
	w.sepBuf = append(w.sepBuf[:0], a...)
	return w.sepBuf
}

func (w *Writer) addIndexEntry(sep []byte) error {
	w.handleBuf = appendHandle(w.handleBuf[:0], w.pendingHandle)
	if w.index.sizeWith(len(sep), len(w.handleBuf)) > MaxBlockSize {
		w.err = invalidArgf("index of %s exceeds the maximum block size %d", w.fid, MaxBlockSize)
		return w.err
	}
	w.index.add(sep, w.handleBuf)
	w.pendingIndex = false
	return nil
}

func (w *Writer) flushData() error {
	raw := w.data.finish()
	w.rawDataSize += uint64(len(raw)) + BlockTrailerLen
	h, err := w.emit(w.compress(raw, true))
	if err != nil {
		return err
	}
	w.data.reset()
	w.pendingHandle, w.pendingIndex = h, true
	w.props.NumDataBlocks++
	w.props.DataSize += h.size + BlockTrailerLen
	return nil
}

// compress returns the bytes to store for block raw and their compression
// type: snappy output if compression is on, allowed for this block and
// saves at least 1/8, else raw itself. The result has BlockTrailerLen bytes
// of spare capacity (raw must too).
func (w *Writer) compress(raw []byte, allowed bool) ([]byte, Compression) {
	if !allowed || len(raw) == 0 {
		return raw, NoCompression
	}
	var c []byte
	switch w.o.Compression {
	case SnappyCompression:
		need := snappy.MaxEncodedLen(len(raw)) + BlockTrailerLen
		if cap(w.cbuf) < need {
			w.cbuf = make([]byte, need)
		}
		c = snappy.Encode(w.cbuf[:cap(w.cbuf)], raw)
	case ZstdCompression:
		if w.zstd == nil {
			w.zstd = zstdEncoder(w.o.ZstdLevel)
		}
		// Room for zstd's worst case and the trailer: EncodeAll appends
		// into it without allocating.
		w.cbuf = slices.Grow(w.cbuf[:0], len(raw)+len(raw)/128+64+BlockTrailerLen)
		c = slices.Grow(w.zstd.EncodeAll(raw, w.cbuf[:0]), BlockTrailerLen)
		w.cbuf = c[:0]
		if len(c)*maxZstdExpansion < len(raw) {
			return raw, NoCompression // see maxZstdExpansion
		}
	default:
		return raw, NoCompression
	}
	if len(c) >= len(raw)-len(raw)/8 {
		return raw, NoCompression
	}
	return c, w.o.Compression
}

// emit appends the trailer to b (which has the spare capacity) and writes
// block and trailer at the current offset.
func (w *Writer) emit(b []byte, c Compression) (handle, error) {
	if len(b) > MaxBlockSize {
		w.err = invalidArgf("block of %d bytes exceeds the maximum %d in %s", len(b), MaxBlockSize, w.fid)
		return handle{}, w.err
	}
	h := handle{offset: w.offset, size: uint64(len(b))}
	b = append(b, c.Code())
	sum := trailerChecksum(w.o.ChecksumType, b) + checksum.ContextModifier(w.base, h.offset)
	b = binary.LittleEndian.AppendUint32(b, sum)
	return h, w.write(b)
}

// write emits b: into the whole-file checksum while it runs, then into the
// write buffer or, if large, straight to the file. vfs.File.Write may
// scribble on its argument, so b must not be used afterwards.
func (w *Writer) write(b []byte) error {
	if w.hasher != nil {
		w.hasher.write(b)
	}
	w.offset += uint64(len(b))
	if len(w.wbuf)+len(b) > cap(w.wbuf) {
		if err := w.flushBuf(); err != nil {
			return err
		}
	}
	if len(b) >= cap(w.wbuf) {
		if _, err := w.f.Write(b); err != nil {
			w.err = fmt.Errorf("sst: writing %s: %w", w.fid, err)
			return w.err
		}
		return nil
	}
	w.wbuf = append(w.wbuf, b...)
	return nil
}

func (w *Writer) flushBuf() error {
	if len(w.wbuf) == 0 {
		return nil
	}
	_, err := w.f.Write(w.wbuf)
	w.wbuf = w.wbuf[:0]
	if err != nil {
		w.err = fmt.Errorf("sst: writing %s: %w", w.fid, err)
	}
	return w.err
}

// Close finishes the table (last data block, filter, range-del, properties,
// index, metaindex, footer), syncs and closes the file, and returns the
// table's metadata. On error the file is closed unfinished; the caller
// removes it.
func (w *Writer) Close() (*Meta, error) {
	if w.closed {
		return nil, invalidArgf("writer for %s is closed", w.fid)
	}
	if w.err == nil {
		w.finish()
	}
	w.closed = true
	w.releaseScratch()
	if w.err != nil {
		if w.f != nil {
			w.f.Close()
		}
		return nil, w.err
	}
	// A table is written by a flush, a compaction or an ingest's writer:
	// its fsync, which may have the whole file to write out, is a
	// background call (see package bgsys).
	if err := bgsys.Sync(w.f); err != nil {
		w.err = fmt.Errorf("sst: syncing %s: %w", w.fid, err)
		w.f.Close()
		return nil, w.err
	}
	if err := w.f.Close(); err != nil {
		w.err = fmt.Errorf("sst: closing %s: %w", w.fid, err)
		return nil, w.err
	}
	m := &Meta{
		Smallest:     w.props.SmallestKey.Clone(),
		Largest:      w.props.LargestKey.Clone(),
		SmallestSeq:  w.props.SmallestSeq,
		LargestSeq:   w.props.LargestSeq,
		Size:         w.offset,
		NumEntries:   w.props.NumEntries,
		NumDeletions: w.props.NumDeletions,
		NumRangeDels: w.props.NumRangeDels,
		FileChecksum: w.props.FileChecksum,
		ChecksumType: w.o.ChecksumType,
		Identity:     w.o.Identity,
	}
	return m, nil
}

// Abort closes the file without finishing the table; the caller removes it.
// Later calls fail. Safe to call after Close.
func (w *Writer) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	w.releaseScratch()
	if w.err == nil {
		w.err = invalidArgf("writer for %s was aborted", w.fid)
	}
	if w.f != nil {
		w.f.Close()
	}
}

// scratchPool holds the buffers writers gather and end their tables in,
// handed from one writer to the next: the write buffer, the index block
// and its restarts, the compression buffer (data blocks use it too) and
// the filter. Why: with the filter hashes (see hashBuf) they were most of
// what a flush or compaction allocated (the last four alone 27 MB over a
// 2M-key random fill once write buffers were pooled), a collection every
// half second of a heap this small, and each collection's mark phase takes
// a processor from the foreground writes for a few milliseconds (runtime
// trace of a fill: the writer preempted and runnable 4.9 ms). Writers take
// them in NewWriter and give them back in releaseScratch; a pool drops
// what it holds over two collections, so nothing stays pinned.
var scratchPool sync.Pool

// maxScratchBuf is the largest buffer scratchPool keeps: a write buffer,
// or what a compaction output (4 MiB tables) grows, not a large flush's
// index or filter. Pooled buffers are live heap, and the collector lets
// the heap grow to twice what is live: with a cap of 4 MiB the peak RSS of
// a 10M-key fill then reads rose from 150.7 to 157.5 MiB (3 alternating
// pairs), with this one 150.3 -> 151.9 MiB, within the runs' spread.
// Collections in a 3M-key fill: 12-13 with only write buffers pooled, 3-5
// with the 4 MiB cap, 7-8 with this one.
const maxScratchBuf = writeBufferSize

// scratch is what scratchPool holds: a writer's buffers, emptied.
type scratch struct {
	wbuf     []byte
	index    []byte
	restarts []uint32
	cbuf     []byte
	filter   []byte
}

// takeScratch gives w scratchPool's buffers, if it has some, and a write
// buffer of writeBufferSize bytes.
func (w *Writer) takeScratch() {
	if s, ok := scratchPool.Get().(*scratch); ok {
		w.wbuf, w.index.buf, w.index.restarts, w.cbuf, w.filterBuf = s.wbuf, s.index, s.restarts, s.cbuf, s.filter
	}
	if cap(w.wbuf) < writeBufferSize {
		w.wbuf = make([]byte, 0, writeBufferSize)
	}
}

// releaseScratch frees the filter hashes and hands the writer's buffers
// back to scratchPool once the writer is closed or aborted: nothing of the
// table is written after that.
func (w *Writer) releaseScratch() {
	w.hashes.release()
	keep := func(b []byte) []byte {
		if cap(b) > maxScratchBuf {
			return nil
		}
		return b[:0]
	}
	s := &scratch{wbuf: keep(w.wbuf), index: keep(w.index.buf), restarts: w.index.restarts[:0], cbuf: keep(w.cbuf), filter: keep(w.filterBuf)}
	if 4*cap(s.restarts) > maxScratchBuf {
		s.restarts = nil
	}
	if s.wbuf != nil || s.index != nil || s.cbuf != nil || s.filter != nil || s.restarts != nil {
		scratchPool.Put(s)
	}
	w.wbuf, w.index.buf, w.index.restarts, w.cbuf, w.filterBuf = nil, nil, nil, nil, nil
	if w.zstd != nil {
		putZstdEncoder(w.o.ZstdLevel, w.zstd)
		w.zstd = nil
	}
}

// finish writes everything after the last entry; errors land in w.err.
func (w *Writer) finish() {
	if !w.data.empty() {
		if w.flushData() != nil {
			return
		}
	}
	if w.pendingIndex {
		// The last block's separator is its last key.
		if w.addIndexEntry(w.lastKey) != nil {
			return
		}
	}
	var err error
	if w.o.BloomBitsPerKey > 0 {
		w.filterBuf = buildFilter(w.filterBuf, w.hashes.hashes(), w.o.BloomBitsPerKey)
		if w.filterHandle, err = w.emit(w.filterBuf, NoCompression); err != nil {
			return
		}
		w.props.FilterSize = w.filterHandle.size + BlockTrailerLen
	}
	if w.rangeHandle, err = w.emit(w.compress(w.rangeDel.finish(), true)); err != nil {
		return
	}
	w.props.RangeDelSize = w.rangeHandle.size + BlockTrailerLen
	if w.hasher != nil {
		w.props.FileChecksum = w.hasher.sum64()
		w.hasher = nil
	}

	// The index block's size goes into the properties, written before it.
	indexBytes, indexComp := w.compress(w.index.finish(), true)
	w.props.IndexSize = uint64(len(indexBytes)) + BlockTrailerLen

	p := &w.props
	p.ChecksumType = w.o.ChecksumType
	p.Compression = w.o.Compression
	p.BloomBitsPerKey = uint64(w.o.BloomBitsPerKey)
	p.BlockSize = uint64(w.o.BlockSize)
	p.BlockRestartInterval = uint64(w.o.BlockRestartInterval)
	p.CreationTime = w.created
	p.FormatVersion = FormatVersion
	p.External = w.o.External
	p.Identity = w.o.Identity
	p.ComparerName = w.cmp.Name
	p.PrefixFilter = w.prefixFilter
	p.SmallestSeq, p.LargestSeq = w.smallSeq, w.largeSeq
	w.computeBounds()
	if w.propsHandle, err = w.emit(encodeProperties(p), NoCompression); err != nil {
		return
	}
	indexHandle, err := w.emit(indexBytes, indexComp)
	if err != nil {
		return
	}
	var mi blockWriter
	mi.init(1)
	if w.o.BloomBitsPerKey > 0 {
		mi.add([]byte(metaFilter), appendHandle(nil, w.filterHandle))
	}
	mi.add([]byte(metaProperties), appendHandle(nil, w.propsHandle))
	mi.add([]byte(metaRangeDel), appendHandle(nil, w.rangeHandle))
	metaHandle, err := w.emit(mi.finish(), NoCompression)
	if err != nil {
		return
	}
	ft := footer{
		checksumType: w.o.ChecksumType,
		version:      FormatVersion,
		base:         w.base,
		metaindex:    metaHandle,
		index:        indexHandle,
	}
	if w.write(ft.encode(w.offset)) != nil {
		return
	}
	w.flushBuf()
}

// computeBounds sets the properties' smallest and largest keys from the
// point keys and the tombstones.
func (w *Writer) computeBounds() {
	p := &w.props
	var have bool
	consider := func(k InternalKey) {
		if !have {
			p.SmallestKey, p.LargestKey, have = k, k, true
			return
		}
		if w.cmp.CompareInternal(k, p.SmallestKey) < 0 {
			p.SmallestKey = k
		}
		if w.cmp.CompareInternal(k, p.LargestKey) > 0 {
			p.LargestKey = k
		}
	}
	if p.NumEntries > 0 {
		consider(w.firstPoint)
		last, _ := base.DecodeInternalKey(w.lastKey)
		consider(last.Clone())
	}
	if p.NumRangeDels > 0 {
		consider(w.firstTomb)
		consider(base.MakeInternalKey(w.maxTombEnd, base.SeqNumMax, base.KindRangeDelete))
	}
}

// Metaindex names.
const (
	metaFilter     = "vigil.filter"
	metaProperties = "vigil.properties"
	metaRangeDel   = "vigil.rangedel"
)
