package sst

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/golang/snappy"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/cache"
)

// maxSnappyExpansion bounds what a snappy block can decode to per input
// byte: the best an encoding does is 64 output bytes from a 3-byte copy
// element. A declared decoded length beyond len×22 cannot be genuine, so the
// reader rejects it before allocating.
const maxSnappyExpansion = 22

// indexBlock is the table's index block, kept as it was read and searched
// in place: nothing is copied or built over it at Open. The index is
// written with restart interval 1, so every entry is a restart point and
// stores its separator whole (shared == 0); Open checks that
// (decodeIndex), and that every entry's header is sound and the handles
// tile the file, so the accessors need no error paths.
//
// A probe of the binary search reads entry i's offset from the restart
// array and its header (three varints, one byte each for any separator
// under 128 bytes) right before the separator, in the cache line it
// reads anyway. Why not a table of offsets built at Open, as the index
// had until now (16 bytes an entry): a DB's open tables keep their
// indexes as long as they stay open, some 225k entries for a 10M-key DB
// of 4 KiB blocks, so the table cost 3.6 MB of RSS, and searching
// through it cost a cache miss more per probe, not less: its entries and
// the separator they point at are in different lines.
type indexBlock struct {
	data     []byte // the entries: the block up to its restart array
	restarts []byte // one uint32 LE offset per entry
	// compare orders the separators' user keys under a comparer that is
	// not bytewise; nil: bytewise, inline in search's loop.
	compare func(a, b []byte) int
	// samples narrow a bytewise search (see indexSamples; built after
	// the separators' order is checked).
	samples indexSamples
}

// len returns the number of entries, i.e. of data blocks.
func (x *indexBlock) len() int { return len(x.restarts) / 4 }

// entry returns where entry i's separator's user key starts (p) and ends
// (ue) in data, and where its value ends (ve): the separator's trailer is
// data[ue:ue+8] and its value, the data block's handle, data[ue+8:ve].
func (x *indexBlock) entry(i int) (p, ue, ve int) {
	d := x.data
	p = int(binary.LittleEndian.Uint32(x.restarts[4*i:])) + 1 // shared is 0
	var unshared, vlen int
	if b := d[p : p+2]; b[0]|b[1] < 0x80 {
		unshared, vlen = int(b[0]), int(b[1])
		p += 2
	} else {
		u, n := binary.Uvarint(d[p:])
		p += n
		v, m := binary.Uvarint(d[p:])
		p += m
		unshared, vlen = int(u), int(v)
	}
	ue = p + unshared - base.TrailerLen
	return p, ue, p + unshared + vlen
}

// sepUser returns the user key of data block i's separator.
func (x *indexBlock) sepUser(i int) []byte {
	s, e, _ := x.entry(i)
	return x.data[s:e:e]
}

// sep returns data block i's separator, an encoded internal key.
func (x *indexBlock) sep(i int) []byte {
	s, e, _ := x.entry(i)
	e += base.TrailerLen
	return x.data[s:e:e]
}

// handle returns data block i's handle.
func (x *indexBlock) handle(i int) handle {
	_, ue, ve := x.entry(i)
	v := x.data[ue+base.TrailerLen : ve]
	off, n := binary.Uvarint(v)
	size, _ := binary.Uvarint(v[n:])
	return handle{offset: off, size: size}
}

// search returns the first data block whose separator is >= (ukey,
// trailer), or the number of data blocks.
func (x *indexBlock) search(ukey []byte, trailer uint64) int {
	if x.compare != nil {
		return x.searchFunc(ukey, trailer)
	}
	n := x.len()
	if x.samples.abbrs == nil {
		return x.searchIn(0, n, ukey, trailer)
	}
	lo, hi := x.samples.narrow(ukey, n)
	if lo > n || hi > n || lo > hi {
		return x.searchIn(0, n, ukey, trailer)
	}
	// The samples are a hint, and the answer i is checked: it is the
	// first separator >= the key if separator i-1 is < the key and
	// separator i is not (they increase). The search within the range
	// compared them unless i is at an end of it.
	i := x.searchIn(lo, hi, ukey, trailer)
	if i == lo && lo > 0 && !x.less(lo-1, ukey, trailer) || i == hi && hi < n && x.less(hi, ukey, trailer) {
		return x.searchIn(0, n, ukey, trailer)
	}
	return i
}

// less reports whether separator i < (ukey, trailer) (bytewise).
func (x *indexBlock) less(i int, ukey []byte, trailer uint64) bool {
	s, e, _ := x.entry(i)
	c := bytes.Compare(x.data[s:e], ukey)
	return c < 0 || c == 0 && binary.LittleEndian.Uint64(x.data[e:e+base.TrailerLen]) > trailer
}

