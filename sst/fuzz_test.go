package sst

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/cache"
)

// The fuzz targets feed arbitrary bytes to every decoder of on-disk data.
// The property is always the same: no panic, no hang, no allocation beyond
// the bounds documented in the package comment (checked: see checkAlloc),
// and every error wraps base.ErrCorruption. Seed corpora are committed in
// testdata/fuzz/<Name>/ (regenerate with go test -run TestWriteFuzzSeeds
// -write-fuzz-seeds); most seeds use checksum type None so mutations reach
// the decoders instead of stopping at a checksum, and the "shared-*" and
// "prefix-chain-*" seeds are the prefix-compression amplification attacks
// of alloc_test.go.

// Every decoder allocates at most allocAmp times the bytes it decodes, plus
// allocSlack for fixed costs (error messages, the footer, pools). The
// largest factor a valid input reaches is the range-del block's: start keys
// up to 16 times the block and 56 bytes of RangeTombstone per 5-byte entry.
const (
	allocAmp   = 32
	allocSlack = 64 << 10
)

// checkAlloc fails t if f allocated more than allocAmp×n + allocSlack bytes.
func checkAlloc(t *testing.T, what string, n uint64, f func()) {
	t.Helper()
	got := allocBytes(f)
	if limit := allocAmp*n + allocSlack; got > limit {
		t.Fatalf("%s of %d bytes allocated %d bytes, over the limit of %d", what, n, got, limit)
	}
}

// craftSeedN is the size of the amplification attacks in the seed corpus:
// large enough that the old quadratic decoders break checkAlloc's bound,
// small enough to keep the corpus files small.
const craftSeedN = 2000

// FuzzBlock decodes arbitrary bytes as a block (with and without the
// internal-key requirement) through every positioning method.
func FuzzBlock(f *testing.F) {
	f.Add(buildBlock(randKeys(newRand(1), 40), 4), true)
	f.Add(buildBlock(randKeys(newRand(2), 5), 1), false)
	for _, s := range craftedBlockSeeds() {
		f.Add(s.block, s.internal)
	}
	f.Fuzz(func(t *testing.T, b []byte, internal bool) {
		var it blockIter
		if it.init(b, internal) != nil {
			return
		}
		checkAlloc(t, "iterating a block", uint64(len(b)), func() {
			n := 0
			for ok := it.first(); ok && n < len(b); ok = it.next() {
				n++
			}
			n = 0
			for ok := it.last(); ok && n < len(b); ok = it.prev() {
				n++
			}
			for _, k := range []string{"", "a", "m", "\xff\xff"} {
				if it.seekGE([]byte(k), 0) {
					it.prev()
					it.next()
				}
				if it.seekLT([]byte(k), ^uint64(0)) {
					it.next()
					it.prev()
				}
			}
		})
	})
}

// FuzzOpen opens arbitrary bytes as a table, then verifies it, iterates it
// fully both ways and gets a few keys.
func FuzzOpen(f *testing.F) {
	for _, seed := range openSeeds() {
		f.Add(seed)
	}
	for _, s := range craftedOpenSeeds() {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r *Reader
		var err error
		var decoded uint64
		got := allocBytes(func() {
			r, decoded, err = open(vfs.NewMemFile(data), "t.sst", int64(len(data)), ReaderOptions{})
		})
		// What Open read and decompressed, not the file's size: a small
		// snappy block may legitimately decode to 22 times its size.
		if limit := allocAmp*decoded + allocSlack; got > limit {
			t.Fatalf("Open of %d bytes (%d read and decoded) allocated %d bytes, over the limit of %d", len(data), decoded, got, limit)
		}
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("Open error not corruption: %v", err)
			}
			return
		}
		defer r.Close()
		if err := r.Verify(); err != nil && !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("Verify error not corruption: %v", err)
		}
		exercise(r)
		it := r.NewIter(nil, nil)
		for ok := it.First(); ok; ok = it.Next() {
		}
		if err := it.Error(); err != nil && !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("iterator error not corruption: %v", err)
		}
		it.Close()
		for _, k := range []string{"key000", "key007", "key042", "b"} {
			if _, _, _, _, err := r.Get([]byte(k), base.SeqNumMax); err != nil && !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("Get error not corruption: %v", err)
			}
		}
		fuzzCached(t, data)
	})
}

