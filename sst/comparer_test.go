package sst

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/testcmp"
)

// The tests of this file write and read tables under comparers other than
// bytewise (testcmp.Reverse, testcmp.Versioned): every part of the package
// that orders keys must order them by the comparer, or these tables are
// misread. (Changing any comparison of the package to bytes.Compare makes
// them fail.)

// reverseSep is testcmp.Reverse with a Separator: where Reverse's
// separators are the keys themselves, this one shortens them, so that a
// part of the writer that decides bytewise whether to shorten (which
// agrees with Versioned's order across prefixes) shows.
var reverseSep = &base.Comparer{
	Compare: testcmp.Reverse.Compare,
	// a > b bytewise: a short k with b < k < a bytewise is between them
	// in reverse; BytewiseSeparator(b, a) gives b <= k < a.
	Separator: func(dst, a, b []byte) []byte {
		if k := base.BytewiseSeparator(nil, b, a); !bytes.Equal(k, b) {
			return append(dst, k...)
		}
		return append(dst, a...)
	},
	Name: "vigil.test.ReverseSeparator",
}

// testComparers are the comparers the tests run under, the default first.
var testComparers = []*base.Comparer{base.DefaultComparer, testcmp.Reverse, testcmp.Versioned, reverseSep}

// randCmpKey returns a random user key for comparer c: for one with a
// Split (testcmp.Versioned) a short prefix with a version, or a bare prefix
// of under 8 bytes now and then; otherwise 1..10 bytes of a small
// alphabet, so that keys share prefixes.
func randCmpKey(rng *rand.Rand, c *base.Comparer) []byte {
	const alphabet = "abcdxyz\x00\xff"
	n := 1 + rng.IntN(10)
	if c.Split != nil {
		n = 1 + rng.IntN(5)
	}
	k := make([]byte, n)
	for i := range k {
		k[i] = alphabet[rng.IntN(len(alphabet))]
	}
	if c.Split != nil && rng.IntN(8) != 0 {
		k = testcmp.VersionedKey(k, uint64(rng.IntN(60)))
	}
	return k
}

// genCmpSpec makes a random table under comparer c (resolved): nKeys
// distinct user keys with 1..3 versions each (Sets and Deletes) and nTombs
// range tombstones, all sorted in c's internal-key order.
func genCmpSpec(rng *rand.Rand, c *base.Comparer, nKeys, nTombs int) tableSpec {
	seen := map[string]bool{}
	var keys [][]byte
	for len(keys) < nKeys {
		if k := randCmpKey(rng, c); !seen[string(k)] {
			seen[string(k)] = true
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, c.Compare)
	var s tableSpec
	for _, k := range keys {
		seqs := map[uint64]bool{}
		for n := 1 + rng.IntN(3); len(seqs) < n; {
			seqs[uint64(1+rng.IntN(5000))] = true
		}
		for seq := range seqs {
			kind, v := base.KindSet, []byte(fmt.Sprintf("v-%x-%d", k, seq))
			if rng.IntN(5) == 0 {
				kind, v = base.KindDelete, nil
			}
			s.points = append(s.points, kv{base.MakeInternalKey(k, seq, kind), v})
		}
	}
	slices.SortFunc(s.points, func(a, b kv) int { return c.CompareInternal(a.key, b.key) })
	for i := 0; i < nTombs && len(keys) > 1; i++ {
		a, b := rng.IntN(len(keys)-1), 0
		b = a + 1 + rng.IntN(min(len(keys)-a-1, 20))
		s.tombs = append(s.tombs, base.RangeTombstone{Start: keys[a], End: keys[b], Seq: uint64(1 + rng.IntN(5000))})
	}
	tombKey := func(t base.RangeTombstone) base.InternalKey {
		return base.MakeInternalKey(t.Start, t.Seq, base.KindRangeDelete)
	}
	slices.SortFunc(s.tombs, func(a, b base.RangeTombstone) int { return c.CompareInternal(tombKey(a), tombKey(b)) })
	s.tombs = slices.CompactFunc(s.tombs, func(a, b base.RangeTombstone) bool { return c.CompareInternal(tombKey(a), tombKey(b)) == 0 })
	return s
}

// cmpName is a short name of a test comparer for subtests.
func cmpName(c *base.Comparer) string {
	switch c.Name {
	case testcmp.Reverse.Name:
		return "reverse"
	case testcmp.Versioned.Name:
		return "versioned"
	case reverseSep.Name:
		return "reverse-separator"
	}
	return "default"
}

// TestComparerRoundTrip writes tables of many keys over many blocks under
// each comparer and table shape and checks everything readable of them
// against the spec, in the comparer's order: Verify, the properties, scans
// both ways, Get, random iterator operations within random bounds, the
// index separators, the bounds in Meta, the tombstones and Salvage.
func TestComparerRoundTrip(t *testing.T) {
	shapes := []struct {
		name      string
		blockSize int
		restart   int
		bloom     int
		c         Compression
		cached    bool
	}{
		{"tiny-blocks", 64, 16, 10, NoCompression, false},
		{"restart-1", 200, 1, 0, SnappyCompression, true},
		{"restart-4", 256, 4, 10, ZstdCompression, true},
		{"large-blocks", 4096, 16, 10, SnappyCompression, false},
	}
	for _, c := range testComparers {
		for si, sh := range shapes {
			t.Run(cmpName(c)+"/"+sh.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(si), 77))
				n := 1500
				if testing.Short() || raceEnabled {
					n = 400
				}
				spec := genCmpSpec(rng, c.Resolve(), n, 12)
				o := testWriterOptions(checksum.XXH3, sh.c, sh.blockSize)
				o.BlockRestartInterval, o.BloomBitsPerKey, o.Comparer = sh.restart, sh.bloom, c
				data, m := build(t, o, spec)
				ro := ReaderOptions{FileNum: 7, Comparer: c}
				if sh.cached {
					ro.Cache, ro.CacheID = wrapCache(newTestCache()), 3
				}
				checkCmpTable(t, rng, data, m, spec, ro, sh.bloom > 0)
			})
		}
	}
}

