package sst

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// checkTable checks everything observable about a table against its spec.
func checkTable(t *testing.T, data []byte, m *Meta, spec tableSpec, o WriterOptions, ro ReaderOptions) {
	t.Helper()
	r := mustOpen(t, data, ro)
	defer r.Close()
	if err := r.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	p := r.Properties()
	if p.NumEntries != uint64(len(spec.points)) || m.NumEntries != p.NumEntries {
		t.Fatalf("entries: props %d meta %d, want %d", p.NumEntries, m.NumEntries, len(spec.points))
	}
	if p.NumRangeDels != uint64(len(spec.tombs)) || m.NumRangeDels != p.NumRangeDels {
		t.Fatalf("range dels: props %d meta %d, want %d", p.NumRangeDels, m.NumRangeDels, len(spec.tombs))
	}
	// The table records what the options mean (Default is XXH3).
	if ct := o.ChecksumType.Resolve(); p.ChecksumType != ct || r.ChecksumType() != ct || m.ChecksumType != ct {
		t.Fatalf("checksum type %s/%s/%s, want %s", p.ChecksumType, r.ChecksumType(), m.ChecksumType, ct)
	}
	if p.Compression != o.Compression.Resolve() {
		t.Fatalf("compression %s, want %s", p.Compression, o.Compression.Resolve())
	}
	if p.FileChecksum != m.FileChecksum || (o.ChecksumType != checksum.None) != (m.FileChecksum != 0) {
		t.Fatalf("file checksum props 0x%x meta 0x%x (type %s)", p.FileChecksum, m.FileChecksum, o.ChecksumType)
	}
	if o.ChecksumType != checksum.None {
		// The documented definition: Sum64 over every byte before the
		// properties block.
		var propsOff uint64
		for _, b := range r.Layout() {
			if b.Kind == BlockKindProperties {
				propsOff = b.Offset
			}
		}
		if want := checksum.Sum64(o.ChecksumType, data[:propsOff]); m.FileChecksum != want {
			t.Fatalf("file checksum 0x%x, Sum64 over [0,%d) = 0x%x", m.FileChecksum, propsOff, want)
		}
	}
	// Bounds and seqnums over points and tombstones.
	var want []base.InternalKey
	var seqs []uint64
	for _, e := range spec.points {
		want = append(want, e.key)
		seqs = append(seqs, e.key.SeqNum())
	}
	for _, rt := range spec.tombs {
		want = append(want, base.MakeInternalKey(rt.Start, rt.Seq, base.KindRangeDelete),
			base.MakeInternalKey(rt.End, base.SeqNumMax, base.KindRangeDelete))
		seqs = append(seqs, rt.Seq)
	}
	if len(want) > 0 {
		slices.SortFunc(want, base.CompareInternal)
		if base.CompareInternal(m.Smallest, want[0]) != 0 || base.CompareInternal(m.Largest, want[len(want)-1]) != 0 {
			t.Fatalf("bounds [%s, %s], want [%s, %s]", m.Smallest, m.Largest, want[0], want[len(want)-1])
		}
		if m.SmallestSeq != slices.Min(seqs) || m.LargestSeq != slices.Max(seqs) {
			t.Fatalf("seqs [%d, %d], want [%d, %d]", m.SmallestSeq, m.LargestSeq, slices.Min(seqs), slices.Max(seqs))
		}
	} else if m.Smallest.UserKey != nil || m.Largest.UserKey != nil || m.SmallestSeq != 0 || m.LargestSeq != 0 {
		t.Fatalf("empty table has bounds %+v", m)
	}
	if !slices.EqualFunc(r.RangeDels(), spec.tombs, func(a, b base.RangeTombstone) bool {
		return bytes.Equal(a.Start, b.Start) && bytes.Equal(a.End, b.End) && a.Seq == b.Seq
	}) {
		t.Fatalf("range dels %v, want %v", r.RangeDels(), spec.tombs)
	}
	// Full scans both ways.
	for _, fwd := range []bool{true, false} {
		it := r.NewIter(nil, nil)
		got := collect(t, it, fwd)
		if err := equalKVs(got, spec.points); err != nil {
			t.Fatalf("scan (forward=%v): %v", fwd, err)
		}
		it.Close()
	}
	// Get of every user key at a few snapshots, and of absent keys.
	rng := rand.New(rand.NewPCG(3, 4))
	for _, e := range spec.points {
		for _, snap := range []uint64{e.key.SeqNum(), e.key.SeqNum() - 1, base.SeqNumMax, uint64(rng.IntN(3000))} {
			checkGet(t, r, spec.points, e.key.UserKey, snap)
		}
		if !r.MayContain(e.key.UserKey) {
			t.Fatalf("MayContain(%s) = false for a present key", base.HexKey(e.key.UserKey))
		}
	}
	for _, k := range []string{"", "\x00", "b", "zzzzzzzz", "\xff\xff\xff\xff\xff"} {
		checkGet(t, r, spec.points, []byte(k), base.SeqNumMax)
	}
}

