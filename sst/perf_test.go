package sst

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/cache"
)

// TestGetDoesNotAllocate: with the block cached, GetRef allocates nothing,
// present key or absent, filter or not, paranoid or not; Get allocates only
// the copy of a present value.
func TestGetDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	spec := fixedSpec(1000)
	for _, ct := range []checksum.Type{checksum.CRC32c, checksum.XXH3, checksum.XXHash64} {
		for _, bloom := range []int{0, 10} {
			o := testWriterOptions(ct, SnappyCompression, 4096)
			o.BloomBitsPerKey = bloom
			data, _ := build(t, o, spec)
			r := mustOpen(t, data, ReaderOptions{Cache: wrapCache(newTestCache()), CacheID: 1, ParanoidCacheChecks: true})
			present, absent := spec.points[500].key.UserKey, []byte("key00500x")
			r.Get(present, base.SeqNumMax) // warm the cache
			r.Get(absent, base.SeqNumMax)
			allocs := testing.AllocsPerRun(200, func() {
				_, _, _, found, ref, err := r.GetRef(present, base.SeqNumMax)
				if !found || err != nil {
					t.Fatal("lost the key")
				}
				ref.Release()
				_, _, _, found, ref, _ = r.GetRef(absent, base.SeqNumMax)
				if found {
					t.Fatal("found an absent key")
				}
				ref.Release()
			})
			if allocs != 0 {
				t.Fatalf("%s bloom=%d: GetRef allocates %.1f times per call pair", ct, bloom, allocs)
			}
			allocs = testing.AllocsPerRun(200, func() {
				r.Get(present, base.SeqNumMax)
				r.Get(absent, base.SeqNumMax)
			})
			if allocs != 1 {
				t.Fatalf("%s bloom=%d: Get allocates %.1f times per call pair, want 1 (the value)", ct, bloom, allocs)
			}
			r.Close()
		}
	}
}

// TestIterDoesNotAllocate: creating (from the pool), positioning, stepping
// both ways and closing an iterator over cached blocks allocates nothing;
// nor does stepping over uncached blocks once the scratch buffers exist.
func TestIterDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	// A readahead buffer held throughout keeps scanAlloc's chunk in use.
	// Each scan reads ahead into a buffer freed at Close, and invariants
	// builds retire an emptied chunk and map a new one (its bookkeeping
	// on the heap) rather than reuse it.
	held := scanAlloc.Alloc(maxReadahead)
	defer held.Free()
	spec := fixedSpec(2000)
	data, _ := build(t, testWriterOptions(checksum.XXH3, SnappyCompression, 1024), spec)
	for _, ro := range []ReaderOptions{{Cache: wrapCache(newTestCache()), CacheID: 1}, {}} {
		r := mustOpen(t, data, ro)
		mid := []byte("key01000")
		scan := func() {
			it := r.NewIter(nil, nil)
			n := 0
			for ok := it.First(); ok; ok = it.Next() {
				n++
			}
			for ok := it.Last(); ok; ok = it.Prev() {
				n++
			}
			it.SeekGE(mid)
			it.SeekLT(mid)
			if n != 2*len(spec.points) || it.Close() != nil {
				t.Fatalf("scanned %d", n)
			}
		}
		scan()
		if allocs := testing.AllocsPerRun(20, scan); allocs != 0 {
			t.Fatalf("cache=%v: a full scan both ways allocates %.1f times", ro.Cache != nil, allocs)
		}
		r.Close()
	}
}