// fuzzCached reads a table that opened without error through the block
// cache (paranoid checks on): the miss path decodes into the cache's
// manual memory, and every reference taken on any path, corrupt blocks
// included, must be released once the reader is closed.
//
// Each input gets a fresh cache: with one shared cache, how many blocks it
// evicts and which chunks it maps would differ from one run of an input to
// the next, and the fuzzer would see new coverage (hit counts) every time.
func fuzzCached(t *testing.T, data []byte) {
	c := cache.New(1 << 20)
	r, err := Open(vfs.NewMemFile(data), "t.sst", int64(len(data)), ReaderOptions{Cache: wrapCache(c), CacheID: 1, ParanoidCacheChecks: true})
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	for pass := 0; pass < 2; pass++ { // misses, then hits
		it := r.NewIter(nil, nil)
		for ok := it.Last(); ok; ok = it.Prev() {
		}
		if err := it.Error(); err != nil && !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("cached iterator error not corruption: %v", err)
		}
		it.Close()
		for _, k := range []string{"key000", "key007", "key042", "b"} {
			_, _, _, _, ref, err := r.GetRef([]byte(k), base.SeqNumMax)
			if err != nil && !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("cached GetRef error not corruption: %v", err)
			}
			ref.Release()
		}
	}
	r.Close()
	if m := c.Metrics(); m.InUse != 0 || m.Count != 0 {
		t.Fatalf("block references left after Close: %+v", m)
	}
}

// FuzzFooter decodes arbitrary footers.
func FuzzFooter(f *testing.F) {
	for _, seed := range openSeeds() {
		f.Add(seed[len(seed)-FooterLen:], uint64(len(seed)))
	}
	f.Fuzz(func(t *testing.T, b []byte, size uint64) {
		ft, err := decodeFooter(b, size, fileID{name: "f"})
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatal(err)
			}
			return
		}
		if ft.metaindex.end() != size-FooterLen || ft.index.end() != ft.metaindex.offset || !ft.checksumType.Valid() {
			t.Fatalf("accepted inconsistent footer %+v for size %d", ft, size)
		}
	})
}

// FuzzProperties decodes arbitrary properties blocks.
func FuzzProperties(f *testing.F) {
	p := Properties{NumEntries: 3, SmallestKey: base.MakeInternalKey([]byte("a"), 1, base.KindSet),
		LargestKey: base.MakeInternalKey([]byte("b"), 1, base.KindSet), ChecksumType: checksum.XXH3, Compression: NoCompression}
	f.Add(encodeProperties(&p))
	f.Add(encodeProperties(&Properties{ChecksumType: checksum.None, Compression: NoCompression})) // all zero
	p.Identity = Identity{DB: [16]byte{1}, Session: [16]byte{2}, FileNum: 7}
	f.Add(encodeProperties(&p)) // with the optional identity
	f.Add(encodeProperties(comparerSeedProps()))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Properties
		var err error
		checkAlloc(t, "decodeProperties", uint64(len(b)), func() { p, err = decodeProperties(b) })
		if err == nil {
			_ = p.String()
		}
	})
}

// comparerSeedProps are properties with the optional comparer name and
// prefix-filter mark, for the FuzzProperties corpus.
func comparerSeedProps() *Properties {
	return &Properties{NumEntries: 3, SmallestKey: base.MakeInternalKey([]byte("a"), 1, base.KindSet),
		LargestKey: base.MakeInternalKey([]byte("b"), 1, base.KindSet), ChecksumType: checksum.XXH3, Compression: NoCompression,
		BloomBitsPerKey: 10, ComparerName: "vigil.test.Versioned", PrefixFilter: true}
}

// FuzzFilter decodes arbitrary filter blocks and probes them.
func FuzzFilter(f *testing.F) {
	f.Add(buildFilter(nil, []uint64{1, 2, 3, 1 << 40}, 10))
	f.Add(buildFilter(nil, nil, 10))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fl bloomFilter
		var err error
		checkAlloc(t, "decodeFilter", uint64(len(b)), func() { fl, err = decodeFilter(b) })
		if err != nil {
			return
		}
		for _, k := range []string{"", "a", "key000"} {
			fl.mayContain(filterHash([]byte(k)))
		}
	})
}

