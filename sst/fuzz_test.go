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
)

// The fuzz targets feed arbitrary bytes to every decoder of on-disk data.
// The property is always the same: no panic, no hang, no allocation beyond
// the bounds documented in the package comment, and every error wraps
// base.ErrCorruption. Seed corpora are committed in testdata/fuzz/<Name>/
// (regenerate with go test -run TestWriteFuzzSeeds -write-fuzz-seeds);
// most seeds use checksum type None so mutations reach the decoders instead
// of stopping at a checksum.

// FuzzBlock decodes arbitrary bytes as a block (with and without the
// internal-key requirement) through every positioning method.
func FuzzBlock(f *testing.F) {
	f.Add(buildBlock(randKeys(newRand(1), 40), 4), true)
	f.Add(buildBlock(randKeys(newRand(2), 5), 1), false)
	f.Fuzz(func(t *testing.T, b []byte, internal bool) {
		var it blockIter
		if it.init(b, internal) != nil {
			return
		}
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
}

// FuzzOpen opens arbitrary bytes as a table, then verifies it, iterates it
// fully both ways and gets a few keys.
func FuzzOpen(f *testing.F) {
	for _, seed := range openSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := openBytes(data, ReaderOptions{})
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
	})
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
		LargestKey: base.MakeInternalKey([]byte("b"), 1, base.KindSet), ChecksumType: checksum.XXH3}
	f.Add(encodeProperties(&p))
	f.Add(encodeProperties(&Properties{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodeProperties(b)
		if err == nil {
			_ = p.String()
		}
	})
}

// FuzzFilter decodes arbitrary filter blocks and probes them.
func FuzzFilter(f *testing.F) {
	f.Add(buildFilter([]uint64{1, 2, 3, 1 << 40}, 10))
	f.Add(buildFilter(nil, 10))
	f.Fuzz(func(t *testing.T, b []byte) {
		fl, err := decodeFilter(b)
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
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := decodeRangeDels(b)
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

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

var writeFuzzSeeds = flag.Bool("write-fuzz-seeds", false, "rewrite the seed corpora in testdata/fuzz")

// TestWriteFuzzSeeds writes the seed corpora to testdata/fuzz with
// -write-fuzz-seeds; otherwise it checks that they exist.
func TestWriteFuzzSeeds(t *testing.T) {
	seeds := map[string][]string{}
	for _, s := range openSeeds() {
		seeds["FuzzOpen"] = append(seeds["FuzzOpen"], fmt.Sprintf("[]byte(%q)", s))
		seeds["FuzzFooter"] = append(seeds["FuzzFooter"], fmt.Sprintf("[]byte(%q)\nuint64(%d)", s[len(s)-FooterLen:], len(s)))
	}
	seeds["FuzzBlock"] = []string{
		fmt.Sprintf("[]byte(%q)\nbool(true)", buildBlock(randKeys(newRand(1), 40), 4)),
		fmt.Sprintf("[]byte(%q)\nbool(false)", buildBlock(randKeys(newRand(2), 5), 1)),
	}
	p := Properties{NumEntries: 3, SmallestKey: base.MakeInternalKey([]byte("a"), 1, base.KindSet),
		LargestKey: base.MakeInternalKey([]byte("b"), 1, base.KindSet), ChecksumType: checksum.XXH3}
	seeds["FuzzProperties"] = []string{fmt.Sprintf("[]byte(%q)", encodeProperties(&p))}
	seeds["FuzzFilter"] = []string{fmt.Sprintf("[]byte(%q)", buildFilter([]uint64{1, 2, 3, 1 << 40}, 10))}
	var bw blockWriter
	bw.init(16)
	bw.add(base.MakeInternalKey([]byte("a"), 5, base.KindRangeDelete).Append(nil), []byte("c"))
	seeds["FuzzRangeDels"] = []string{fmt.Sprintf("[]byte(%q)", bw.finish())}
	write := *writeFuzzSeeds
	for name, list := range seeds {
		dir := filepath.Join("testdata", "fuzz", name)
		for i, s := range list {
			path := filepath.Join(dir, fmt.Sprintf("seed-%d", i))
			if write {
				if err := vfs.Default.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				writeTestdata(t, path, []byte("go test fuzz v1\n"+s+"\n"))
			} else if _, err := vfs.Default.Stat(path); err != nil {
				t.Errorf("seed corpus file missing: %v", err)
			}
		}
	}
}
