package sst

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// externalSpec is a random external table: distinct user keys at seqnum 0,
// and disjoint tombstones at seqnum 0.
func externalSpec(rng *rand.Rand, n, nTombs int) tableSpec {
	var s tableSpec
	for i := 0; i < n; i++ {
		kind := base.KindSet
		var v []byte
		if rng.IntN(4) == 0 {
			kind = base.KindDelete
		} else {
			v = fmt.Appendf(nil, "value-%d-%d", i, rng.IntN(1000))
		}
		s.points = append(s.points, kv{base.MakeInternalKey(fmt.Appendf(nil, "key%06d", 2*i), 0, kind), v})
	}
	for i := 0; i < nTombs; i++ {
		lo := i * 10 * max(n, 1) / max(nTombs, 1)
		s.tombs = append(s.tombs, base.RangeTombstone{
			Start: fmt.Appendf(nil, "key%06d", lo), End: fmt.Appendf(nil, "key%06d", lo+3),
		})
	}
	return s
}

func externalOptions() WriterOptions {
	o := testWriterOptions(checksum.XXH3, SnappyCompression, 256)
	o.External = true
	return o
}

// An external table reads back as written; with a global seqnum every
// trailer carries it, Get at a lower snapshot finds nothing, and Verify
// (which checks the file, seqnum 0) still passes.
func TestExternalTableGlobalSeqNum(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	spec := externalSpec(rng, 500, 5)
	data, m := build(t, externalOptions(), spec)
	if m.SmallestSeq != 0 || m.LargestSeq != 0 {
		t.Fatalf("external table seqnums %d..%d", m.SmallestSeq, m.LargestSeq)
	}
	for _, gs := range []uint64{0, 1, 77, base.SeqNumMax} {
		t.Run(fmt.Sprint(gs), func(t *testing.T) {
			for _, c := range []bool{false, true} {
				o := ReaderOptions{GlobalSeqNum: gs}
				if c {
					o.Cache, o.CacheID = wrapCache(newTestCache()), 1
				}
				r := mustOpen(t, data, o)
				if !r.Properties().External || r.GlobalSeqNum() != gs {
					t.Fatalf("external=%v global=%d", r.Properties().External, r.GlobalSeqNum())
				}
				want := make([]kv, len(spec.points))
				for i, p := range spec.points {
					want[i] = kv{base.MakeInternalKey(p.key.UserKey, gs, p.key.Kind()), p.value}
				}
				for _, fwd := range []bool{true, false} {
					it := r.NewIter(nil, nil)
					if err := equalKVs(collect(t, it, fwd), want); err != nil {
						t.Fatalf("forward=%v: %v", fwd, err)
					}
					it.Close()
				}
				it := r.NewUncachedIter()
				if err := equalKVs(collect(t, it, true), want); err != nil {
					t.Fatalf("uncached: %v", err)
				}
				it.Close()
				for _, p := range spec.points[:50] {
					v, seq, kind, found, err := r.Get(p.key.UserKey, gs)
					if err != nil || !found || seq != gs || kind != p.key.Kind() || !bytes.Equal(v, p.value) {
						t.Fatalf("Get(%s) = %q, %d, %s, %v, %v", p.key.UserKey, v, seq, kind, found, err)
					}
					if gs > 0 {
						if _, _, _, found, err := r.Get(p.key.UserKey, gs-1); found || err != nil {
							t.Fatalf("Get(%s) below the global seqnum: found=%v err=%v", p.key.UserKey, found, err)
						}
					}
				}
				for i, rt := range r.RangeDels() {
					if rt.Seq != gs || !bytes.Equal(rt.Start, spec.tombs[i].Start) {
						t.Fatalf("tombstone %d: %+v", i, rt)
					}
				}
				if err := r.Verify(); err != nil {
					t.Fatal(err)
				}
				r.Close()
			}
		})
	}
}

// Only an external table takes a global seqnum.
func TestGlobalSeqNumNeedsExternal(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	data, _ := build(t, testWriterOptions(checksum.XXH3, NoCompression, 512), genSpec(rng, 50, 6, 10, 1))
	if _, err := openBytes(data, ReaderOptions{GlobalSeqNum: 5}); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("global seqnum on a DB table: %v", err)
	}
	data, _ = build(t, externalOptions(), externalSpec(rng, 10, 0))
	if _, err := openBytes(data, ReaderOptions{GlobalSeqNum: base.SeqNumMax + 1}); !errors.Is(err, base.ErrInvalidArgument) {
		t.Fatalf("global seqnum over the maximum: %v", err)
	}
}