// TestConcurrentReaders runs Gets, scans and Verify on one Reader from
// several goroutines with a small shared cache (so blocks are evicted and
// re-read all the time); run with -race.
func TestConcurrentReaders(t *testing.T) {
	spec := fixedSpec(3000)
	data, _ := build(t, testWriterOptions(checksum.CRC32c, SnappyCompression, 512), spec)
	c := cache.New(16 << 10)
	r := mustOpen(t, data, ReaderOptions{Cache: wrapCache(c), CacheID: 1, ParanoidCacheChecks: true})
	defer r.Close()
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; i < 300; i++ {
				e := spec.points[rng.IntN(len(spec.points))]
				v, _, _, found, err := r.Get(e.key.UserKey, base.SeqNumMax)
				if err != nil || !found || !bytes.Equal(v, e.value) {
					errc <- fmt.Errorf("Get(%s) = %q %v %v", e.key, v, found, err)
					return
				}
				if i%50 == 0 {
					it := r.NewIter(e.key.UserKey, nil)
					n := 0
					for ok := it.First(); ok && n < 100; ok = it.Next() {
						n++
					}
					if err := it.Close(); err != nil {
						errc <- err
						return
					}
				}
			}
		}(g)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := r.Verify(); err != nil {
			errc <- err
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

// TestNoChecksumFlipsNeverPanic flips every bit of a table written with
// checksum type None (nothing is detected by checksums, so every decoder
// sees the damage): opening, verifying and reading must never panic, and
// every error must be a corruption error.
func TestNoChecksumFlipsNeverPanic(t *testing.T) {
	spec := goldenSpec()
	data, _ := build(t, goldenOptions(checksum.None, SnappyCompression), spec)
	stride := 1
	switch {
	case raceEnabled:
		stride = 11
	case testing.Short():
		stride = 3
	}
	corrupt := bytes.Clone(data)
	silent := 0
	for bit := 0; bit < 8*len(data); bit += stride {
		corrupt[bit/8] ^= 1 << (bit % 8)
		r, err := openBytes(corrupt, ReaderOptions{})
		if err == nil {
			err = r.Verify()
			if err == nil && !readsBack(r, spec) {
				silent++
			}
			exercise(r)
			r.Close()
		}
		if err != nil && !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("bit %d: %v", bit, err)
		}
		corrupt[bit/8] ^= 1 << (bit % 8)
	}
	t.Logf("checksum None: %d of %d flips changed the contents without any error (expected: nothing checks them)", silent, 8*len(data)/stride)
}

// exercise runs every read path over a possibly corrupt table, ignoring
// results: the point is that none of them panics.
func exercise(r *Reader) {
	for _, fwd := range []bool{true, false} {
		it := r.NewIter(nil, nil)
		ok := it.First()
		if !fwd {
			ok = it.Last()
		}
		for n := 0; ok && n < 10000; n++ {
			ok = step(it, fwd)
		}
		it.SeekGE([]byte("key1"))
		it.SeekLT([]byte("key1"))
		it.Close()
	}
	for _, k := range []string{"", "key000", "key100", "key273", "zzz"} {
		r.Get([]byte(k), base.SeqNumMax)
		r.MayContain([]byte(k))
	}
	_ = r.Properties().String()
	_ = r.RangeDels()
}

// benchTable is the 1M-entry table of the read benchmarks (16-byte keys,
// 100-byte values), built once per process.
var benchTable struct {
	once sync.Once
	data map[string][]byte
}

func benchKey(i int) []byte {
	k := make([]byte, 16)
	copy(k, "key-")
	binary.BigEndian.PutUint64(k[8:], uint64(i)*2) // even: present; odd: absent
	return k
}