// checkCmpTable checks a table written under ro.Comparer against its spec
// (see TestComparerRoundTrip).
func checkCmpTable(t *testing.T, rng *rand.Rand, data []byte, m *Meta, spec tableSpec, ro ReaderOptions, bloom bool) {
	t.Helper()
	c := ro.Comparer.Resolve()
	r := mustOpen(t, data, ro)
	defer r.Close()
	if err := r.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	p := r.Properties()
	minBlocks := uint64(10)
	if testing.Short() || raceEnabled {
		minBlocks = 3 // a quarter of the keys
	}
	if p.ComparerName != c.Name || p.PrefixFilter != (bloom && c.Split != nil) || p.NumDataBlocks < minBlocks {
		t.Fatalf("properties: comparer %q, prefix filter %v, %d data blocks", p.ComparerName, p.PrefixFilter, p.NumDataBlocks)
	}
	for _, fwd := range []bool{true, false} {
		it := r.NewIter(nil, nil)
		if err := equalKVs(collect(t, it, fwd), spec.points); err != nil {
			t.Fatalf("scan (forward=%v): %v", fwd, err)
		}
		it.Close()
	}
	for _, e := range spec.points {
		for _, snap := range []uint64{e.key.SeqNum(), e.key.SeqNum() - 1, base.SeqNumMax} {
			checkGetCmp(t, r, spec.points, e.key.UserKey, snap)
		}
		if !r.MayContain(e.key.UserKey) || !r.MayContainPrefix(c.Prefix(e.key.UserKey)) {
			t.Fatalf("the filter excludes present key %s", base.HexKey(e.key.UserKey))
		}
	}
	for i := 0; i < 300; i++ {
		checkGetCmp(t, r, spec.points, randCmpKey(rng, c), base.SeqNumMax)
	}
	for round := 0; round < 30; round++ {
		runIterModel(t, rng, r, spec, 60)
	}
	checkSeparators(t, r)
	checkCmpBounds(t, c, m, spec)
	if !slices.EqualFunc(r.RangeDels(), spec.tombs, func(a, b base.RangeTombstone) bool {
		return bytes.Equal(a.Start, b.Start) && bytes.Equal(a.End, b.End) && a.Seq == b.Seq
	}) {
		t.Fatalf("range dels %v, want %v", r.RangeDels(), spec.tombs)
	}
	got, res, err := salvageBytes(t, data, ReaderOptions{FileNum: 7, Comparer: ro.Comparer})
	if err != nil {
		t.Fatalf("Salvage: %v", err)
	}
	if err := equalKVs(got, spec.points); err != nil || len(res.Lost) != 0 || len(res.RangeDels) != len(spec.tombs) {
		t.Fatalf("Salvage: %v, lost %v, %d tombstones", err, res.Lost, len(res.RangeDels))
	}
}

