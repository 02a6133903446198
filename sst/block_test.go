package sst

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vigildb/vigil/checksum"
)

// buildBlock encodes sorted byte keys (not internal keys) with values.
func buildBlock(keys [][]byte, restart int) []byte {
	var bw blockWriter
	bw.init(restart)
	for i, k := range keys {
		bw.add(k, []byte(fmt.Sprintf("v%d", i)))
	}
	return bytes.Clone(bw.finish())
}

func randKeys(rng *rand.Rand, n int) [][]byte {
	set := map[string]bool{}
	for len(set) < n {
		k := make([]byte, rng.IntN(8))
		for i := range k {
			k[i] = "aab\x00\xff"[rng.IntN(5)]
		}
		set[string(k)] = true
	}
	var keys [][]byte
	for k := range set {
		keys = append(keys, []byte(k))
	}
	slices.SortFunc(keys, bytes.Compare)
	return keys
}

// TestBlockIterAgainstModel covers every positioning method of blockIter on
// blocks of several restart intervals, including the reverse cache.
func TestBlockIterAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 2, 17, 100} {
		for _, restart := range []int{1, 2, 3, 16, 1000} {
			keys := randKeys(rng, n)
			b := buildBlock(keys, restart)
			var it blockIter
			if err := it.init(b, false); err != nil {
				t.Fatal(err)
			}
			// Forward and backward full scans.
			var fwd, bwd [][]byte
			for ok := it.first(); ok; ok = it.next() {
				fwd = append(fwd, bytes.Clone(it.key))
			}
			for ok := it.last(); ok; ok = it.prev() {
				bwd = append(bwd, bytes.Clone(it.key))
			}
			slices.Reverse(bwd)
			if it.err != nil || !slices.EqualFunc(fwd, keys, bytes.Equal) || !slices.EqualFunc(bwd, keys, bytes.Equal) {
				t.Fatalf("n=%d restart=%d: scans differ (err %v)", n, restart, it.err)
			}
			for j := 0; j < 200; j++ {
				target := randKeys(rng, 1)[0]
				ge, _ := slices.BinarySearchFunc(keys, target, bytes.Compare)
				ok := it.seekGE(target, 0)
				if ok != (ge < len(keys)) || ok && (!bytes.Equal(it.key, keys[ge]) || string(it.val) != fmt.Sprintf("v%d", ge)) {
					t.Fatalf("seekGE(%x) = %v %x, want index %d", target, ok, it.key, ge)
				}
				lt := ge - 1
				ok = it.seekLT(target, 0)
				if ok != (lt >= 0) || ok && !bytes.Equal(it.key, keys[lt]) {
					t.Fatalf("seekLT(%x) = %v %x, want index %d", target, ok, it.key, lt)
				}
				// Wander from there, mixing directions across the cache.
				pos := lt
				for s := 0; s < 10 && pos >= 0 && pos < len(keys); s++ {
					if rng.IntN(2) == 0 {
						ok, pos = it.next(), pos+1
					} else {
						ok, pos = it.prev(), pos-1
					}
					if ok != (pos >= 0 && pos < len(keys)) || ok && (!bytes.Equal(it.key, keys[pos]) || string(it.val) != fmt.Sprintf("v%d", pos)) {
						t.Fatalf("n=%d restart=%d: step to %d gave %v %x", n, restart, pos, ok, it.key)
					}
				}
			}
		}
	}
}

func TestBlockRejectsBadFrames(t *testing.T) {
	good := buildBlock([][]byte{[]byte("a"), []byte("b")}, 1)
	cases := map[string][]byte{
		"too short":         {1, 0},
		"restarts too many": {0xff, 0xff, 0xff, 0x0f},
		"no restarts":       append([]byte{0, 1, 0, 'a'}, 0, 0, 0, 0),
		"restart0 not zero": func() []byte {
			b := bytes.Clone(good)
			binary.LittleEndian.PutUint32(b[len(b)-12:], 1)
			return b
		}(),
	}
	for name, b := range cases {
		var it blockIter
		if err := it.init(b, false); err == nil {
			t.Errorf("%s: init accepted %x", name, b)
		}
	}
	// Entry-level problems surface as iterator errors, not panics.
	entries := map[string][]byte{
		"shared at restart":  {1, 1, 0, 'a'},
		"key past end":       {0, 9, 0, 'a'},
		"value past end":     {0, 1, 9, 'a'},
		"bad varint":         {0x80, 0x80, 0x80, 0x80, 0x80, 0x80},
		"short internal key": {0, 1, 0, 'a'},
	}
	for name, e := range entries {
		b := append(bytes.Clone(e), 0, 0, 0, 0, 1, 0, 0, 0)
		var it blockIter
		if err := it.init(b, name == "short internal key"); err != nil {
			t.Fatalf("%s: init: %v", name, err)
		}
		if it.first() || it.err == nil {
			t.Errorf("%s: first() = true or no error", name)
		}
		if it.last() || it.err == nil {
			t.Errorf("%s: last() = true or no error", name)
		}
		if it.seekGE([]byte("a"), 0) || it.err == nil {
			t.Errorf("%s: seekGE = true or no error", name)
		}
	}
}

func TestFilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, bits := range []int{1, 5, 10, 20} {
		var hashes []uint64
		var keys [][]byte
		for i := 0; i < 10000; i++ {
			k := []byte(fmt.Sprintf("key-%d-%d", i, rng.Int()))
			keys = append(keys, k)
			hashes = append(hashes, filterHash(k))
		}
		f, err := decodeFilter(buildFilter(nil, hashes, bits))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if !f.mayContain(filterHash(k)) {
				t.Fatalf("bits=%d: false negative for %q", bits, k)
			}
		}
		fp := 0
		const probes = 20000
		for i := 0; i < probes; i++ {
			if f.mayContain(filterHash([]byte(fmt.Sprintf("absent-%d", i)))) {
				fp++
			}
		}
		rate := float64(fp) / probes
		t.Logf("bits/key %d: false-positive rate %.2f%%", bits, 100*rate)
		// Statistical, deterministic for these inputs: 10 bits/key must be
		// near the ~1% a blocked bloom filter gives.
		if bits == 10 && rate > 0.02 {
			t.Fatalf("false-positive rate %.3f with 10 bits/key", rate)
		}
	}
	// An empty filter matches nothing.
	f, err := decodeFilter(buildFilter(nil, nil, 10))
	if err != nil || f.mayContain(filterHash([]byte("x"))) {
		t.Fatalf("empty filter: %v", err)
	}
	for _, bad := range [][]byte{{}, {1, 2}, {0, 1, 0, 0, 0}, append(make([]byte, 64), 31, 1, 0, 0, 0), append(make([]byte, 64), 6, 2, 0, 0, 0)} {
		if _, err := decodeFilter(bad); err == nil {
			t.Errorf("decodeFilter accepted %x", bad)
		}
	}
}

// TestTrailerChecksumIsBlock pins that the reader's trailer check is
// checksum.Block over the block and its compression byte.
func TestTrailerChecksumIsBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 3))
	for ct := checksum.Default; ct < checksum.NumTypes; ct++ {
		for _, n := range []int{0, 1, 15, 16, 31, 32, 100, 4096} {
			b := make([]byte, n+1)
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			if got, want := trailerChecksum(ct, b), checksum.Block(ct, b[:n], b[n]); got != want {
				t.Fatalf("%s n=%d: %08x != %08x", ct, n, got, want)
			}
		}
	}
}

// TestFileHasherIsSum64 checks the streaming whole-file checksum against
// checksum.Sum64 for every type, fed in random pieces.
func TestFileHasherIsSum64(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	for ct := checksum.Default; ct < checksum.NumTypes; ct++ {
		for _, n := range []int{0, 1, 3, 15, 16, 17, 33, 100, 1000, 70000} {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			h := newFileHasher(ct)
			rest := b
			for len(rest) > 0 {
				k := min(len(rest), rng.IntN(40))
				h.write(rest[:k])
				rest = rest[k:]
			}
			if got, want := h.sum64(), checksum.Sum64(ct, b); got != want {
				t.Fatalf("%s n=%d: %016x != %016x", ct, n, got, want)
			}
		}
	}
}

// TestSnappyExpansionBound checks that the reader's bound on a snappy
// block's declared length admits the most compressible input there is.
func TestSnappyExpansionBound(t *testing.T) {
	for _, n := range []int{1, 100, 4096, 1 << 20} {
		raw := make([]byte, n)
		var w Writer
		w.o.Compression = SnappyCompression
		c, typ := w.compress(raw, true)
		if typ != SnappyCompression {
			continue
		}
		if n > maxSnappyExpansion*len(c) {
			t.Fatalf("%d zero bytes compress to %d: ratio above %d", n, len(c), maxSnappyExpansion)
		}
	}
}

func TestHandleDecoding(t *testing.T) {
	h := handle{offset: 1 << 40, size: 300}
	got, ok := decodeHandle(appendHandle(nil, h))
	if !ok || got != h {
		t.Fatalf("round trip: %v %v", got, ok)
	}
	for _, bad := range [][]byte{{}, {0x80}, {1}, {1, 2, 3}, {1, 0x80}} {
		if _, ok := decodeHandle(bad); ok {
			t.Errorf("decodeHandle accepted %x", bad)
		}
	}
}
