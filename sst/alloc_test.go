package sst

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// The tests in this file pin the rule that decoding bytes from disk
// allocates at most a small multiple of the bytes decoded. Their inputs are
// the amplification attacks on prefix compression: entries that each keep
// the previous key and add a byte cost a few bytes on disk but n entries
// hold n²/2 bytes of keys, so any decoder that materialises every key is
// quadratic. With n = 4000 the old decoders allocated tens of megabytes for
// a file of about 60 KB; the limits below are a few hundred kilobytes.

// allocBytes returns the bytes f allocated on the heap and, for what an
// open table keeps, outside it (metaAlloc).
func allocBytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	meta := metaAllocated.Load()
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc + metaAllocated.Load() - meta
}

// craftN is the number of prefix-sharing entries of the crafted inputs.
const craftN = 4000

// appendRawEntry appends one block entry with the given shared length, key
// delta and value, exactly as the format encodes it.
func appendRawEntry(b []byte, shared int, delta, value []byte) []byte {
	b = binary.AppendUvarint(b, uint64(shared))
	b = binary.AppendUvarint(b, uint64(len(delta)))
	b = binary.AppendUvarint(b, uint64(len(value)))
	b = append(b, delta...)
	return append(b, value...)
}

// finishRawBlock appends the restart array and count.
func finishRawBlock(b []byte, restarts ...uint32) []byte {
	for _, r := range restarts {
		b = binary.LittleEndian.AppendUint32(b, r)
	}
	return binary.LittleEndian.AppendUint32(b, uint32(len(restarts)))
}

// sharedIndexBlock is the attack of the issue on the index: one restart
// point, then entries that share the whole previous separator and add one
// byte (each separator is a proper extension of the previous one, so they
// increase), pointing at the empty data blocks hs.
func sharedIndexBlock(hs []handle) []byte {
	var b []byte
	key := base.MakeInternalKey([]byte("a"), 1, base.KindSet).Append(nil)
	for j, h := range hs {
		v := appendHandle(nil, h)
		if j == 0 {
			b = appendRawEntry(b, 0, key, v)
			continue
		}
		b = appendRawEntry(b, len(key), []byte("a"), v)
		key = append(key, 'a')
	}
	return finishRawBlock(b, 0)
}

// sharedRangeDelBlock is the same attack on the range-del block: start
// keys "a", "aa", "aaa", ..., each entry keeping the previous user key and
// adding 'a' and the trailer, all ending at "b".
func sharedRangeDelBlock(n int) []byte {
	var b []byte
	user := []byte("a")
	tr := binary.LittleEndian.AppendUint64(nil, base.MakeTrailer(1, base.KindRangeDelete))
	for j := 0; j < n; j++ {
		if j == 0 {
			b = appendRawEntry(b, 0, append(bytes.Clone(user), tr...), []byte("b"))
			continue
		}
		b = appendRawEntry(b, len(user), append([]byte("a"), tr...), []byte("b"))
		user = append(user, 'a')
	}
	return finishRawBlock(b, 0)
}

// tableCraft assembles a table from raw blocks with valid trailers, a
// consistent properties block, metaindex and footer, bypassing the Writer,
// so tests can hand the reader block contents the Writer never produces,
// with every checksum correct.
type tableCraft struct {
	ct       checksum.Type
	dataRaw  [][]byte                 // data blocks (uncompressed)
	index    func(hs []handle) []byte // the index block, given the data blocks' handles
	rangeDel []byte                   // nil: an empty block
	numTombs uint64
	props    Properties // counts and bounds; sizes and checksums are filled in
}