// FuzzRangeDels decodes arbitrary range-del blocks.
func FuzzRangeDels(f *testing.F) {
	var bw blockWriter
	bw.init(16)
	bw.add(base.MakeInternalKey([]byte("a"), 5, base.KindRangeDelete).Append(nil), []byte("c"))
	bw.add(base.MakeInternalKey([]byte("b"), 9, base.KindRangeDelete).Append(nil), []byte("d"))
	f.Add(bw.finish())
	f.Add(sharedRangeDelBlock(craftSeedN))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ts []base.RangeTombstone
		var err error
		checkAlloc(t, "decodeRangeDels", uint64(len(b)), func() { ts, err = decodeRangeDels(b, base.DefaultComparer) })
		if err != nil {
			return
		}
		for _, rt := range ts {
			if string(rt.Start) >= string(rt.End) {
				t.Fatalf("accepted empty tombstone %v", rt)
			}
		}
	})
}

// openSeeds are small tables of several shapes, mostly with checksum type
// None (so that mutated bytes reach the decoders), one with XXH3.
func openSeeds() [][]byte {
	var seeds [][]byte
	spec := goldenSpec()
	spec.points = spec.points[:12]
	for _, o := range []WriterOptions{
		goldenOptions(checksum.None, NoCompression),
		goldenOptions(checksum.None, SnappyCompression),
		goldenOptions(checksum.XXH3, SnappyCompression),
		goldenOptions(checksum.XXH3, ZstdCompression),
	} {
		data, _, err := buildBytes(o, spec)
		if err != nil {
			panic(err)
		}
		seeds = append(seeds, data)
	}
	empty, _, err := buildBytes(goldenOptions(checksum.None, NoCompression), tableSpec{})
	if err != nil {
		panic(err)
	}
	return append(seeds, empty)
}

// namedSeed is a seed of the corpus written under a name of its own.
type namedSeed struct {
	name  string
	data  []byte
	block []byte
	// internal is FuzzBlock's second argument.
	internal bool
}

// craftedOpenSeeds are the amplification attacks on Open and the table
// iterator: an index, a range-del block and a (valid) data block whose
// entries each extend the previous key by a byte.
func craftedOpenSeeds() []namedSeed {
	chain, _, err := buildBytes(prefixChainOptions(craftSeedN), prefixChainSpec(craftSeedN, false))
	if err != nil {
		panic(err)
	}
	return []namedSeed{
		{name: "shared-index", data: sharedIndexTable(craftSeedN)},
		{name: "shared-rangedel", data: sharedRangeDelTable(craftSeedN)},
		{name: "prefix-chain-table", data: chain},
	}
}

// craftedBlockSeeds are the same attacks on a block: a data-like block of
// keys "a", "aa", ... (valid, restart interval above its length) and the
// crafted range-del block.
func craftedBlockSeeds() []namedSeed {
	return []namedSeed{
		{name: "prefix-chain-block", block: prefixChainBlock(craftSeedN)},
		{name: "shared-rangedel", block: sharedRangeDelBlock(craftSeedN), internal: true},
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

// FuzzSalvage salvages arbitrary bytes as a table: no panic, every error
// wraps ErrCorruption (the callback never fails), entries come in strictly
// increasing order, and Salvage allocates within the decoders' bound of the
// file's size (it reuses one pair of buffers for all data blocks).
func FuzzSalvage(f *testing.F) {
	for _, seed := range openSeeds() {
		f.Add(seed)
	}
	for _, s := range craftedOpenSeeds() {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var prev, cur []byte
		var err, order error
		got := allocBytes(func() {
			_, err = Salvage(vfs.NewMemFile(data), "t.sst", int64(len(data)), ReaderOptions{}, func(k InternalKey, _ []byte) error {
				cur = k.Append(cur[:0])
				if prev != nil && base.CompareEncoded(prev, cur) >= 0 && order == nil {
					order = fmt.Errorf("salvaged %s after %x", k, prev)
				}
				prev, cur = cur, prev
				return nil
			})
		})
		if err != nil && !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("Salvage error not corruption: %v", err)
		}
		if order != nil {
			t.Fatal(order)
		}
		if limit := allocAmp*uint64(len(data)) + allocSlack; got > limit {
			t.Fatalf("Salvage of %d bytes allocated %d bytes, over the limit of %d", len(data), got, limit)
		}
	})
}

