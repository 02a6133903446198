package sst

import (
	"bytes"
	"fmt"
	"reflect"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// Verify re-reads the whole file, bypassing the cache, and checks
// everything that can be checked: the footer; every block's trailer
// checksum; that the metaindex, index, filter, range-del and properties
// blocks decode to exactly what Open decoded; every data block's structure,
// the order (under the reader's comparer) and kinds of all entries and
// their agreement with the index separators; that the filter contains
// every user key (every prefix, for a prefix filter); the entry counts,
// raw sizes and key and seqnum bounds against the properties; the
// whole-file checksum; and for an external table, that every entry has
// seqnum 0 and no user key has two. The first problem found is returned as
// an error wrapping ErrCorruption that names the file and block; I/O
// errors are returned as they are.
//
// Verify is safe to call concurrently with reads.
func (r *Reader) Verify() error { return r.VerifyPaced(nil) }

// VerifyPaced is Verify that calls pace (if not nil) with the bytes of
// each data block (trailer included) after reading it, and with the rest
// of the file's size at the end: a background scrubber sleeps there to
// keep its reads at a rate.
func (r *Reader) VerifyPaced(pace func(n int64)) error {
	m, _, err := fileReader{f: r.f, fid: r.fid, size: r.size, cmp: r.cmp}.readMeta()
	if err != nil {
		return err
	}
	defer m.mem.free()
	if err := r.sameMeta(&m); err != nil {
		return base.CorruptionErrorf("sst: %v in %s: the file changed since it was opened", err, r.fid)
	}
	v := verifier{r: r}
	if r.t != checksum.None {
		v.hasher = newFileHasher(r.t)
	}
	var paced, prefetched int64
	for bi := 0; bi < r.index.len(); bi++ {
		if pace != nil {
			// Paced reads are the background's: ask the kernel for the
			// next stretch in one large read instead of a disk read per
			// block, which competes with the foreground's reads for the
			// device's operations.
			if off := int64(r.index.handle(bi).offset); off >= prefetched {
				_ = r.f.Prefetch(off, verifyPrefetch)
				prefetched = off + verifyPrefetch
			}
		}
		if err := v.dataBlock(bi); err != nil {
			return err
		}
		if pace != nil {
			n := int64(r.index.handle(bi).size) + BlockTrailerLen
			paced += n
			pace(n)
		}
	}
	if pace != nil && int64(r.size) > paced {
		pace(int64(r.size) - paced)
	}
	if err := v.fileChecksum(); err != nil {
		return err
	}
	return v.properties()
}

// verifyPrefetch is the stretch of file a paced Verify asks the kernel to
// read ahead at a time.
const verifyPrefetch = 1 << 20

// verifier is the state of one Verify: the properties recomputed from the
// blocks so far, the previous entry's key, and the whole-file hasher.
type verifier struct {
	r          *Reader
	hasher     *fileHasher // nil for checksum type None
	raw, dec   []byte
	prev       []byte
	it         blockIter
	p          Properties
	havePoint  bool
	firstPoint InternalKey
	// prevFilter is the length of prev's part the filter was checked for
	// (its user key, or its prefix for a prefix filter).
	prevFilter int
}

// dataBlock checks data block bi: its structure, the order and kinds of its
// entries and their agreement with the index separators and the filter, and
// adds its entries to the recomputed properties.
func (v *verifier) dataBlock(bi int) error {
	r, it := v.r, &v.it
	sep := r.index.sep(bi)
	h := r.index.handle(bi)
	data, err := r.readBlock(h, BlockKindData, &v.raw, &v.dec)
	if err != nil {
		return err
	}
	if v.hasher != nil {
		v.hasher.write(v.raw[:h.size+BlockTrailerLen])
	}
	if err := it.init(data, true); err != nil {
		return r.blockErr(BlockKindData, h.offset, err)
	}
	n := 0
	for ok := it.first(); ok; ok = it.next() {
		k, _ := base.DecodeInternalKey(it.key)
		fail := func(format string, args ...any) error {
			return blockCorruptf(r.fid, BlockKindData, h.offset, "entry %s at block offset %d: %s", k, it.offset, fmt.Sprintf(format, args...))
		}
		if kind := k.Kind(); !kind.IsPoint() {
			return fail("kind %s not allowed in a data block", kind)
		}
		if v.prev != nil && compareEncoded(r.cmp, v.prev, it.key) >= 0 {
			pk, _ := base.DecodeInternalKey(v.prev)
			return fail("out of order after %s", pk)
		}
		if compareEncoded(r.cmp, it.key, sep) > 0 {
			sk, _ := base.DecodeInternalKey(sep)
			return fail("above the block's index separator %s", sk)
		}
		if bi > 0 && compareEncoded(r.cmp, it.key, r.index.sep(bi-1)) <= 0 {
			return fail("not above the previous block's separator")
		}
		newUserKey := v.prev == nil || !r.cmp.Eq(v.prev[:len(v.prev)-base.TrailerLen], k.UserKey)
		if r.props.External {
			// What an external table promises (WriterOptions.External):
			// seqnum 0, one entry per user key.
			if k.SeqNum() != 0 {
				return fail("seqnum %d in an external table (external entries have seqnum 0)", k.SeqNum())
			}
			if !newUserKey {
				return fail("a second entry for its user key in an external table")
			}
		}
		if r.hasFilter {
			if err := v.checkFilter(k.UserKey, fail); err != nil {
				return err
			}
		}
		v.count(k, it.key, it.val)
		n++
	}
	if it.err != nil {
		return r.dataErr(h, it)
	}
	if n == 0 {
		return blockCorruptf(r.fid, BlockKindData, h.offset, "empty data block")
	}
	return nil
}

// checkFilter checks that the filter holds userKey, or its prefix for a
// prefix filter, unless those bytes are what the previous entry's were
// (v.prev holds it).
func (v *verifier) checkFilter(userKey []byte, fail func(format string, args ...any) error) error {
	r, n := v.r, len(userKey)
	if r.props.PrefixFilter {
		var ok bool
		if n, ok = splitKey(r.cmp, userKey); !ok {
			return fail("comparer %s splits the key at %d, outside it", r.cmp.Name, n)
		}
	}
	if v.prev != nil && bytes.Equal(v.prev[:v.prevFilter], userKey[:n]) {
		return nil
	}
	v.prevFilter = n
	switch {
	case r.filter.mayContain(filterHash(userKey[:n])):
		return nil
	case r.props.PrefixFilter:
		return fail("prefix %s missing from the bloom filter", base.HexKey(userKey[:n]))
	}
	return fail("user key missing from the bloom filter")
}

// count adds a point entry to the recomputed properties.
func (v *verifier) count(k InternalKey, key, val []byte) {
	p := &v.p
	if !v.havePoint {
		v.firstPoint, v.havePoint = k.Clone(), true
	}
	p.NumEntries++
	if k.Kind() == base.KindDelete {
		p.NumDeletions++
	}
	p.RawKeySize += uint64(len(key))
	p.RawValueSize += uint64(len(val))
	seq := k.SeqNum()
	if p.NumEntries == 1 {
		p.SmallestSeq, p.LargestSeq = seq, seq
	}
	p.SmallestSeq, p.LargestSeq = min(p.SmallestSeq, seq), max(p.LargestSeq, seq)
	v.prev = append(v.prev[:0], key...)
}

// fileChecksum hashes the rest of the checksummed region (the filter and
// range-del blocks, after the data blocks) and compares the whole-file
// checksum with the properties'.
func (v *verifier) fileChecksum() error {
	r := v.r
	if v.hasher == nil {
		return nil
	}
	rest := []BlockInfo{{Kind: BlockKindRangeDel, Offset: r.rangeDelH.offset, Size: r.rangeDelH.size}}
	if r.hasFilter {
		rest = append([]BlockInfo{{Kind: BlockKindFilter, Offset: r.filterH.offset, Size: r.filterH.size}}, rest...)
	}
	for _, b := range rest {
		if _, err := r.readBlock(handle{b.Offset, b.Size}, b.Kind, &v.raw, &v.dec); err != nil {
			return err
		}
		v.hasher.write(v.raw[:b.Size+BlockTrailerLen])
	}
	if got := v.hasher.sum64(); got != r.props.FileChecksum {
		return base.CorruptionErrorf("sst: whole-file checksum mismatch: stored = 0x%016x, computed = 0x%016x, type = %s over bytes [0, %d) of %s",
			r.props.FileChecksum, got, r.t, r.propsH.offset, r.fid)
	}
	return nil
}

// properties compares the counts and bounds recomputed from the blocks (and
// the range tombstones) with the properties block.
func (v *verifier) properties() error {
	r, p := v.r, &v.p
	want := &r.props
	for _, t := range r.rangeDels {
		if p.NumEntries == 0 && p.NumRangeDels == 0 {
			p.SmallestSeq, p.LargestSeq = t.Seq, t.Seq
		}
		p.NumRangeDels++
		p.SmallestSeq, p.LargestSeq = min(p.SmallestSeq, t.Seq), max(p.LargestSeq, t.Seq)
	}
	var small, large InternalKey
	have := false
	consider := func(k InternalKey) {
		if !have || r.cmp.CompareInternal(k, small) < 0 {
			small = k
		}
		if !have || r.cmp.CompareInternal(k, large) > 0 {
			large = k
		}
		have = true
	}
	if v.havePoint {
		consider(v.firstPoint)
		last, _ := base.DecodeInternalKey(v.prev)
		consider(last)
	}
	for _, t := range r.rangeDels {
		consider(base.MakeInternalKey(t.Start, t.Seq, base.KindRangeDelete))
		consider(base.MakeInternalKey(t.End, base.SeqNumMax, base.KindRangeDelete))
	}
	type pair struct {
		name      string
		got, want uint64
	}
	for _, c := range []pair{
		{"entries", p.NumEntries, want.NumEntries},
		{"deletions", p.NumDeletions, want.NumDeletions},
		{"raw key size", p.RawKeySize, want.RawKeySize},
		{"raw value size", p.RawValueSize, want.RawValueSize},
		{"smallest seqnum", p.SmallestSeq, want.SmallestSeq},
		{"largest seqnum", p.LargestSeq, want.LargestSeq},
	} {
		if c.got != c.want {
			return blockCorruptf(r.fid, BlockKindProperties, r.propsH.offset, "%s: properties say %d, blocks hold %d", c.name, c.want, c.got)
		}
	}
	if have && (r.cmp.CompareInternal(small, want.SmallestKey) != 0 || r.cmp.CompareInternal(large, want.LargestKey) != 0) {
		return blockCorruptf(r.fid, BlockKindProperties, r.propsH.offset, "key bounds: properties say [%s, %s], blocks hold [%s, %s]",
			want.SmallestKey, want.LargestKey, small, large)
	}
	return nil
}

// sameMeta compares freshly decoded metadata with what Open decoded.
func (r *Reader) sameMeta(m *tableMeta) error {
	switch {
	case m.footer != r.footer:
		return fmt.Errorf("footer differs")
	case m.index.len() != r.index.len():
		return fmt.Errorf("index has %d entries, had %d", m.index.len(), r.index.len())
	case m.hasFilter != r.hasFilter || m.filterH != r.filterH || !bytes.Equal(m.filter.lines, r.filter.lines) ||
		m.filter.probes != r.filter.probes:
		return fmt.Errorf("filter differs")
	case m.rangeDelH != r.rangeDelH || !reflect.DeepEqual(m.rangeDels, r.rangeDels):
		return fmt.Errorf("range tombstones differ")
	case m.propsH != r.propsH || !reflect.DeepEqual(m.props, r.props):
		return fmt.Errorf("properties differ")
	}
	for i := 0; i < m.index.len(); i++ {
		a, b := &m.index, &r.index
		if a.handle(i) != b.handle(i) || !bytes.Equal(a.sep(i), b.sep(i)) {
			return fmt.Errorf("index entry %d differs", i)
		}
	}
	return r.index.checkSamples()
}
