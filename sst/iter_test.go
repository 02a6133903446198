package sst

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// modelIter is the specification of a bounded table iterator: a position in
// the entries that are within bounds.
type modelIter struct {
	cmp *base.Comparer // resolved; the keys' order
	kvs []kv
	pos int // -1 or len(kvs) when invalid
}

func (m *modelIter) valid() bool { return m.pos >= 0 && m.pos < len(m.kvs) }

func (m *modelIter) seekGE(k []byte) {
	m.pos = 0
	for m.pos < len(m.kvs) && m.cmp.Compare(m.kvs[m.pos].key.UserKey, k) < 0 {
		m.pos++
	}
}

func (m *modelIter) seekLT(k []byte) {
	m.pos = len(m.kvs) - 1
	for m.pos >= 0 && m.cmp.Compare(m.kvs[m.pos].key.UserKey, k) >= 0 {
		m.pos--
	}
}

func randSeekKey(rng *rand.Rand, spec tableSpec) []byte {
	if len(spec.points) > 0 && rng.IntN(2) == 0 {
		k := spec.points[rng.IntN(len(spec.points))].key.UserKey
		switch rng.IntN(3) {
		case 0:
			return k
		case 1:
			return k[:rng.IntN(len(k)+1)]
		default:
			return append(bytes.Clone(k), "abcxyz\x00\xff"[rng.IntN(8)])
		}
	}
	k := make([]byte, rng.IntN(6))
	for i := range k {
		k[i] = "abcdxyz\x00\xff"[rng.IntN(9)]
	}
	return k
}

// TestIterAgainstModel runs random operation sequences with random bounds on
// tables of several shapes, with and without a cache, and compares every
// step with the model.
func TestIterAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	n := 3000
	if testing.Short() {
		n = 800
	}
	for _, shape := range []struct {
		blockSize, restart int
		c                  Compression
	}{{64, 16, NoCompression}, {256, 4, SnappyCompression}, {4096, 16, SnappyCompression}, {1, 1, NoCompression}, {300, 2, NoCompression}} {
		spec := genSpec(rng, 600, 10, 30, 0)
		o := testWriterOptions(checksum.XXH3, shape.c, shape.blockSize)
		o.BlockRestartInterval = shape.restart
		data, _ := build(t, o, spec)
		for _, ro := range []ReaderOptions{{}, {Cache: wrapCache(newTestCache()), CacheID: 9}} {
			r := mustOpen(t, data, ro)
			for round := 0; round < 20; round++ {
				runIterModel(t, rng, r, spec, n/20)
			}
			r.Close()
		}
	}
}

// runIterModel opens an iterator over r with random bounds and runs ops
// random operations on it and on the model of spec, in r's order, which
// must agree at every step.
func runIterModel(t *testing.T, rng *rand.Rand, r *Reader, spec tableSpec, ops int) {
	t.Helper()
	var lower, upper []byte
	if rng.IntN(2) == 0 {
		lower = randSeekKey(rng, spec)
	}
	if rng.IntN(2) == 0 {
		upper = randSeekKey(rng, spec)
	}
	m := &modelIter{cmp: r.cmp, pos: -1}
	for _, e := range spec.points {
		if inBoundsCmp(r.cmp, e.key.UserKey, lower, upper) {
			m.kvs = append(m.kvs, e)
		}
	}
	it := r.NewIter(lower, upper)
	var trace []string
	for op := 0; op < ops; op++ {
		var got bool
		var desc string
		switch x := rng.IntN(10); {
		case x == 0:
			got, desc = it.First(), "First"
			m.pos = 0
		case x == 1:
			got, desc = it.Last(), "Last"
			m.pos = len(m.kvs) - 1
		case x == 2:
			k := randSeekKey(rng, spec)
			got, desc = it.SeekGE(k), fmt.Sprintf("SeekGE(%x)", k)
			m.seekGE(k)
		case x == 3:
			k := randSeekKey(rng, spec)
			got, desc = it.SeekLT(k), fmt.Sprintf("SeekLT(%x)", k)
			m.seekLT(k)
		case x < 7:
			if !m.valid() {
				continue
			}
			got, desc = it.Next(), "Next"
			m.pos++
		default:
			if !m.valid() {
				continue
			}
			got, desc = it.Prev(), "Prev"
			m.pos--
		}
		trace = append(trace, desc)
		if err := it.Error(); err != nil {
			t.Fatalf("%v after %v", err, trace)
		}
		if got != m.valid() || it.Valid() != got {
			t.Fatalf("bounds [%x, %x): valid=%v, model %v after %v", lower, upper, got, m.valid(), trace)
		}
		if got {
			w := m.kvs[m.pos]
			if it.Key().Trailer != w.key.Trailer || !bytes.Equal(it.Key().UserKey, w.key.UserKey) || !bytes.Equal(it.Value(), w.value) {
				t.Fatalf("bounds [%x, %x): at %s=%q, model %s=%q after %v", lower, upper, it.Key(), it.Value(), w.key, w.value, trace)
			}
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestIterBoundsSkipBlocks checks that a bounded scan of a large table
// touches only the blocks that can hold keys in bounds (the index
// separators decide), by counting cache misses.
func TestIterBoundsSkipBlocks(t *testing.T) {
	var spec tableSpec
	for i := 0; i < 2000; i++ {
		spec.points = append(spec.points, kv{base.MakeInternalKey([]byte(fmt.Sprintf("k%05d", i)), 1, base.KindSet), []byte("0123456789")})
	}
	data, _ := build(t, testWriterOptions(checksum.XXH3, NoCompression, 256), spec)
	c := newTestCache()
	r := mustOpen(t, data, ReaderOptions{Cache: wrapCache(c), CacheID: 1})
	defer r.Close()
	it := r.NewIter([]byte("k01000"), []byte("k01010"))
	got := collect(t, it, true)
	it.Close()
	if len(got) != 10 {
		t.Fatalf("%d entries in bounds", len(got))
	}
	// 10 entries of ~20 bytes fit in 1-2 blocks of 256 bytes; allow one
	// more for the block holding the first key at or past the bound.
	if misses := c.Metrics().Misses; misses > 3 {
		t.Fatalf("bounded scan read %d blocks", misses)
	}
}

func TestIterOnEmptyTable(t *testing.T) {
	data, _ := build(t, testWriterOptions(checksum.CRC32c, NoCompression, 4096), tableSpec{})
	r := mustOpen(t, data, ReaderOptions{})
	defer r.Close()
	it := r.NewIter(nil, nil)
	defer it.Close()
	if it.First() || it.Last() || it.SeekGE([]byte("a")) || it.SeekLT([]byte("a")) || it.Valid() || it.Error() != nil {
		t.Fatal("iterator over an empty table is valid")
	}
	if it.Next() || it.Prev() {
		t.Fatal("Next/Prev on an invalid iterator returned true")
	}
}