func checkGetCmp(t *testing.T, r *Reader, points []kv, ukey []byte, snap uint64) {
	t.Helper()
	v, seq, kind, found, err := r.Get(ukey, snap)
	if err != nil {
		t.Fatalf("Get(%s, %d): %v", base.HexKey(ukey), snap, err)
	}
	w, wfound := modelGetCmp(r.cmp, points, ukey, snap)
	if found != wfound {
		t.Fatalf("Get(%s, %d): found=%v, want %v", base.HexKey(ukey), snap, found, wfound)
	}
	if found && (seq != w.key.SeqNum() || kind != w.key.Kind() || !bytes.Equal(v, w.value)) {
		t.Fatalf("Get(%s, %d) = %q #%d %s, want %q #%d %s", base.HexKey(ukey), snap, v, seq, kind, w.value, w.key.SeqNum(), w.key.Kind())
	}
}

// checkSeparators checks every index separator against the blocks on
// either side, in the reader's order: >= the block's last key, < the next
// block's first key, and when its user key is not the last key's, strictly
// between the two user keys (what Get relies on). Under a comparer whose
// Separator shortens (the default, Versioned, reverseSep) some of ten or
// more separators must be shortened; under one without (Reverse) each is
// its block's last key.
func checkSeparators(t *testing.T, r *Reader) {
	t.Helper()
	c := r.cmp
	firstLast := func(i int) (first, last []byte) {
		data, err := r.readBlock(r.index.handle(i), BlockKindData, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var it blockIter
		if err := it.initData(data, c); err != nil || !it.first() {
			t.Fatalf("block %d: %v", i, err)
		}
		first = bytes.Clone(it.key)
		if !it.last() {
			t.Fatalf("block %d: no last entry", i)
		}
		return first, bytes.Clone(it.key)
	}
	shortened := 0
	_, last := firstLast(0)
	for i := 0; i < r.index.len(); i++ {
		sep := r.index.sep(i)
		if c.CompareEncoded(last, sep) > 0 {
			t.Fatalf("separator %d %x below its block's last key %x", i, sep, last)
		}
		if i+1 == r.index.len() {
			if !bytes.Equal(sep, last) {
				t.Fatalf("last separator %x is not the last key %x", sep, last)
			}
			break
		}
		nextFirst, nextLast := firstLast(i + 1)
		if c.CompareEncoded(sep, nextFirst) >= 0 {
			t.Fatalf("separator %d %x not below the next block's first key %x", i, sep, nextFirst)
		}
		su, lu, nu := r.index.sepUser(i), last[:len(last)-8], nextFirst[:len(nextFirst)-8]
		if !bytes.Equal(sep, last) {
			shortened++
			if c.Compare(lu, su) >= 0 || c.Compare(su, nu) >= 0 {
				t.Fatalf("separator %d's user key %x not strictly between %x and %x", i, su, lu, nu)
			}
		}
		last = nextLast
	}
	switch {
	case c.Name == testcmp.Reverse.Name && shortened != 0:
		t.Fatalf("%d separators shortened by a comparer without Separator", shortened)
	case c.Name != testcmp.Reverse.Name && shortened == 0 && r.index.len() >= 10:
		t.Fatalf("no separator of %d shortened", r.index.len())
	}
}

// checkCmpBounds checks Meta's key and seqnum bounds against the spec in
// c's order.
func checkCmpBounds(t *testing.T, c *base.Comparer, m *Meta, spec tableSpec) {
	t.Helper()
	var want []base.InternalKey
	for _, e := range spec.points {
		want = append(want, e.key)
	}
	for _, rt := range spec.tombs {
		want = append(want, base.MakeInternalKey(rt.Start, rt.Seq, base.KindRangeDelete),
			base.MakeInternalKey(rt.End, base.SeqNumMax, base.KindRangeDelete))
	}
	slices.SortFunc(want, c.CompareInternal)
	if c.CompareInternal(m.Smallest, want[0]) != 0 || c.CompareInternal(m.Largest, want[len(want)-1]) != 0 {
		t.Fatalf("bounds [%s, %s], want [%s, %s]", m.Smallest, m.Largest, want[0], want[len(want)-1])
	}
}

// TestSeparatorUnderComparers checks Writer.separator case by case, and for
// the default comparer that it is byte for byte the rule the format always
// had (oldSeparator), over many random pairs.
func TestSeparatorUnderComparers(t *testing.T) {
	ik := func(k []byte, seq uint64) []byte { return base.MakeInternalKey(k, seq, base.KindSet).Append(nil) }
	sepKey := func(u []byte) []byte { return base.MakeInternalKey(u, base.SeqNumMax, base.KindMax).Append(nil) }
	vk := testcmp.VersionedKey
	for _, tc := range []struct {
		c    *base.Comparer
		a, b []byte
		want []byte
	}{
		{base.DefaultComparer, ik([]byte("abc"), 5), ik([]byte("abe"), 9), sepKey([]byte("abd"))},
		{base.DefaultComparer, ik([]byte("abc"), 5), ik([]byte("abd"), 9), ik([]byte("abc"), 5)},
		{base.DefaultComparer, ik([]byte("abc"), 5), ik([]byte("abc"), 4), ik([]byte("abc"), 5)},
		// Reverse has no Separator: the last key itself.
		{testcmp.Reverse, ik([]byte("abe"), 5), ik([]byte("abc"), 9), ik([]byte("abe"), 5)},
		// Versioned shortens the prefix and takes the newest version.
		{testcmp.Versioned, ik(vk([]byte("apple"), 3), 5), ik(vk([]byte("banana"), 9), 1), sepKey(vk([]byte("b"), ^uint64(0)))},
		// Two versions of one prefix: nothing shorter in between.
		{testcmp.Versioned, ik(vk([]byte("apple"), 9), 5), ik(vk([]byte("apple"), 3), 1), ik(vk([]byte("apple"), 9), 5)},
		// The same user key on both sides.
		{testcmp.Versioned, ik(vk([]byte("apple"), 9), 5), ik(vk([]byte("apple"), 9), 4), ik(vk([]byte("apple"), 9), 5)},
		{reverseSep, ik([]byte("abz"), 5), ik([]byte("abc"), 9), sepKey([]byte("abd"))},
		{reverseSep, ik([]byte("abd"), 5), ik([]byte("abc"), 9), ik([]byte("abd"), 5)},
	} {
		w := NewWriter(nil, WriterOptions{Comparer: tc.c})
		if got := w.separator(tc.a, tc.b); !bytes.Equal(got, tc.want) {
			t.Errorf("%s: separator(%x, %x) = %x, want %x", tc.c.Name, tc.a, tc.b, got, tc.want)
		}
		w.Abort()
	}
	rng := rand.New(rand.NewPCG(8, 9))
	w := NewWriter(nil, WriterOptions{})
	defer w.Abort()
	for i := 0; i < 20000; i++ {
		a, b := randSeekKey(rng, tableSpec{}), randSeekKey(rng, tableSpec{})
		ea, eb := ik(a, 7), ik(b, 3)
		if base.CompareEncoded(ea, eb) >= 0 {
			continue
		}
		if got, want := w.separator(ea, eb), oldSeparator(ea, eb); !bytes.Equal(got, want) {
			t.Fatalf("separator(%x, %x) = %x, the format's rule gives %x", ea, eb, got, want)
		}
	}
}

// oldSeparator is the Writer's separator as it was before comparers: the
// default comparer's must still give exactly these bytes.
func oldSeparator(a, b []byte) []byte {
	au, bu := a[:len(a)-base.TrailerLen], b[:len(b)-base.TrailerLen]
	n := 0
	for n < len(au) && n < len(bu) && au[n] == bu[n] {
		n++
	}
	if n < len(au) && n < len(bu) && au[n] < 0xff && (au[n]+1 < bu[n] || len(bu) > n+1) {
		s := append([]byte(nil), au[:n+1]...)
		s[n]++
		return base.MakeInternalKey(s, base.SeqNumMax, base.KindMax).Append(nil)
	}
	return bytes.Clone(a)
}

// TestComparerMismatchRefused: a table opens only under the comparer that
// wrote it (an old or default table under the default), anything else is
// an error wrapping ErrInvalidArgument that names both comparers; so is
// Salvage.
func TestComparerMismatchRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	noSplit := *testcmp.Versioned
	noSplit.Split = nil
	renamed := *testcmp.Reverse
	renamed.Name = "vigil.test.Reverse2"
	for _, tc := range []struct {
		write, read *base.Comparer
		want        []string // in the error
	}{
		{testcmp.Reverse, nil, []string{testcmp.Reverse.Name, base.BytewiseComparerName}},
		{testcmp.Reverse, testcmp.Versioned, []string{testcmp.Reverse.Name, testcmp.Versioned.Name}},
		{testcmp.Reverse, &renamed, []string{testcmp.Reverse.Name, renamed.Name}},
		{nil, testcmp.Reverse, []string{base.BytewiseComparerName, testcmp.Reverse.Name}},
		{testcmp.Versioned, &noSplit, []string{"prefix bloom filter", testcmp.Versioned.Name}},
	} {
		t.Run(fmt.Sprintf("%s-as-%s", tc.write.Resolve().Name, tc.read.Resolve().Name), func(t *testing.T) {
			o := testWriterOptions(checksum.XXH3, SnappyCompression, 256)
			o.Comparer = tc.write
			data, _ := build(t, o, genCmpSpec(rng, tc.write.Resolve(), 300, 3))
			r, err := openBytes(data, ReaderOptions{Comparer: tc.read})
			if err == nil {
				r.Close()
			}
			if !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrCorruption) {
				t.Fatalf("Open = %v, want ErrInvalidArgument", err)
			}
			for _, s := range append(tc.want, "t.sst") {
				if !strings.Contains(err.Error(), s) {
					t.Fatalf("error %q does not name %q", err, s)
				}
			}
			if tc.read.Resolve().Split == nil && tc.write.Resolve().Split != nil {
				return // Salvage needs no Split
			}
			if _, _, err := salvageBytes(t, data, ReaderOptions{Comparer: tc.read}); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("Salvage = %v, want ErrInvalidArgument", err)
			}
		})
	}
	// A comparer that Check refuses is refused by the writer, Open and
	// Salvage alike.
	bad := &base.Comparer{Compare: bytes.Compare}
	if _, _, err := buildBytes(WriterOptions{Comparer: bad}, tableSpec{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("writer with a nameless comparer: %v", err)
	}
	data, _ := build(t, testWriterOptions(checksum.XXH3, NoCompression, 256), genSpec(rng, 50, 5, 5, 0))
	if _, err := openBytes(data, ReaderOptions{Comparer: bad}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Open with a nameless comparer: %v", err)
	}
	if _, _, err := salvageBytes(t, data, ReaderOptions{Comparer: bad}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Salvage with a nameless comparer: %v", err)
	}
}