func (c *tableCraft) build() []byte {
	const baseCtx = 0x5eed1234
	var file []byte
	emit := func(b []byte) handle {
		h := handle{offset: uint64(len(file)), size: uint64(len(b))}
		file = append(file, b...)
		file = append(file, NoCompression.Code())
		sum := trailerChecksum(c.ct, file[h.offset:]) + checksum.ContextModifier(baseCtx, h.offset)
		file = binary.LittleEndian.AppendUint32(file, sum)
		return h
	}
	var hs []handle
	for _, d := range c.dataRaw {
		hs = append(hs, emit(d))
	}
	dataSize := uint64(len(file))
	rd := c.rangeDel
	if rd == nil {
		rd = finishRawBlock(nil)
	}
	rdH := emit(rd)
	index := c.index(hs)
	p := c.props
	p.NumDataBlocks, p.DataSize = uint64(len(hs)), dataSize
	p.IndexSize = uint64(len(index)) + BlockTrailerLen
	p.RangeDelSize = rdH.size + BlockTrailerLen
	p.NumRangeDels = c.numTombs
	p.ChecksumType = c.ct
	p.Compression = NoCompression // every block is stored as it is
	if c.ct != checksum.None {
		p.FileChecksum = checksum.Sum64(c.ct, file)
	}
	propsH := emit(encodeProperties(&p))
	indexH := emit(index)
	var mi []byte
	mi = appendRawEntry(mi, 0, []byte(metaProperties), appendHandle(nil, propsH))
	r1 := uint32(len(mi))
	mi = appendRawEntry(mi, 0, []byte(metaRangeDel), appendHandle(nil, rdH))
	metaH := emit(finishRawBlock(mi, 0, r1))
	ft := footer{checksumType: c.ct, version: FormatVersion, base: baseCtx, metaindex: metaH, index: indexH}
	return append(file, ft.encode(uint64(len(file)))...)
}

// sharedIndexTable is a table whose index is sharedIndexBlock over n empty
// data blocks, every checksum valid and the properties consistent.
func sharedIndexTable(n int) []byte {
	c := tableCraft{ct: checksum.XXH3, dataRaw: make([][]byte, n), index: sharedIndexBlock}
	c.props.NumEntries = uint64(n)
	c.props.SmallestKey = base.MakeInternalKey([]byte("a"), 1, base.KindSet)
	c.props.LargestKey = base.MakeInternalKey(bytes.Repeat([]byte("a"), n), 1, base.KindSet)
	return c.build()
}

// sharedRangeDelTable is a table without point entries whose range-del
// block is sharedRangeDelBlock(n).
func sharedRangeDelTable(n int) []byte {
	c := tableCraft{ct: checksum.XXH3, index: func([]handle) []byte { return finishRawBlock(nil) },
		rangeDel: sharedRangeDelBlock(n), numTombs: uint64(n)}
	c.props.SmallestKey = base.MakeInternalKey([]byte("a"), 1, base.KindRangeDelete)
	c.props.LargestKey = base.MakeInternalKey([]byte("b"), base.SeqNumMax, base.KindRangeDelete)
	return c.build()
}

// checkOpenAlloc opens data and fails if Open allocated more than a small
// multiple of the file's size; it returns Open's error.
func checkOpenAlloc(t *testing.T, data []byte) error {
	t.Helper()
	var err error
	got := allocBytes(func() {
		var r *Reader
		if r, err = openBytes(data, ReaderOptions{}); err == nil {
			r.Close()
		}
	})
	limit := 4*uint64(len(data)) + 64<<10
	t.Logf("Open of %d bytes allocated %d bytes (limit %d): %v", len(data), got, limit, err)
	if got > limit {
		t.Fatalf("Open of a crafted %d-byte table allocated %d bytes, over the limit of %d", len(data), got, limit)
	}
	return err
}

// TestCraftedIndexAllocBounded is the reproduction: an index whose
// entries share the previous separator and add a byte. Open must reject it
// (the index is written with restart interval 1, so no entry shares bytes)
// without allocating more than a small multiple of the file.
func TestCraftedIndexAllocBounded(t *testing.T) {
	data := sharedIndexTable(craftN)
	err := checkOpenAlloc(t, data)
	if !errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), "index block") || !strings.Contains(err.Error(), "t.sst") {
		t.Fatalf("Open = %v, want a corruption error naming the index block and the file", err)
	}
}