// The writer keeps what an external table promises.
func TestExternalWriterRefuses(t *testing.T) {
	add := func(w *Writer, k string, seq uint64, kind base.Kind) error {
		return w.Add(base.MakeInternalKey([]byte(k), seq, kind), nil)
	}
	cases := []struct {
		name string
		run  func(w *Writer) error
	}{
		{"seqnum", func(w *Writer) error { return add(w, "a", 1, base.KindSet) }},
		{"duplicate user key", func(w *Writer) error {
			if err := add(w, "a", 0, base.KindSet); err != nil {
				return err
			}
			return add(w, "a", 0, base.KindDelete)
		}},
		{"tombstone seqnum", func(w *Writer) error { return w.AddRangeDel([]byte("a"), []byte("b"), 3) }},
		{"overlapping tombstones", func(w *Writer) error {
			if err := w.AddRangeDel([]byte("a"), []byte("c"), 0); err != nil {
				return err
			}
			return w.AddRangeDel([]byte("b"), []byte("d"), 0)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := vfs.NewMem().Create("x.sst")
			if err != nil {
				t.Fatal(err)
			}
			w := NewWriter(f, externalOptions())
			if err := c.run(w); !errors.Is(err, base.ErrInvalidArgument) {
				t.Fatalf("got %v, want ErrInvalidArgument", err)
			}
			w.Abort()
		})
	}
	// Adjacent tombstones are fine.
	f, _ := vfs.NewMem().Create("x.sst")
	w := NewWriter(f, externalOptions())
	if err := w.AddRangeDel([]byte("a"), []byte("b"), 0); err != nil {
		t.Fatal(err)
	}
	if err := w.AddRangeDel([]byte("b"), []byte("c"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// buildMarkedExternal writes spec as a DB table and marks it external only
// in its properties: a table that breaks the external promises without
// failing a checksum, as a buggy or hostile writer could make one.
func buildMarkedExternal(t *testing.T, spec tableSpec) []byte {
	t.Helper()
	fs := vfs.NewMem()
	f, err := fs.Create("t.sst")
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(f, testWriterOptions(checksum.CRC32c, NoCompression, 128))
	for _, e := range spec.points {
		if err := w.Add(e.key, e.value); err != nil {
			t.Fatal(err)
		}
	}
	for _, rt := range spec.tombs {
		if err := w.AddRangeDel(rt.Start, rt.End, rt.Seq); err != nil {
			t.Fatal(err)
		}
	}
	w.o.External = true
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return readFile(t, fs, "t.sst")
}

// Open refuses an external table with seqnums or overlapping tombstones,
// Verify one with two entries for a user key.
func TestExternalTableChecks(t *testing.T) {
	k := func(s string, seq uint64, kind base.Kind) kv {
		return kv{key: base.MakeInternalKey([]byte(s), seq, kind)}
	}
	atOpen := map[string]tableSpec{
		"point seqnum": {points: []kv{k("a", 0, base.KindSet), k("b", 4, base.KindSet)}},
		"tomb seqnum":  {tombs: []base.RangeTombstone{{Start: []byte("a"), End: []byte("b"), Seq: 2}}},
		"overlap": {tombs: []base.RangeTombstone{
			{Start: []byte("a"), End: []byte("c")}, {Start: []byte("b"), End: []byte("d")}}},
	}
	for name, spec := range atOpen {
		data := buildMarkedExternal(t, spec)
		if _, err := openBytes(data, ReaderOptions{}); !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%s: Open = %v, want ErrCorruption", name, err)
		}
	}
	var pts []kv
	for i := 0; i < 40; i++ {
		pts = append(pts, k(fmt.Sprintf("k%03d", i), 0, base.KindSet))
	}
	pts = append(pts, k("k039", 0, base.KindDelete)) // SET then DEL at seq 0: in internal order
	data := buildMarkedExternal(t, tableSpec{points: pts})
	r := mustOpen(t, data, ReaderOptions{GlobalSeqNum: 9})
	defer r.Close()
	if err := r.Verify(); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("Verify of an external table with a repeated user key = %v", err)
	}
}

// The external property is optional: a DB table's properties block is what
// it was (the golden files pin that), and the property's value must be 1.
func TestExternalProperty(t *testing.T) {
	p := Properties{NumEntries: 1, SmallestKey: base.MakeInternalKey([]byte("a"), 0, base.KindSet),
		LargestKey: base.MakeInternalKey([]byte("a"), 0, base.KindSet), External: true}
	got, err := decodeProperties(encodeProperties(&p))
	if err != nil || !got.External {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	p.External = false
	plain := encodeProperties(&p)
	// (Keys are prefix-compressed: "vigil." is shared with the previous one.)
	if bytes.Contains(plain, []byte("external")) {
		t.Fatal("a table that is not external stores the property")
	}
	if got, err := decodeProperties(plain); err != nil || got.External {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	p.External = true
	bad := encodeProperties(&p)
	i := bytes.Index(bad, []byte("external"))
	bad[i+len("external")] = 2 // the value byte
	if _, err := decodeProperties(bad); err == nil {
		t.Fatal("external = 2 accepted")
	}
}