// searchIn is search within entries [lo, hi), bytewise: the first entry
// there whose separator is >= (ukey, trailer), or hi.
func (x *indexBlock) searchIn(lo, hi int, ukey []byte, trailer uint64) int {
	data := x.data
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		s, e, _ := x.entry(m)
		// x.less(m, ukey, trailer), inlined (the compiler does not).
		if c := bytes.Compare(data[s:e], ukey); c < 0 || c == 0 && binary.LittleEndian.Uint64(data[e:e+base.TrailerLen]) > trailer {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// searchFunc is search under a comparer that is not bytewise.
func (x *indexBlock) searchFunc(ukey []byte, trailer uint64) int {
	data := x.data
	lo, hi := 0, x.len()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		s, e, _ := x.entry(m)
		if c := x.compare(data[s:e:e], ukey); c < 0 || c == 0 && binary.LittleEndian.Uint64(data[e:e+base.TrailerLen]) > trailer {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// BlockInfo describes one block of a table (or its footer), for tools.
type BlockInfo struct {
	Kind   BlockKind
	Offset uint64 // first byte of the block
	Size   uint64 // bytes on disk, excluding the trailer (the footer's FooterLen)
	// IndexKey is a data block's separator in the index (>= its last key,
	// < the next block's first key); zero for other kinds.
	IndexKey InternalKey
}

// TrailerLen returns the bytes that follow the block: BlockTrailerLen, or 0
// for the footer.
func (b BlockInfo) TrailerLen() uint64 {
	if b.Kind == BlockKindFooter {
		return 0
	}
	return BlockTrailerLen
}

// Reader reads one table. Open reads and verifies everything except the data
// blocks, which are read (and cached) on demand.
//
// Concurrency: a Reader is immutable after Open and safe for concurrent use
// by any number of goroutines (Get, MayContain, NewIter, Verify, ...); each
// iterator it returns is used by one goroutine at a time. Close must be
// called once, after every iterator is closed and no call is running: it
// frees the memory outside the Go heap that holds the table's index and
// filter (see metaAlloc), which a Reader dropped without Close leaks.
type Reader struct {
	fileReader
	opts  ReaderOptions
	cache *cache.Cache
	tableMeta
	// globalSeq is opts.GlobalSeqNum: 0, or the seqnum every entry of this
	// external table reads back with (checked at Open).
	globalSeq uint64
	// tombs is what RangeDels returns: tableMeta.rangeDels, or a copy with
	// the global seqnum (tableMeta keeps what the file holds, for Verify).
	tombs []RangeTombstone
	// layout is built on the first call of Layout, not by Open: it is 56
	// bytes per data block, and only tools want it.
	layoutOnce sync.Once
	layout     []BlockInfo
}

// fileReader reads and verifies blocks of one file. It is a small value so
// that readMeta can work on a copy whose checksum type and base come from
// the footer it has just decoded, without writing to a shared Reader.
type fileReader struct {
	f    vfs.File
	fid  fileID
	size uint64
	t    checksum.Type
	base uint32
	// cmp is ReaderOptions.Comparer, resolved: the order the index,
	// range-del and data blocks are checked and searched in.
	cmp *base.Comparer
}

// Open reads a table of the given size from f. Open takes ownership of f:
// the Reader's Close closes it, and if Open fails it closes f itself. It reads and verifies the footer, metaindex,
// index, filter, range-del and properties blocks and checks that they are
// consistent with each other. The checksum type is the footer's, so tables of
// different types are read side by side. Every problem with the bytes is an
// error wrapping ErrCorruption that names the file.
//
// Open allocates at most a small multiple of the bytes it reads and
// decompresses (see "Reading" in the package comment), whatever the file
// holds; in particular it copies no index separator.
func Open(f vfs.File, name string, size int64, o ReaderOptions) (*Reader, error) {
	r, _, err := open(f, name, size, o)
	return r, err
}

// OpenFile opens the table at name on fs: Open with the file's size.
// Errors name the file; on error nothing stays open.
func OpenFile(fs vfs.FS, name string, o ReaderOptions) (*Reader, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, fmt.Errorf("sst: opening %s: %w", name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("sst: stat of %s: %w", name, err)
	}
	return Open(f, name, st.Size(), o)
}

// open is Open; it also returns the bytes Open read from the file plus the
// sizes of the blocks it decompressed, which bound what it allocates (the
// tests check that).
func open(f vfs.File, name string, size int64, o ReaderOptions) (*Reader, uint64, error) {
	fr := fileReader{f: f, fid: fileID{name: name, num: o.FileNum}, cmp: o.Comparer.Resolve()}
	o.Comparer = fr.cmp
	if size < 0 {
		f.Close()
		return nil, 0, invalidArgf("negative size %d for %s", size, fr.fid)
	}
	if msg := fr.cmp.Check(); msg != "" {
		f.Close()
		return nil, 0, invalidArgf("opening %s: %s", fr.fid, msg)
	}
	fr.size = uint64(size)
	if o.Expect != nil && fr.size != o.Expect.Size {
		// Before anything is read: a file of another size is not the
		// table, whatever its footer says.
		f.Close()
		return nil, 0, base.CorruptionErrorf("sst: %s is %d bytes, the MANIFEST says %d", fr.fid, fr.size, o.Expect.Size)
	}
	m, fr, err := fr.readMeta()
	if err != nil {
		f.Close()
		return nil, m.decoded, err
	}
	if err := fr.checkExpected(o.Expect, &m.props); err != nil {
		m.mem.free()
		f.Close()
		return nil, m.decoded, err
	}
	m.index.buildSamples(m.mem.alloc)
	r := &Reader{fileReader: fr, opts: o, cache: o.Cache.internal(), tableMeta: m, tombs: m.rangeDels}
	if gs := o.GlobalSeqNum; gs != 0 {
		switch {
		case !m.props.External:
			m.mem.free()
			f.Close()
			return nil, m.decoded, base.CorruptionErrorf("sst: %s is given the global seqnum %d, but its properties do not mark it external", fr.fid, gs)
		case gs > base.SeqNumMax:
			m.mem.free()
			f.Close()
			return nil, m.decoded, invalidArgf("global seqnum %d for %s exceeds the maximum", gs, fr.fid)
		}
		r.globalSeq = gs
		if len(m.rangeDels) > 0 {
			r.tombs = make([]RangeTombstone, len(m.rangeDels))
			for i, t := range m.rangeDels {
				t.Seq = gs
				r.tombs[i] = t
			}
		}
	}
	return r, m.decoded, nil
}

// decodeIndex checks index block b (at file offset off) and returns it as
// an indexBlock, searching under r.cmp, and the end of the data blocks.
// Every entry must be a restart point with shared == 0 (restart interval
// 1, as the format specifies and the Writer writes): so a separator is
// stored whole and aliases the block, and no entry can make the reader
// build a key out of bytes it has already counted once. The handles must
// tile the file from offset 0. The separators' order is checked apart
// (checkIndexOrder), once the table's comparer is known to be r.cmp. It
// allocates nothing.
func (r *fileReader) decodeIndex(b []byte, off uint64) (indexBlock, uint64, error) {
	var it blockIter
	if err := it.init(b, true); err != nil {
		return indexBlock{}, 0, r.blockErr(BlockKindIndex, off, err)
	}
	x := indexBlock{data: it.data, restarts: it.restarts}
	n := it.numRestarts
	fail := func(format string, args ...any) (indexBlock, uint64, error) {
		return indexBlock{}, 0, blockCorruptf(r.fid, BlockKindIndex, off, format, args...)
	}
	if !r.cmp.IsBytewise() {
		x.compare = r.cmp.Compare
	}
	var dataEnd uint64
	i, eo := 0, 0 // entry i starts at block offset eo
	for ; eo < len(x.data); i++ {
		shared, unshared, vlen, p, ok := it.readHeader(eo)
		if !ok {
			return fail("%v (entry at block offset %d)", it.err, it.errOffset)
		}
		if shared != 0 {
			return fail("index entry %d at block offset %d shares %d key bytes with the previous one (the index has restart interval 1)", i, eo, shared)
		}
		if x.data[eo] != 0 {
			// A longer encoding of 0: indexBlock.entry reads one byte.
			return fail("index entry %d at block offset %d encodes its shared length 0 in more than one byte", i, eo)
		}
		if i >= n || int(binary.LittleEndian.Uint32(x.restarts[4*i:])) != eo {
			return fail("index entry %d at block offset %d is not a restart point (the index has restart interval 1)", i, eo)
		}
		if unshared < base.TrailerLen {
			return fail("%v (entry at block offset %d)", errBlockShortKey, eo)
		}
		val := x.data[p+unshared : p+unshared+vlen]
		h, hok := decodeHandle(val)
		if !hok || h.offset != dataEnd || h.size > MaxBlockSize || h.offset > r.size || h.end() > off {
			return fail("bad handle for data block %d (offset %d, size %d; expected offset %d)", i, h.offset, h.size, dataEnd)
		}
		dataEnd, eo = h.end(), p+unshared+vlen
	}
	if i != n {
		return fail("%d restart points for %d index entries (the index has restart interval 1)", n, i)
	}
	return x, dataEnd, nil
}

// checkIndexOrder checks that the separators of index x (decoded by
// decodeIndex from the block at off) increase under r.cmp.
func (r *fileReader) checkIndexOrder(x *indexBlock, off uint64) error {
	for i := 1; i < x.len(); i++ {
		if compareEncoded(r.cmp, x.sep(i-1), x.sep(i)) >= 0 {
			return blockCorruptf(r.fid, BlockKindIndex, off, "index separators out of order at data block %d", i)
		}
	}
	return nil
}

// checkComparer refuses a table written under another comparer than
// r.cmp (by name), or with a prefix filter that r.cmp cannot split keys
// for: an error wrapping ErrInvalidArgument, as the caller chose the
// comparer.
func (r *fileReader) checkComparer(p *Properties) error {
	if p.ComparerName != r.cmp.Name {
		return invalidArgf("%s was written with comparer %q, not %q: it must be read with the comparer that wrote it",
			r.fid, truncate([]byte(p.ComparerName)), r.cmp.Name)
	}
	if p.PrefixFilter && r.cmp.Split == nil {
		return invalidArgf("%s has a prefix bloom filter, but comparer %q has no Split to find a key's prefix", r.fid, r.cmp.Name)
	}
	return nil
}

// maxRangeDelKeyAmp bounds the tombstones decoded from a range-del block:
// their encoded start keys (start ‖ trailer) may total at most this many
// times the block's size, else the block is corrupt. Prefix compression
// makes the keys longer than the bytes storing them, by at most the number
// of entries in a restart interval (each key is at most the size of its
// interval), so a block written with restart interval <= 16 — the default,
// and all the golden files — is always within the bound, and the Writer
// keeps every range-del block within it whatever the interval (it restarts
// early; see blockWriter.maxKeyAmp). Without the bound, n entries that each
// add a byte to the previous key, a few bytes apiece, would make the reader
// allocate n²/2 bytes.
const maxRangeDelKeyAmp = 16

// decodeRangeDels parses the range-del block into tombstones, checking
// their order (and start < end) under cmp, a resolved comparer. The ends
// alias the block; the starts are copied into one arena. A first pass checks
// every entry and sums the key lengths, allocating nothing but two key
// buffers (each at most the longest key, so at most the block's size); the
// second fills two exactly sized slices: the starts, at most
// maxRangeDelKeyAmp times the block's size, and one 56-byte RangeTombstone
// per entry, each of which takes at least 5 bytes of the block (3 varints,
// a key byte of its own, as keys increase, and a non-empty end).
func decodeRangeDels(b []byte, cmp *base.Comparer) ([]RangeTombstone, error) {
	var it blockIter
	if err := it.init(b, true); err != nil {
		return nil, err
	}
	n, keyBytes := 0, 0
	limit := maxRangeDelKeyAmp * len(b)
	var prev []byte
	for ok := it.first(); ok; ok = it.next() {
		if keyBytes += len(it.key); keyBytes > limit {
			return nil, blockError(fmt.Sprintf("range tombstones' start keys exceed %d times the block's size (%d bytes) at entry %d (block offset %d)",
				maxRangeDelKeyAmp, len(b), n, it.offset))
		}
		k, _ := base.DecodeInternalKey(it.key)
		if k.Kind() != base.KindRangeDelete {
			return nil, blockError(fmt.Sprintf("range-del entry %s is not a RANGEDEL", k))
		}
		if cmp.Cmp(k.UserKey, it.val) >= 0 {
			return nil, blockError(fmt.Sprintf("range tombstone %s has end %s <= start", k, base.HexKey(it.val)))
		}
		if n > 0 && compareEncoded(cmp, prev, it.key) >= 0 {
			return nil, blockError(fmt.Sprintf("range tombstones out of order at %s", k))
		}
		prev = append(prev[:0], it.key...)
		n++
	}
	if it.err != nil {
		return nil, it.err
	}
	if n == 0 {
		return nil, nil
	}
	out := make([]RangeTombstone, 0, n)
	arena := make([]byte, 0, keyBytes-n*base.TrailerLen)
	for ok := it.first(); ok; ok = it.next() {
		k, _ := base.DecodeInternalKey(it.key)
		s := len(arena)
		arena = append(arena, k.UserKey...)
		out = append(out, RangeTombstone{Start: arena[s:len(arena):len(arena)], End: it.val, Seq: k.SeqNum()})
	}
	if it.err != nil || len(out) != n {
		// The block is immutable: the second pass sees what the first did.
		return nil, blockError("range-del block decoded differently twice")
	}
	return out, nil
}

func (r *fileReader) blockErr(kind BlockKind, off uint64, err error) error {
	return blockCorruptf(r.fid, kind, off, "%v", err)
}

// readAt fills p from off. A short read means the file is shorter than the
// size the caller gave, i.e. truncated: corruption.
func (r *fileReader) readAt(p []byte, off uint64, kind BlockKind) error {
	n, err := r.f.ReadAt(p, int64(off))
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return blockCorruptf(r.fid, kind, off, "file truncated: read %d of %d bytes", n, len(p))
	}
	return fmt.Errorf("sst: reading %s block at offset %d of %s: %w", kind, off, r.fid, err)
}

// readBlock reads block h of the given kind from the file (never the cache),
// verifies its trailer and returns its decompressed contents. The raw read
// goes into *raw and the decompressed block into *dec when they are given
// (they are grown as needed), else into fresh buffers.
func (r *fileReader) readBlock(h handle, kind BlockKind, raw, dec *[]byte) ([]byte, error) {
	b, c, err := r.readRawVerify(h, kind, raw, true)
	if err != nil {
		return nil, err
	}
	return r.decompress(b, c, h, kind, dec)
}

// readDataBlock is readBlock for data block h, read through ra (see
// readRawAhead; nil: alone), its checksum checked only if verify.
func (r *Reader) readDataBlock(h handle, ra *readahead, raw, dec *[]byte, verify bool) ([]byte, error) {
	b, c, err := r.readRawAhead(h, ra, raw, verify)
	if err != nil {
		return nil, err
	}
	return r.decompress(b, c, h, BlockKindData, dec)
}

// readRawVerify reads block h of the given kind and its trailer from the
// file into *raw (grown as needed; nil means a fresh buffer), verifies the
// checksum if verify (false: ReadOptions.SkipChecksums) and returns the
// block as stored and its compression. The bounds and the compression byte
// are checked either way: an unverified block may be wrong, never out of
// range.
func (r *fileReader) readRawVerify(h handle, kind BlockKind, raw *[]byte, verify bool) ([]byte, Compression, error) {
	if err := r.checkBounds(h, kind); err != nil {
		return nil, 0, err
	}
	n := int(h.size)
	var buf []byte
	if raw != nil {
		if cap(*raw) < n+BlockTrailerLen {
			*raw = make([]byte, n+BlockTrailerLen)
		}
		buf = (*raw)[:n+BlockTrailerLen]
	} else {
		buf = make([]byte, n+BlockTrailerLen)
	}
	return r.readRawInto(buf, h, kind, verify)
}

// readRawInto reads block h and its trailer into buf (exactly their size)
// and checks them (see checkRaw).
func (r *fileReader) readRawInto(buf []byte, h handle, kind BlockKind, verify bool) ([]byte, Compression, error) {
	if err := r.readAt(buf, h.offset, kind); err != nil {
		return nil, 0, err
	}
	return r.checkRaw(buf, h, kind, verify)
}

// checkBounds refuses a handle that reaches past the end of the file or
// names a block larger than any the format allows.
func (r *fileReader) checkBounds(h handle, kind BlockKind) error {
	if h.size > MaxBlockSize || h.offset > r.size || h.end() > r.size {
		return blockCorruptf(r.fid, kind, h.offset, "block of size %d extends past the end of the file (%d bytes)", h.size, r.size)
	}
	return nil
}

// readRawAhead is readRawVerify for data block h, the block an iterator's
// readahead ra has just noted (ra.note): while ra reads ahead (ra.dir() !=
// 0) the block is taken from the bytes read ahead, which are read first
// if they do not hold it; otherwise (or with a nil ra) it is read alone.
func (r *Reader) readRawAhead(h handle, ra *readahead, raw *[]byte, verify bool) ([]byte, Compression, error) {
	if ra == nil || ra.dir() == 0 {
		return r.readRawVerify(h, BlockKindData, raw, verify)
	}
	if err := r.checkBounds(h, BlockKindData); err != nil {
		return nil, 0, err
	}
	if !ra.covers(h) {
		if err := r.fillReadahead(ra, &r.index, h); err != nil {
			return nil, 0, err
		}
	}
	return r.checkRaw(ra.buf[h.offset-ra.off:h.end()-ra.off], h, BlockKindData, verify)
}

// checkRaw checks buf, block h's bytes and trailer as read from the file:
// its checksum if verify, and its compression byte. It returns the block
// as stored and its compression.
func (r *fileReader) checkRaw(buf []byte, h handle, kind BlockKind, verify bool) ([]byte, Compression, error) {
	n := int(h.size)
	stored := binary.LittleEndian.Uint32(buf[n+1:]) - checksum.ContextModifier(r.base, h.offset)
	if computed := trailerChecksum(r.t, buf[:n+1]); verify && stored != computed {
		return nil, 0, base.CorruptionErrorf("sst: block checksum mismatch: stored(context removed) = %s, computed = %s, type = %s in %s offset %d size %d, block kind = %s",
			fmtChecksum(r.t, stored), fmtChecksum(r.t, computed), r.t, r.fid, h.offset, h.size, kind)
	}
	c := CompressionFromCode(buf[n])
	if !c.Valid() {
		return nil, 0, blockCorruptf(r.fid, kind, h.offset, "unknown compression type %d", buf[n])
	}
	return buf[:n:n], c, nil
}

// decompress returns the contents of a verified block b stored with
// compression c, decoding into *dec when given (an uncompressed block is b
// itself).
func (r *fileReader) decompress(b []byte, c Compression, h handle, kind BlockKind, dec *[]byte) ([]byte, error) {
	if c == NoCompression {
		return b, nil
	}
	dlen, err := r.decodedLen(b, c, h, kind)
	if err != nil {
		return nil, err
	}
	var dst []byte
	if dec != nil {
		if cap(*dec) < dlen {
			*dec = make([]byte, dlen)
		}
		dst = (*dec)[:dlen]
	} else {
		dst = make([]byte, dlen)
	}
	if err := r.decodeInto(dst, b, c, h, kind); err != nil {
		return nil, err
	}
	return dst, nil
}

// decodedLen returns the length of verified block b (compression c)
// decompressed, after checking it against MaxBlockSize and the snappy
// expansion bound, so that nothing is allocated for an impossible length.
func (r *fileReader) decodedLen(b []byte, c Compression, h handle, kind BlockKind) (int, error) {
	switch c {
	case NoCompression:
		return len(b), nil
	case SnappyCompression:
		dlen, err := snappy.DecodedLen(b)
		if err != nil || dlen > MaxBlockSize || dlen > maxSnappyExpansion*len(b) {
			return 0, blockCorruptf(r.fid, kind, h.offset, "bad snappy block (declared length %d from %d bytes, %v)", dlen, len(b), err)
		}
		return dlen, nil
	case ZstdCompression:
		dlen, ok := zstdDecodedLen(b)
		if !ok {
			return 0, blockCorruptf(r.fid, kind, h.offset, "bad zstd block (%d bytes): no frame with a content size within bounds", len(b))
		}
		return dlen, nil
	}
	return 0, blockCorruptf(r.fid, kind, h.offset, "unknown compression %s", c)
}

// decodeInto decompresses verified block b (compression c) into dst, whose
// length is decodedLen's answer.
func (r *fileReader) decodeInto(dst, b []byte, c Compression, h handle, kind BlockKind) error {
	switch c {
	case NoCompression:
		copy(dst, b)
		return nil
	case SnappyCompression:
		out, err := snappy.Decode(dst, b)
		if err != nil || len(out) != len(dst) || len(out) > 0 && &out[0] != &dst[0] {
			return blockCorruptf(r.fid, kind, h.offset, "bad snappy block: %v", err)
		}
		return nil
	case ZstdCompression:
		out, err := zstdDecoder().DecodeAll(b, dst[:0])
		if err != nil || len(out) != len(dst) || len(out) > 0 && &out[0] != &dst[0] {
			return blockCorruptf(r.fid, kind, h.offset, "bad zstd block: decoded %d bytes of %d (%v)", len(out), len(dst), err)
		}
		return nil
	}
	return blockCorruptf(r.fid, kind, h.offset, "unknown compression %s", c)
}

// dataBlock returns data block h's contents, from the cache if possible,
// and the cache handle that keeps them valid, which the caller must release
// when it stops reading them (the zero Handle without a cache).
//
// Without a cache the block is read into the given scratch buffers (nil
// means fresh ones, left to the garbage collector). With one, a hit is the
// cached block (re-verified with paranoid checks; a bad one is deleted
// from the cache and reported); a miss reads the block into *raw (nil
// means a pooled buffer) and decompresses it, or copies it, into a buffer
// from the cache's allocator, which is then offered to the cache (a full
// one may turn it away: the caller's release then frees it): so a cached
// block is one manual buffer of its decompressed size, and the miss
// leaves no garbage.
//
// With skip (ReadOptions.SkipChecksums) a miss does not verify the block's
// trailer, and the block is cached under its own key (unverifiedKey): a
// verifying read never finds it there, so a block nobody checked cannot
// reach a reader that asked for checks. A skipping read takes a verified
// cached block first.
//
// A miss reads through ra, an iterator's readahead (nil: none; see
// readRawAhead).
func (r *Reader) dataBlock(h handle, ra *readahead, raw, dec *[]byte, skip bool) ([]byte, CacheHandle, error) {
	if r.cache == nil {
		b, err := r.readDataBlock(h, ra, raw, dec, !skip)
		return b, CacheHandle{}, err
	}
	if data, ch, ok, err := r.cachedBlock(h, h.offset); ok || err != nil {
		return data, ch, err
	}
	key := h.offset
	if skip {
		key = unverifiedKey(h.offset)
		if data, ch, ok, err := r.cachedBlock(h, key); ok || err != nil {
			return data, ch, err
		}
	}
	if raw == nil {
		p := rawPool.Get().(*[]byte)
		defer func() {
			if cap(*p) > maxPooledBuf {
				*p = nil
			}
			rawPool.Put(p)
		}()
		raw = p
	}
	b, c, err := r.readRawAhead(h, ra, raw, !skip)
	if err != nil {
		return nil, CacheHandle{}, err
	}
	n, err := r.decodedLen(b, c, h, BlockKindData)
	if err != nil {
		return nil, CacheHandle{}, err
	}
	ch := r.cache.Alloc(n)
	data := ch.Data()
	if err := r.decodeInto(data, b, c, h, BlockKindData); err != nil {
		ch.Release()
		return nil, CacheHandle{}, err
	}
	var sum uint64
	if r.opts.ParanoidCacheChecks {
		sum = checksum.Sum64(r.t, data)
	}
	r.cache.Set(r.opts.CacheID, key, ch, sum)
	return data, ch, nil
}

// unverifiedBit marks the cache key of a block cached without its checksum
// verified (offsets are far below it: MaxBlockSize and file sizes bound
// them).
const unverifiedBit = 1 << 63

// unverifiedKey is the cache key of the block at offset when it was read
// without verifying its checksum.
func unverifiedKey(offset uint64) uint64 { return offset | unverifiedBit }

// cachedBlock returns the block h cached under key, if it is (ok),
// re-verified with paranoid checks: a bad one is deleted from the cache
// and reported.
func (r *Reader) cachedBlock(h handle, key uint64) ([]byte, CacheHandle, bool, error) {
	ch, ok := r.cache.Get(r.opts.CacheID, key)
	if !ok {
		return nil, CacheHandle{}, false, nil
	}
	data := ch.Data()
	if r.opts.ParanoidCacheChecks {
		if got := checksum.Sum64(r.t, data); got != ch.Sum() {
			sum := ch.Sum()
			ch.Release()
			r.cache.Delete(r.opts.CacheID, key)
			return nil, CacheHandle{}, false, base.CorruptionErrorf("sst: cached block checksum mismatch (memory corruption): stored = 0x%016x, computed = 0x%016x, type = %s in %s offset %d size %d, block kind = data",
				sum, got, r.t, r.fid, h.offset, h.size)
		}
	}
	return data, ch, true, nil
}

// rawPool holds the read buffers of cache misses outside iterators (an
// iterator has its own): only the decompressed block is kept.
var rawPool = sync.Pool{New: func() any { return new([]byte) }}

var getIterPool = sync.Pool{New: func() any { return new(blockIter) }}

// MayContain reports whether the table may hold a point entry for userKey,
// consulting only the bloom filter (true without one): false is certain,
// so a DB skips the table. For a prefix filter (Properties.PrefixFilter)
// it looks for the key's prefix, as the filter holds nothing else.
func (r *Reader) MayContain(userKey []byte) bool {
	switch {
	case !r.hasFilter:
		return true
	case r.props.PrefixFilter:
		return r.prefixOfMayContain(userKey)
	}
	return r.filter.mayContain(filterHash(userKey))
}

// TouchFilter loads the line of the table's filter that MayContain(userKey)
// reads, and returns a byte of it (which means nothing): a Get about to
// probe several tables touches theirs first, so that the cache misses
// overlap instead of coming one after another. It reads nothing else.
func (r *Reader) TouchFilter(userKey []byte) byte {
	if !r.hasFilter || r.props.PrefixFilter || r.filter.numLines == 0 {
		return 0
	}
	return r.filter.lines[r.filter.lineOffset(filterHash(userKey))]
}

// prefixOfMayContain asks the table's prefix filter about userKey's prefix.
// A prefix that Split puts outside the key (a faulty comparer) cannot be
// looked up: true.
func (r *Reader) prefixOfMayContain(userKey []byte) bool {
	n, ok := splitKey(r.cmp, userKey)
	return !ok || r.filter.mayContain(filterHash(userKey[:n]))
}

// MayContainPrefix reports whether the table may hold a point entry whose
// key has the given prefix (under the comparer's Split), consulting only a
// prefix filter: false is certain, so a scan of that prefix can skip the
// table (see ReadOptions.Prefix). Without a filter, or with one of whole
// keys, which cannot answer for a prefix, it is true.
func (r *Reader) MayContainPrefix(prefix []byte) bool { return r.MayContainPrefixCounted(prefix, nil) }

// MayContainPrefixCounted is MayContainPrefix counting the probe in stats
// (nil: not counted) when the table has a prefix filter: the one probe of a
// prefix scan (ReadOptions.Prefix) and of a DB's prefix seek.
func (r *Reader) MayContainPrefixCounted(prefix []byte, stats *FilterStats) bool {
	if !r.hasFilter || !r.props.PrefixFilter {
		return true
	}
	may := r.filter.mayContain(filterHash(prefix))
	if stats != nil {
		stats.prefix(r.fid.num, !may)
	}
	return may
}

// Get returns the newest point entry of userKey with seqnum <= snapSeq: its
// value, seqnum and kind (Set or Delete). found is false if there is none.
// Range tombstones are not applied (see RangeDels).
//
// The value belongs to the caller: with a cache it is a copy of the cached
// block's bytes (so Get allocates for a non-empty value), without one it
// aliases a block read for this call. GetRef avoids the copy.
func (r *Reader) Get(userKey []byte, snapSeq uint64) (value []byte, seq uint64, kind Kind, found bool, err error) {
	value, seq, kind, found, ref, err := r.GetRef(userKey, snapSeq)
	if ref.Valid() {
		if len(value) > 0 {
			value = bytes.Clone(value)
		} else if value != nil {
			value = []byte{}
		}
		ref.Release()
	}
	return value, seq, kind, found, err
}

// GetRef is Get without a copy: the value aliases the block it was read
// from, and stays valid and unchanged until the caller calls ref.Release(),
// which it must do exactly once, whatever found and err say (ref is the
// zero Handle, whose Release does nothing, when no cached block is held).
// The caller must not modify the value. GetRef does not allocate when the
// block is cached.
func (r *Reader) GetRef(userKey []byte, snapSeq uint64) (value []byte, seq uint64, kind Kind, found bool, ref CacheHandle, err error) {
	return r.GetRefWithOptions(userKey, snapSeq, ReadOptions{})
}

// GetRefWithOptions is GetRef with per-read options.
func (r *Reader) GetRefWithOptions(userKey []byte, snapSeq uint64, o ReadOptions) (value []byte, seq uint64, kind Kind, found bool, ref CacheHandle, err error) {
	if r.hasFilter {
		// (MayContain, spelt out: one call fewer for a whole-key filter.)
		var may bool
		if r.props.PrefixFilter {
			may = r.prefixOfMayContain(userKey)
		} else {
			may = r.filter.mayContain(filterHash(userKey))
		}
		if o.Filter != nil {
			o.Filter.point(r.fid.num, !may)
		}
		if !may {
			return nil, 0, 0, false, CacheHandle{}, nil
		}
	}
	if snapSeq < r.globalSeq {
		// Every entry has the global seqnum (an external table holds one
		// per user key, stored at seqnum 0, which any snapSeq sees below).
		return nil, 0, 0, false, CacheHandle{}, nil
	}
	trailer := base.MakeTrailer(min(snapSeq, base.SeqNumMax), base.KindMax)
	idx := r.index.search(userKey, trailer)
	if idx == r.index.len() {
		return nil, 0, 0, false, CacheHandle{}, nil
	}
	h := r.index.handle(idx)
	data, ref, err := r.dataBlock(h, nil, nil, nil, o.SkipChecksums)
	if err != nil {
		return nil, 0, 0, false, CacheHandle{}, err
	}
	value, seq, kind, found, err = r.getInBlock(data, h, userKey, trailer)
	if !found {
		// Nothing of the block is returned: let it go now.
		ref.Release()
		ref = CacheHandle{}
	}
	return value, seq, kind, found, ref, err
}

// getInBlock looks (userKey, trailer) up in data block data (at h).
func (r *Reader) getInBlock(data []byte, h handle, userKey []byte, trailer uint64) (value []byte, seq uint64, kind Kind, found bool, err error) {
	it := getIterPool.Get().(*blockIter)
	defer func() {
		it.reset()
		getIterPool.Put(it)
	}()
	if err := it.initData(data, r.cmp); err != nil {
		return nil, 0, 0, false, r.blockErr(BlockKindData, h.offset, err)
	}
	// If the seek runs off the block, the answer is "absent": the block's
	// separator is >= the search key, so it was shortened to a user key >=
	// userKey that is < the next block's first user key (under the
	// comparer: see Writer.separator).
	if !it.seekGE(userKey, trailer) {
		if it.err != nil {
			return nil, 0, 0, false, r.dataErr(h, it)
		}
		return nil, 0, 0, false, nil
	}
	n := len(it.key) - base.TrailerLen
	if !r.cmp.Eq(it.key[:n], userKey) {
		return nil, 0, 0, false, nil
	}
	t := binary.LittleEndian.Uint64(it.key[n:])
	kind = base.TrailerKind(t)
	if !kind.IsPoint() {
		return nil, 0, 0, false, blockCorruptf(r.fid, BlockKindData, h.offset, "entry %s of kind %s at block offset %d",
			InternalKey{UserKey: userKey, Trailer: t}, kind, it.offset)
	}
	seq = base.TrailerSeqNum(t)
	if r.globalSeq != 0 {
		seq = r.globalSeq
	}
	return it.val, seq, kind, true, nil
}

func (r *fileReader) dataErr(h handle, it *blockIter) error {
	return blockCorruptf(r.fid, BlockKindData, h.offset, "%v (entry at block offset %d)", it.err, it.errOffset)
}

// RangeDels returns the table's range tombstones, sorted by start key
// ascending then seqnum descending. The slice and the keys are shared: do
// not modify them.
//
// For a table opened with a global seqnum every tombstone carries it.
func (r *Reader) RangeDels() []RangeTombstone { return r.tombs }

// GlobalSeqNum returns ReaderOptions.GlobalSeqNum: 0, or the seqnum every
// entry of this external table reads back with.
func (r *Reader) GlobalSeqNum() uint64 { return r.globalSeq }

// Properties returns the table's properties. Do not modify them.
func (r *Reader) Properties() *Properties { return &r.props }

// ChecksumType returns the checksum type from the footer.
func (r *Reader) ChecksumType() checksum.Type { return r.t }

// BaseContext returns the table's per-file context value from the footer
// (mixed into every block checksum, see the package comment). With the
// file number, size and whole-file checksum it tells two tables apart
// without reading their data; backups name the tables they share by it.
func (r *Reader) BaseContext() uint32 { return r.base }

// Layout lists the table's blocks and footer in file order, for tools like
// "vigil sst dump". The returned slice is shared: do not modify it. It is
// built on the first call (about 56 bytes per data block, plus a copy of
// its separator's user key, which stays valid after Close), not by Open.
func (r *Reader) Layout() []BlockInfo {
	r.layoutOnce.Do(r.buildLayout)
	return r.layout
}

func (r *Reader) buildLayout() {
	l := make([]BlockInfo, 0, r.index.len()+6)
	// The keys are copied (into one arena): the index block is freed at
	// Close, and the layout may outlive the Reader.
	n := 0
	for i := 0; i < r.index.len(); i++ {
		n += len(r.index.sepUser(i))
	}
	arena := make([]byte, 0, n)
	for i := 0; i < r.index.len(); i++ {
		k, _ := base.DecodeInternalKey(r.index.sep(i))
		arena = append(arena, k.UserKey...)
		k.UserKey = arena[len(arena)-len(k.UserKey) : len(arena) : len(arena)]
		h := r.index.handle(i)
		l = append(l, BlockInfo{Kind: BlockKindData, Offset: h.offset, Size: h.size, IndexKey: k})
	}
	if r.hasFilter {
		l = append(l, BlockInfo{Kind: BlockKindFilter, Offset: r.filterH.offset, Size: r.filterH.size})
	}
	l = append(l,
		BlockInfo{Kind: BlockKindRangeDel, Offset: r.rangeDelH.offset, Size: r.rangeDelH.size},
		BlockInfo{Kind: BlockKindProperties, Offset: r.propsH.offset, Size: r.propsH.size},
		BlockInfo{Kind: BlockKindIndex, Offset: r.footer.index.offset, Size: r.footer.index.size},
		BlockInfo{Kind: BlockKindMetaIndex, Offset: r.footer.metaindex.offset, Size: r.footer.metaindex.size},
		BlockInfo{Kind: BlockKindFooter, Offset: r.size - FooterLen, Size: FooterLen},
	)
	r.layout = l
}

// Close closes the file and drops the table's blocks from the cache (the
// cache's references: a block still held by a GetRef caller stays valid
// until released, since its memory belongs to the cache, not the Reader).
func (r *Reader) Close() error {
	r.cache.EvictFile(r.opts.CacheID)
	r.mem.free()
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("sst: closing %s: %w", r.fid, err)
	}
	return nil
}

// checkExpected compares the table's properties with what its owner
// recorded of it, if anything (open checked the size already).
func (r *fileReader) checkExpected(want *Expected, p *Properties) error {
	switch {
	case want == nil:
		return nil
	case p.Identity != want.Identity:
		return base.CorruptionErrorf("sst: %s is not the table the MANIFEST names: the file is %s, the MANIFEST expects %s", r.fid, p.Identity, want.Identity)
	case p.ChecksumType != want.ChecksumType || p.FileChecksum != want.FileChecksum:
		return base.CorruptionErrorf("sst: %s is not the table the MANIFEST names: whole-file checksum %s %#016x, the MANIFEST recorded %s %#016x",
			r.fid, p.ChecksumType, p.FileChecksum, want.ChecksumType, want.FileChecksum)
	}
	return nil
}

// MetaMemory returns the memory the Reader keeps while open, outside the Go
// heap: its index and filter blocks (see metaAlloc); what Close frees (0
// after Close).
func (r *Reader) MetaMemory() int64 { return r.mem.size() }

// Size returns the table's size in bytes, as given to Open.
func (r *Reader) Size() uint64 { return r.size }