var writeFuzzSeeds = flag.Bool("write-fuzz-seeds", false, "rewrite the seed corpora in testdata/fuzz")

// TestWriteFuzzSeeds writes the seed corpora to testdata/fuzz with
// -write-fuzz-seeds; otherwise it checks that they exist.
func TestWriteFuzzSeeds(t *testing.T) {
	seeds := map[string][]namedSeed{}
	add := func(target, text string) {
		seeds[target] = append(seeds[target], namedSeed{name: fmt.Sprintf("seed-%d", len(seeds[target])), data: []byte(text)})
	}
	for _, s := range openSeeds() {
		add("FuzzOpen", fmt.Sprintf("[]byte(%q)", s))
		add("FuzzFooter", fmt.Sprintf("[]byte(%q)\nuint64(%d)", s[len(s)-FooterLen:], len(s)))
		add("FuzzSalvage", fmt.Sprintf("[]byte(%q)", s))
	}
	add("FuzzBlock", fmt.Sprintf("[]byte(%q)\nbool(true)", buildBlock(randKeys(newRand(1), 40), 4)))
	add("FuzzBlock", fmt.Sprintf("[]byte(%q)\nbool(false)", buildBlock(randKeys(newRand(2), 5), 1)))
	p := Properties{NumEntries: 3, SmallestKey: base.MakeInternalKey([]byte("a"), 1, base.KindSet),
		LargestKey: base.MakeInternalKey([]byte("b"), 1, base.KindSet), ChecksumType: checksum.XXH3, Compression: NoCompression}
	add("FuzzProperties", fmt.Sprintf("[]byte(%q)", encodeProperties(&p)))
	add("FuzzProperties", fmt.Sprintf("[]byte(%q)", encodeProperties(comparerSeedProps())))
	add("FuzzFilter", fmt.Sprintf("[]byte(%q)", buildFilter(nil, []uint64{1, 2, 3, 1 << 40}, 10)))
	var bw blockWriter
	bw.init(16)
	bw.add(base.MakeInternalKey([]byte("a"), 5, base.KindRangeDelete).Append(nil), []byte("c"))
	add("FuzzRangeDels", fmt.Sprintf("[]byte(%q)", bw.finish()))
	// The amplification attacks, under their own names.
	for _, s := range craftedOpenSeeds() {
		seeds["FuzzOpen"] = append(seeds["FuzzOpen"], namedSeed{name: s.name, data: []byte(fmt.Sprintf("[]byte(%q)", s.data))})
		seeds["FuzzSalvage"] = append(seeds["FuzzSalvage"], namedSeed{name: s.name, data: []byte(fmt.Sprintf("[]byte(%q)", s.data))})
	}
	for _, s := range craftedBlockSeeds() {
		seeds["FuzzBlock"] = append(seeds["FuzzBlock"], namedSeed{name: s.name, data: []byte(fmt.Sprintf("[]byte(%q)\nbool(%v)", s.block, s.internal))})
	}
	seeds["FuzzRangeDels"] = append(seeds["FuzzRangeDels"], namedSeed{name: "shared-rangedel",
		data: []byte(fmt.Sprintf("[]byte(%q)", sharedRangeDelBlock(craftSeedN)))})
	write := *writeFuzzSeeds
	for name, list := range seeds {
		dir := filepath.Join("testdata", "fuzz", name)
		for _, s := range list {
			path := filepath.Join(dir, s.name)
			if write {
				if err := vfs.Default.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				writeTestdata(t, path, append([]byte("go test fuzz v1\n"), append(s.data, '\n')...))
			} else if _, err := vfs.Default.Stat(path); err != nil {
				t.Errorf("seed corpus file missing: %v", err)
			}
		}
	}
}