func checkGet(t *testing.T, r *Reader, points []kv, ukey []byte, snap uint64) {
	t.Helper()
	v, seq, kind, found, err := r.Get(ukey, snap)
	if err != nil {
		t.Fatalf("Get(%s, %d): %v", base.HexKey(ukey), snap, err)
	}
	w, wfound := modelGet(points, ukey, snap)
	if found != wfound {
		t.Fatalf("Get(%s, %d): found=%v, want %v", base.HexKey(ukey), snap, found, wfound)
	}
	if found && (seq != w.key.SeqNum() || kind != w.key.Kind() || !bytes.Equal(v, w.value)) {
		t.Fatalf("Get(%s, %d) = %q #%d %s, want %q #%d %s", base.HexKey(ukey), snap, v, seq, kind, w.value, w.key.SeqNum(), w.key.Kind())
	}
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	specs := map[string]tableSpec{
		"random":      genSpec(rng, 400, 12, 40, 5),
		"empty":       {},
		"tombs-only":  genSpec(rng, 0, 1, 1, 8),
		"one-key":     {points: []kv{{base.MakeInternalKey([]byte("k"), 5, base.KindSet), []byte("v")}}},
		"big-entries": bigEntries(rng),
	}
	blockSizes := []int{1, 64, 512, 4096}
	if testing.Short() || raceEnabled {
		blockSizes = []int{64, 4096}
	}
	for name, spec := range specs {
		for ct := checksum.Default; ct < checksum.NumTypes; ct++ {
			for _, c := range []Compression{NoCompression, SnappyCompression, ZstdCompression} {
				for _, bs := range blockSizes {
					t.Run(fmt.Sprintf("%s/%s/%s/%d", name, ct, c, bs), func(t *testing.T) {
						o := testWriterOptions(ct, c, bs)
						if bs == 512 {
							o.BloomBitsPerKey = 0
							o.BlockRestartInterval = 1
						}
						data, m := build(t, o, spec)
						checkTable(t, data, m, spec, o, ReaderOptions{FileNum: 7})
						checkTable(t, data, m, spec, o, ReaderOptions{FileNum: 7, Cache: wrapCache(newTestCache()), CacheID: 1, ParanoidCacheChecks: true})
					})
				}
			}
		}
	}
}

// bigEntries has keys and values larger than any block size used.
func bigEntries(rng *rand.Rand) tableSpec {
	var s tableSpec
	for i := 0; i < 6; i++ {
		k := bytes.Repeat([]byte{byte('a' + i)}, 5000+rng.IntN(100))
		v := make([]byte, 9000)
		for j := range v {
			v[j] = byte(rng.IntN(256))
		}
		s.points = append(s.points, kv{base.MakeInternalKey(k, uint64(10+i), base.KindSet), v})
	}
	return s
}

func TestWriterRejectsBadInput(t *testing.T) {
	newW := func() *Writer {
		f, _ := testFS().Create("x")
		return NewWriter(f, testWriterOptions(checksum.XXH3, NoCompression, 4096))
	}
	k := func(s string, seq uint64) base.InternalKey { return base.MakeInternalKey([]byte(s), seq, base.KindSet) }

	w := newW()
	defer w.Abort() // writers left open would release their hashes at some later collection
	if err := w.Add(k("b", 5), nil); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []base.InternalKey{k("a", 9), k("b", 5), k("b", 6)} {
		w2 := newW()
		w2.Add(k("b", 5), nil)
		err := w2.Add(bad, nil)
		if !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("out-of-order Add(%s) = %v, want ErrCorruption", bad, err)
		}
		if !bytes.Contains([]byte(err.Error()), []byte(base.HexKey(bad.UserKey))) || !bytes.Contains([]byte(err.Error()), []byte("62#5")) {
			t.Fatalf("error does not name both keys: %v", err)
		}
		// Sticky: later calls fail too, Close fails and leaves no table.
		if err2 := w2.Add(k("c", 1), nil); !errors.Is(err2, base.ErrCorruption) {
			t.Fatalf("after error, Add = %v", err2)
		}
		if _, err2 := w2.Close(); err2 == nil {
			t.Fatal("Close succeeded after an error")
		}
	}
	w3 := newW()
	defer w3.Abort()
	if err := w3.Add(base.MakeInternalKey([]byte("a"), 1, base.KindRangeDelete), nil); !errors.Is(err, base.ErrInvalidArgument) {
		t.Fatalf("Add(RANGEDEL) = %v", err)
	}
	w4 := newW()
	defer w4.Abort()
	if err := w4.AddRangeDel([]byte("b"), []byte("a"), 1); !errors.Is(err, base.ErrInvalidArgument) {
		t.Fatalf("inverted range = %v", err)
	}
	w5 := newW()
	defer w5.Abort()
	w5.AddRangeDel([]byte("b"), []byte("c"), 5)
	if err := w5.AddRangeDel([]byte("b"), []byte("d"), 6); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("out-of-order range del = %v", err)
	}
	w6 := NewWriter(nil, WriterOptions{ChecksumType: 99})
	if err := w6.Add(k("a", 1), nil); !errors.Is(err, base.ErrInvalidArgument) {
		t.Fatalf("bad options: %v", err)
	}
	w7 := newW()
	w7.Abort()
	if err := w7.Add(k("a", 1), nil); err == nil {
		t.Fatal("Add after Abort succeeded")
	}
	w7.Abort() // idempotent
}

func TestEstimatedSize(t *testing.T) {
	for _, c := range []Compression{NoCompression, SnappyCompression, ZstdCompression} {
		f, _ := testFS().Create("x")
		w := NewWriter(f, testWriterOptions(checksum.XXH3, c, 4096))
		for i := 0; i < 5000; i++ {
			w.Add(base.MakeInternalKey([]byte(fmt.Sprintf("key%08d", i)), 1, base.KindSet), bytes.Repeat([]byte{byte(i)}, 50))
		}
		est := w.EstimatedSize()
		m, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		if est < m.Size*8/10 || est > m.Size*12/10 {
			t.Fatalf("%s: estimate %d before Close, final size %d", c, est, m.Size)
		}
	}
}