// TestOldTablesAreBytewise: the golden tables, written before comparers,
// have no comparer property and read as the default comparer's, with or
// without ReaderOptions.Comparer set to it; their properties render as
// before (TestGolden pins that).
func TestOldTablesAreBytewise(t *testing.T) {
	data := readFile(t, vfs.Default, "testdata/golden-xxh3-snappy.sst")
	if bytes.Contains(data, []byte(comparerProp.name)) || bytes.Contains(data, []byte("vigil.filter.prefix")) {
		t.Fatal("a golden table holds a comparer or prefix-filter property")
	}
	for _, c := range []*base.Comparer{nil, base.DefaultComparer} {
		r := mustOpen(t, data, ReaderOptions{Comparer: c})
		if p := r.Properties(); p.ComparerName != base.BytewiseComparerName || p.PrefixFilter {
			t.Fatalf("old table reads as comparer %q, prefix filter %v", p.ComparerName, p.PrefixFilter)
		}
		if err := r.Verify(); err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
}

// TestWriterOrderUnderComparer: the writer checks the order of points and
// tombstones, and that a tombstone is not empty, under its comparer: what
// is ascending bytewise is out of order under Reverse.
func TestWriterOrderUnderComparer(t *testing.T) {
	a, b := base.MakeInternalKey([]byte("a"), 1, base.KindSet), base.MakeInternalKey([]byte("b"), 1, base.KindSet)
	for _, tc := range []struct {
		name string
		spec tableSpec
		want error
	}{
		{"points-ascending-bytewise", tableSpec{points: []kv{{a, nil}, {b, nil}}}, ErrCorruption},
		{"tombstone-ascending-bytewise", tableSpec{tombs: []base.RangeTombstone{{Start: []byte("a"), End: []byte("b"), Seq: 1}}}, ErrInvalidArgument},
		{"tombstones-out-of-order", tableSpec{tombs: []base.RangeTombstone{
			{Start: []byte("b"), End: []byte("a"), Seq: 1}, {Start: []byte("c"), End: []byte("a"), Seq: 1}}}, ErrCorruption},
		{"points-descending-bytewise", tableSpec{points: []kv{{b, nil}, {a, nil}}}, nil},
		{"tombstone-descending-bytewise", tableSpec{tombs: []base.RangeTombstone{{Start: []byte("b"), End: []byte("a"), Seq: 1}}}, nil},
	} {
		o := testWriterOptions(checksum.XXH3, NoCompression, 256)
		o.Comparer = testcmp.Reverse
		_, _, err := buildBytes(o, tc.spec)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// A Split that answers outside the key is refused, not obeyed.
	bad := *testcmp.Versioned
	bad.Split = func(k []byte) int { return len(k) + 1 }
	o := testWriterOptions(checksum.XXH3, NoCompression, 256)
	o.Comparer = &bad
	if _, _, err := buildBytes(o, tableSpec{points: []kv{{a, nil}}}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Split out of range: %v", err)
	}
}

// propEntry is one entry of a properties block.
type propEntry struct{ name, value string }

// propEntries lists the entries encodeProperties writes for p.
func propEntries(p *Properties) []propEntry {
	var out []propEntry
	for _, f := range propFields {
		if !f.optional || f.present(p) {
			out = append(out, propEntry{f.name, string(f.encode(p, nil))})
		}
	}
	return out
}

func propsBlock(es []propEntry) []byte {
	var bw blockWriter
	bw.init(DefaultBlockRestartInterval)
	for _, e := range es {
		bw.add([]byte(e.name), []byte(e.value))
	}
	return bw.finish()
}

// TestComparerProperties: the comparer's name and the prefix-filter mark
// round-trip through the properties block, are absent for the default
// comparer and a whole-key filter (and then decode as bytewise and false),
// and a bad value or placement of either is refused.
func TestComparerProperties(t *testing.T) {
	p := Properties{NumEntries: 1, SmallestKey: base.MakeInternalKey([]byte("a"), 1, base.KindSet),
		LargestKey: base.MakeInternalKey([]byte("a"), 1, base.KindSet), ComparerName: "my.Order", PrefixFilter: true}
	withBoth := propEntries(&p)
	if withBoth[0].name != comparerProp.name || withBoth[0].value != "my.Order" {
		t.Fatalf("first property %+v", withBoth[0])
	}
	set := func(es []propEntry, name, value string) []propEntry {
		out := slices.Clone(es)
		for i := range out {
			if out[i].name == name {
				out[i].value = value
			}
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		entries    []propEntry
		wantErr    string
		wantName   string
		wantPrefix bool
	}{
		{"both", withBoth, "", "my.Order", true},
		{"default-and-whole-keys", propEntries(&Properties{NumEntries: 1, SmallestKey: p.SmallestKey, LargestKey: p.LargestKey}),
			"", base.BytewiseComparerName, false},
		{"bytewise-stored", set(withBoth, comparerProp.name, base.BytewiseComparerName), "", base.BytewiseComparerName, true},
		{"empty-name", set(withBoth, comparerProp.name, ""), "bad value for property rocksdb.comparator", "", false},
		{"prefix-0", set(withBoth, "vigil.filter.prefix", "\x00"), "bad value for property vigil.filter.prefix", "", false},
		{"prefix-2", set(withBoth, "vigil.filter.prefix", "\x02"), "bad value for property vigil.filter.prefix", "", false},
		{"prefix-trailing", set(withBoth, "vigil.filter.prefix", "\x01\x00"), "bad value for property vigil.filter.prefix", "", false},
		{"prefix-varint-cut", set(withBoth, "vigil.filter.prefix", "\x81"), "bad value for property vigil.filter.prefix", "", false},
		{"comparer-last", append(slices.Clone(withBoth[1:]), withBoth[0]), "unexpected property \"rocksdb.comparator\"", "", false},
		{"comparer-twice", append([]propEntry{withBoth[0]}, withBoth...), "unexpected property \"rocksdb.comparator\"", "", false},
	} {
		got, err := decodeProperties(propsBlock(tc.entries))
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr == "" && (got.ComparerName != tc.wantName || got.PrefixFilter != tc.wantPrefix):
			t.Errorf("%s: comparer %q prefix filter %v, want %q %v", tc.name, got.ComparerName, got.PrefixFilter, tc.wantName, tc.wantPrefix)
		}
	}
}

// TestComparerPropertyCorruptionAtOpen damages the comparer property of a
// table whose checksums cannot catch it (type None): Open reports
// corruption naming the file and the properties block's offset, never a
// panic; a name changed to another is a table of another comparer.
func TestComparerPropertyCorruptionAtOpen(t *testing.T) {
	o := testWriterOptions(checksum.None, NoCompression, 256)
	o.Comparer = testcmp.Reverse
	data, _ := build(t, o, genCmpSpec(newRand(5), testcmp.Reverse.Resolve(), 200, 2))
	ro := ReaderOptions{Comparer: testcmp.Reverse}
	r := mustOpen(t, data, ro)
	var propsOff uint64
	for _, b := range r.Layout() {
		if b.Kind == BlockKindProperties {
			propsOff = b.Offset
		}
	}
	r.Close()
	i := bytes.Index(data, []byte(comparerProp.name+testcmp.Reverse.Name))
	if i < 3 || uint64(i) < propsOff {
		t.Fatalf("comparer property not found in the properties block (at %d, block at %d)", i, propsOff)
	}
	vlen := i - 1 // the entry's header: shared, unshared, value length
	for _, tc := range []struct {
		name string
		edit func(b []byte)
		want error
	}{
		{"empty-value", func(b []byte) { b[vlen] = 0 }, ErrCorruption},
		{"value-past-block", func(b []byte) { b[vlen] = 0xff }, ErrCorruption},
		{"key-length", func(b []byte) { b[vlen-1] = 0x7f }, ErrCorruption},
		{"other-name", func(b []byte) { b[i+len(comparerProp.name)] = 'w' }, ErrInvalidArgument},
	} {
		bad := bytes.Clone(data)
		tc.edit(bad)
		r, err := openBytes(bad, ro)
		if err == nil {
			r.Close()
		}
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: Open = %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == ErrCorruption && !strings.Contains(err.Error(), fmt.Sprintf("t.sst (file 000000), properties block at offset %d", propsOff)) {
			t.Fatalf("%s: %v does not name the file and the block", tc.name, err)
		}
	}
}

// TestExternalUnderComparer: an external table's promises (one entry per
// user key, tombstones that do not overlap) are checked in its comparer's
// order by the writer, Open and Verify: disjoint tombstones under Reverse
// are accepted, overlapping ones refused.
func TestExternalUnderComparer(t *testing.T) {
	var spec tableSpec
	for i := 99; i >= 0; i-- {
		spec.points = append(spec.points, kv{base.MakeInternalKey(fmt.Appendf(nil, "key%03d", i), 0, base.KindSet), []byte("v")})
	}
	// Descending bytewise, so ascending and disjoint under Reverse:
	// [key090, key080), [key080, key070), [key050, key040).
	for _, b := range []int{90, 80, 50} {
		spec.tombs = append(spec.tombs, base.RangeTombstone{Start: fmt.Appendf(nil, "key%03d", b), End: fmt.Appendf(nil, "key%03d", b-10)})
	}
	o := externalOptions()
	o.Comparer = testcmp.Reverse
	data, _ := build(t, o, spec)
	r := mustOpen(t, data, ReaderOptions{Comparer: testcmp.Reverse, GlobalSeqNum: 7})
	defer r.Close()
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	if v, seq, _, found, err := r.Get([]byte("key042"), 7); !found || seq != 7 || string(v) != "v" || err != nil {
		t.Fatalf("Get = %q #%d %v %v", v, seq, found, err)
	}
	spec.tombs[1].End = []byte("key095") // [key080, key095) is empty under Reverse
	if _, _, err := buildBytes(o, spec); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("inverted tombstone: %v", err)
	}
	spec.tombs[1] = base.RangeTombstone{Start: []byte("key085"), End: []byte("key070")} // overlaps [key090, key080)
	if _, _, err := buildBytes(o, spec); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("overlapping tombstones: %v", err)
	}
}