func benchData(b testing.TB, bloom int) []byte {
	benchTable.once.Do(func() { benchTable.data = map[string][]byte{} })
	name := fmt.Sprintf("bloom%d", bloom)
	if d, ok := benchTable.data[name]; ok {
		return d
	}
	o := testWriterOptions(checksum.XXH3, SnappyCompression, 4096)
	o.BloomBitsPerKey = bloom
	fs := vfs.NewMem()
	f, _ := fs.Create("b.sst")
	w := NewWriter(f, o)
	val := make([]byte, 100)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < benchN; i++ {
		for j := range val {
			val[j] = byte('a' + rng.IntN(8)) // compresses ~2x, like db_bench's default
		}
		if err := w.Add(base.MakeInternalKey(benchKey(i), uint64(i+1), base.KindSet), val); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := w.Close(); err != nil {
		b.Fatal(err)
	}
	d := readFile(b, fs, "b.sst")
	benchTable.data[name] = d
	return d
}

const benchN = 1_000_000

// BenchmarkWriter measures table build throughput: 16-byte keys, 100-byte
// values, XXH3, snappy, bloom 10; bytes are key+value bytes added.
func BenchmarkWriter(b *testing.B) {
	for _, c := range []Compression{NoCompression, SnappyCompression} {
		b.Run(c.String(), func(b *testing.B) { benchWriter(b, c, 100000) })
	}
}

// BenchmarkWriterTables writes tables the size of a compaction's outputs
// (32K entries, some 3.7 MB), one after another, as a compaction does: what
// a table costs to start and finish (its filter hashes' buffer, its
// filter) weighs more than in BenchmarkWriter.
func BenchmarkWriterTables(b *testing.B) {
	benchWriter(b, SnappyCompression, 32768)
}

// benchWriter adds entries of 16-byte keys and 100-byte values, starting
// a new table every perTable entries.
func benchWriter(b *testing.B, c Compression, perTable int) {
	val := make([]byte, 100)
	for j := range val {
		val[j] = byte('a' + j%8)
	}
	b.SetBytes(116)
	b.ReportAllocs()
	f := discardFile{}
	w := NewWriter(f, testWriterOptions(checksum.XXH3, c, 4096))
	i := 0
	for b.Loop() {
		if err := w.Add(base.MakeInternalKey(benchKey(i), 1, base.KindSet), val); err != nil {
			b.Fatal(err)
		}
		i++
		if i%perTable == 0 {
			w.Close()
			w = NewWriter(f, testWriterOptions(checksum.XXH3, c, 4096))
		}
	}
	w.Close()
}

// discardFile is a vfs.File that drops writes, so BenchmarkWriter measures
// the writer, not a file system.
type discardFile struct{ vfs.File }

func (discardFile) Write(p []byte) (int, error) { return len(p), nil }
func (discardFile) Sync() error                 { return nil }
func (discardFile) Close() error                { return nil }

func benchReader(b testing.TB, bloom int, cached bool) *Reader {
	data := benchData(b, bloom)
	o := ReaderOptions{}
	if cached {
		o.Cache = NewCache(512 << 20) // holds the whole table
		o.CacheID = 1
	}
	r := mustOpen(b, data, o)
	if cached {
		it := r.NewIter(nil, nil)
		for ok := it.First(); ok; ok = it.Next() {
		}
		it.Close()
	}
	return r
}

// BenchmarkGet: random point reads on a 1M-entry table with every block
// cached (the steady state of readrandom with a large block cache).
func BenchmarkGet(b *testing.B) {
	for _, bloom := range []int{0, 10} {
		for _, present := range []bool{true, false} {
			b.Run(fmt.Sprintf("bloom=%d/present=%v", bloom, present), func(b *testing.B) {
				r := benchReader(b, bloom, true)
				defer r.Close()
				rng := rand.New(rand.NewPCG(2, 2))
				keys := make([][]byte, 4096)
				for i := range keys {
					k := benchKey(rng.IntN(benchN))
					if !present {
						k[15] |= 1
					}
					keys[i] = k
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					_, _, _, found, ref, err := r.GetRef(keys[i%len(keys)], base.SeqNumMax)
					if err != nil || found != present {
						b.Fatalf("found=%v err=%v", found, err)
					}
					ref.Release()
					i++
				}
			})
		}
	}
}

// BenchmarkGetUncached: point reads without a block cache (every Get reads,
// verifies and decompresses a block from the in-memory file).
func BenchmarkGetUncached(b *testing.B) {
	r := benchReader(b, 10, false)
	defer r.Close()
	rng := rand.New(rand.NewPCG(2, 2))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, found, err := r.Get(benchKey(rng.IntN(benchN)), base.SeqNumMax); err != nil || !found {
			b.Fatal(found, err)
		}
	}
}