// TestCraftedRangeDelAllocBounded: the same attack on the range-del block,
// which Open decodes into tombstones. It must be rejected before the start
// keys are materialised.
func TestCraftedRangeDelAllocBounded(t *testing.T) {
	data := sharedRangeDelTable(craftN)
	err := checkOpenAlloc(t, data)
	if !errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), "range-del block") {
		t.Fatalf("Open = %v, want a corruption error naming the range-del block", err)
	}
	// decodeRangeDels on its own: the same bound, relative to the block.
	b := sharedRangeDelBlock(craftN)
	var derr error
	got := allocBytes(func() { _, derr = decodeRangeDels(b, base.DefaultComparer) })
	if limit := 4*uint64(len(b)) + 64<<10; got > limit || derr == nil {
		t.Fatalf("decodeRangeDels of %d bytes allocated %d (limit %d), err %v", len(b), got, limit, derr)
	}
}

// prefixChainBlock is a block the blockWriter writes with a restart interval
// above n: keys "a", "aa", "aaa", ..., each entry sharing the whole previous
// key. A valid block whose keys total n²/2 bytes.
func prefixChainBlock(n int) []byte {
	var bw blockWriter
	bw.init(n + 1)
	key := []byte{}
	for j := 0; j < n; j++ {
		key = append(key, 'a')
		bw.add(key, nil)
	}
	return bytes.Clone(bw.finish())
}

// TestBlockReverseAllocBounded: moving backward decodes the restart
// interval before the position once; it must not keep a copy of every key
// of the interval (n²/2 bytes here), and must still return the right keys.
func TestBlockReverseAllocBounded(t *testing.T) {
	b := prefixChainBlock(craftN)
	var it blockIter
	if err := it.init(b, false); err != nil {
		t.Fatal(err)
	}
	steps := 0
	got := allocBytes(func() {
		for ok := it.last(); ok; ok = it.prev() {
			if len(it.key) != craftN-steps || it.key[len(it.key)-1] != 'a' {
				t.Fatalf("step %d: key of %d bytes", steps, len(it.key))
			}
			steps++
		}
	})
	if it.err != nil || steps != craftN {
		t.Fatalf("reverse scan: %d steps, err %v", steps, it.err)
	}
	limit := allocAmp*uint64(len(b)) + allocSlack
	t.Logf("reverse scan of a %d-byte block allocated %d bytes (limit %d)", len(b), got, limit)
	if got > limit {
		t.Fatalf("reverse scan of a %d-byte block of %d entries allocated %d bytes, over the limit of %d", len(b), craftN, got, limit)
	}
}

// prefixChainOptions are Writer options with a restart interval above n
// and blocks large enough for n small entries.
func prefixChainOptions(n int) WriterOptions {
	o := testWriterOptions(checksum.XXH3, NoCompression, 1<<20)
	o.BlockRestartInterval = n + 1
	o.BloomBitsPerKey = 0
	return o
}

// prefixChainSpec is n point keys "a", "aa", ... and (with tombs) n range
// tombstones from the same start keys to "b".
func prefixChainSpec(n int, tombs bool) tableSpec {
	var spec tableSpec
	key := []byte{}
	for j := 0; j < n; j++ {
		key = append(key, 'a')
		spec.points = append(spec.points, kv{base.MakeInternalKey(bytes.Clone(key), 1, base.KindSet), nil})
		if tombs {
			spec.tombs = append(spec.tombs, base.RangeTombstone{Start: bytes.Clone(key), End: []byte("b"), Seq: 1})
		}
	}
	return spec
}

// prefixChainTable is the table the Writer writes for prefixChainSpec with
// prefixChainOptions: one data block whose entries each share the whole
// previous key, and (with tombs) a range-del block of the same shape.
func prefixChainTable(t testing.TB, n int, tombs bool) []byte {
	data, _ := build(t, prefixChainOptions(n), prefixChainSpec(n, tombs))
	return data
}

// TestTableReverseAllocBounded: the same through a table iterator, on a
// table the Writer produced.
func TestTableReverseAllocBounded(t *testing.T) {
	data := prefixChainTable(t, craftN, false)
	r := mustOpen(t, data, ReaderOptions{})
	defer r.Close()
	n := 0
	got := allocBytes(func() {
		it := r.NewIter(nil, nil)
		for ok := it.Last(); ok; ok = it.Prev() {
			n++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	})
	if n != craftN {
		t.Fatalf("reverse scan returned %d entries", n)
	}
	limit := allocAmp*uint64(len(data)) + allocSlack
	t.Logf("reverse scan of a %d-byte table allocated %d bytes (limit %d)", len(data), got, limit)
	if got > limit {
		t.Fatalf("reverse scan of a %d-byte table allocated %d bytes, over the limit of %d", len(data), got, limit)
	}
}

// TestRangeDelSharingWithinBound: the Writer, however large its restart
// interval, never writes a range-del block the reader would reject, and the
// reader decodes it within its bound: tombstones whose start keys extend
// one another still round-trip, and decoding them allocates at most a
// small multiple of the block.
func TestRangeDelSharingWithinBound(t *testing.T) {
	data := prefixChainTable(t, craftN, true)
	var r *Reader
	var err error
	got := allocBytes(func() { r, err = openBytes(data, ReaderOptions{}) })
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	rd := r.RangeDels()
	if len(rd) != craftN {
		t.Fatalf("%d tombstones", len(rd))
	}
	for j, ts := range rd {
		if len(ts.Start) != j+1 || string(ts.End) != "b" || ts.Seq != 1 {
			t.Fatalf("tombstone %d: %+v", j, ts)
		}
	}
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	rdSize := r.rangeDelH.size
	limit := 32*rdSize + uint64(len(data)) + 64<<10
	t.Logf("range-del block %d bytes, file %d bytes, Open allocated %d (limit %d)", rdSize, len(data), got, limit)
	if got > limit {
		t.Fatalf("Open allocated %d bytes for a %d-byte range-del block", got, rdSize)
	}
}

// TestBlockIterUndoMode runs the model checks of TestBlockIterAgainstModel
// on blocks whose keys share long prefixes across large restart intervals,
// so that the reverse cache cannot hold every key of an interval within its
// budget and keeps undo bytes instead (checked), through every positioning
// method and mixed directions.
func TestBlockIterUndoMode(t *testing.T) {
	rng := newRand(9)
	prefix := bytes.Repeat([]byte("p"), 2000)
	for _, restart := range []int{32, 100, 1000} {
		var keys [][]byte
		for _, k := range randKeys(rng, 300) {
			keys = append(keys, append(bytes.Clone(prefix), k...))
		}
		b := buildBlock(keys, restart)
		var it blockIter
		if err := it.init(b, false); err != nil {
			t.Fatal(err)
		}
		if !it.last() || it.cacheKeys {
			t.Fatalf("restart=%d: last() = %v, cacheKeys = %v: the test does not reach undo mode", restart, it.key != nil, it.cacheKeys)
		}
		var fwd, bwd [][]byte
		for ok := it.first(); ok; ok = it.next() {
			fwd = append(fwd, bytes.Clone(it.key))
		}
		for ok := it.last(); ok; ok = it.prev() {
			bwd = append(bwd, bytes.Clone(it.key))
		}
		slices.Reverse(bwd)
		if it.err != nil || !slices.EqualFunc(fwd, keys, bytes.Equal) || !slices.EqualFunc(bwd, keys, bytes.Equal) {
			t.Fatalf("restart=%d: scans differ (err %v)", restart, it.err)
		}
		for j := 0; j < 300; j++ {
			target := append(bytes.Clone(prefix), randKeys(rng, 1)[0]...)
			if j%10 == 0 {
				target = target[:rng.IntN(len(target)+1)]
			}
			ge, _ := slices.BinarySearchFunc(keys, target, bytes.Compare)
			lt := ge - 1
			ok := it.seekLT(target, 0)
			if ok != (lt >= 0) || ok && !bytes.Equal(it.key, keys[lt]) {
				t.Fatalf("restart=%d: seekLT = %v, want index %d", restart, ok, lt)
			}
			pos := lt
			for s := 0; s < 40 && pos >= 0 && pos < len(keys); s++ {
				if rng.IntN(2) == 0 {
					ok, pos = it.next(), pos+1
				} else {
					ok, pos = it.prev(), pos-1
				}
				if ok != (pos >= 0 && pos < len(keys)) || ok && (!bytes.Equal(it.key, keys[pos]) || string(it.val) != fmt.Sprintf("v%d", pos)) {
					t.Fatalf("restart=%d: step to %d gave %v", restart, pos, ok)
				}
			}
		}
	}
}