// BenchmarkScan: full forward and reverse scans; reported per entry.
func BenchmarkScan(b *testing.B) {
	for _, cached := range []bool{true, false} {
		for _, fwd := range []bool{true, false} {
			b.Run(fmt.Sprintf("cached=%v/forward=%v", cached, fwd), func(b *testing.B) {
				r := benchReader(b, 10, cached)
				defer r.Close()
				it := r.NewIter(nil, nil)
				defer it.Close()
				b.ReportAllocs()
				b.SetBytes(116)
				ok := false
				for b.Loop() {
					if !ok {
						if fwd {
							ok = it.First()
						} else {
							ok = it.Last()
						}
					} else if fwd {
						ok = it.Next()
					} else {
						ok = it.Prev()
					}
				}
				if it.Error() != nil {
					b.Fatal(it.Error())
				}
			})
		}
	}
}

// BenchmarkShortScan: a new iterator per range of 200 entries (7 data
// blocks, so it reads ahead) at a random key, uncached, then closed: what
// readahead costs a short scan, its buffer's allocation and release
// included.
func BenchmarkShortScan(b *testing.B) {
	r := benchReader(b, 10, false)
	defer r.Close()
	rng := rand.New(rand.NewPCG(3, 3))
	b.ReportAllocs()
	for b.Loop() {
		it := r.NewIter(nil, nil)
		n := 0
		for ok := it.SeekGE(benchKey(rng.IntN(benchN - 200))); ok && n < 200; ok = it.Next() {
			n++
		}
		if err := it.Close(); err != nil || n != 200 {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkSeekGE: random seeks (index binary search + block seek) over
// cached blocks.
func BenchmarkSeekGE(b *testing.B) {
	r := benchReader(b, 10, true)
	defer r.Close()
	it := r.NewIter(nil, nil)
	defer it.Close()
	rng := rand.New(rand.NewPCG(3, 3))
	keys := make([][]byte, 4096)
	for i := range keys {
		keys[i] = benchKey(rng.IntN(benchN))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if !it.SeekGE(keys[i%len(keys)]) {
			b.Fatal("seek failed")
		}
		i++
	}
}

// BenchmarkBlockSeek: seekGE within one 4 KiB block of 16-byte internal keys.
func BenchmarkBlockSeek(b *testing.B) {
	var bw blockWriter
	bw.init(16)
	val := make([]byte, 100)
	var keys [][]byte
	for i := 0; bw.estimatedSize() < 4096; i++ {
		k := base.MakeInternalKey(benchKey(i), 1, base.KindSet).Append(nil)
		keys = append(keys, k[:16])
		bw.add(k, val)
	}
	blk := bytes.Clone(bw.finish())
	var it blockIter
	if err := it.init(blk, true); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if !it.seekGE(keys[i%len(keys)], iterSearchTrailer) {
			b.Fatal("seek failed")
		}
		i++
	}
}

// BenchmarkIndexSearch: the index binary search alone (the first step of
// Get and SeekGE) over the 32K data blocks of the 1M-entry table.
func BenchmarkIndexSearch(b *testing.B) {
	r := benchReader(b, 10, false)
	defer r.Close()
	rng := rand.New(rand.NewPCG(4, 4))
	keys := make([][]byte, 4096)
	for i := range keys {
		keys[i] = benchKey(rng.IntN(benchN))
	}
	b.ReportAllocs()
	i, sum := 0, 0
	for b.Loop() {
		sum += r.index.search(keys[i%len(keys)], iterSearchTrailer)
		i++
	}
	if sum < 0 {
		b.Fatal(sum)
	}
}
