package sst

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// readCountFile counts ReadAt calls and the bytes they read.
type readCountFile struct {
	vfs.File
	mu           sync.Mutex
	reads, bytes int
}

func (f *readCountFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	f.reads++
	f.bytes += len(p)
	f.mu.Unlock()
	return f.File.ReadAt(p, off)
}

func (f *readCountFile) counts() (reads, bytes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads, f.bytes
}

// readaheadTable is a table of many data blocks (4 KiB, values that
// compress or not), its entries, and its block count.
func readaheadTable(t *testing.T, c Compression) ([]byte, []kv, int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	var spec tableSpec
	for i := range 3000 {
		v := make([]byte, 20+rng.IntN(200))
		for j := range v {
			v[j] = byte(rng.IntN(256))
		}
		spec.points = append(spec.points, kv{base.MakeInternalKey(fmt.Appendf(nil, "key%06d", i), uint64(i+1), base.KindSet), v})
	}
	data, _ := build(t, testWriterOptions(checksum.XXH3, c, 4096), spec)
	r := mustOpen(t, data, ReaderOptions{})
	defer r.Close()
	return data, spec.points, r.index.len()
}

// TestReadaheadScans: full scans, forward and backward, through the cache,
// without one and uncached (a compaction's), read the same entries as the
// table holds, in far fewer system calls than blocks once they read ahead;
// so do scans broken up by seeks. Nothing is read past the data blocks.
func TestReadaheadScans(t *testing.T) {
	for _, c := range []Compression{NoCompression, SnappyCompression} {
		data, points, blocks := readaheadTable(t, c)
		if blocks < 50 {
			t.Fatalf("%d blocks: want a table of many", blocks)
		}
		for _, mode := range []string{"cache", "no-cache", "uncached"} {
			for _, forward := range []bool{true, false} {
				name := fmt.Sprintf("%s/%s/forward=%v", c, mode, forward)
				f := &readCountFile{File: vfs.NewMemFile(data)}
				o := ReaderOptions{}
				if mode == "cache" {
					o.Cache, o.CacheID = NewCache(64<<20), 1
				}
				r, err := Open(f, "t.sst", int64(len(data)), o)
				if err != nil {
					t.Fatal(err)
				}
				reads0, bytes0 := f.counts()
				var it InternalIterator
				if mode == "uncached" {
					it = r.NewUncachedIter()
				} else {
					it = r.NewIter(nil, nil)
				}
				got := collect(t, it, forward)
				_ = it.Close()
				if err := equalKVs(got, points); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				reads, nbytes := f.counts()
				reads, nbytes = reads-reads0, nbytes-bytes0
				dataEnd := int(r.index.handle(blocks - 1).end())
				if reads > blocks/4 || nbytes > dataEnd {
					t.Fatalf("%s: %d blocks read in %d calls of %d bytes (data blocks: %d bytes)", name, blocks, reads, nbytes, dataEnd)
				}
				// A second scan through the cache reads nothing.
				if mode == "cache" {
					it = r.NewIter(nil, nil)
					collect(t, it, !forward)
					_ = it.Close()
					if again, _ := f.counts(); again != reads0+reads {
						t.Fatalf("%s: a scan of cached blocks read %d times", name, again-reads0-reads)
					}
				}
				_ = r.Close()
			}
		}
		// Seeks and steps in both directions agree with the entries.
		r := mustOpen(t, data, ReaderOptions{})
		it := r.NewIter(nil, nil)
		rng := rand.New(rand.NewPCG(1, 2))
		for range 200 {
			i := rng.IntN(len(points))
			if !it.SeekGE(points[i].key.UserKey) {
				t.Fatalf("SeekGE(%s) found nothing", points[i].key.UserKey)
			}
			for n := rng.IntN(300); n > 0; n-- {
				fwd := rng.IntN(4) > 0
				if rng.IntN(2) == 0 {
					fwd = !fwd && i > 0
				}
				if fwd && i+1 < len(points) {
					i++
					it.Next()
				} else if !fwd && i > 0 {
					i--
					it.Prev()
				} else {
					continue
				}
				if it.Key().String() != points[i].key.String() {
					t.Fatalf("at entry %d: %s, want %s", i, it.Key(), points[i].key)
				}
			}
		}
		_ = it.Close()
		_ = r.Close()
	}
}

// TestReadaheadCorruption: a damaged block among those read ahead is
// reported as the block it is, by scans in both directions, with and
// without the cache, as when it is read alone.
func TestReadaheadCorruption(t *testing.T) {
	data, _, blocks := readaheadTable(t, SnappyCompression)
	r := mustOpen(t, data, ReaderOptions{})
	bad := r.index.handle(blocks / 2)
	_ = r.Close()
	data[bad.offset+bad.size/2] ^= 0x10
	want := fmt.Sprintf("offset %d", bad.offset)
	for _, mode := range []string{"cache", "no-cache", "uncached"} {
		for _, forward := range []bool{true, false} {
			o := ReaderOptions{}
			if mode == "cache" {
				o.Cache, o.CacheID = NewCache(64<<20), 1
			}
			r := mustOpen(t, data, o)
			it := r.NewIter(nil, nil)
			if mode == "uncached" {
				_ = it.Close()
				it = r.NewUncachedIter()
			}
			ok := it.First()
			if !forward {
				ok = it.Last()
			}
			for ok {
				ok = step(it, forward)
			}
			err := it.Error()
			_ = it.Close()
			_ = r.Close()
			if !errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s forward=%v: %v, want corruption at %s", mode, forward, err, want)
			}
		}
	}
}

// TestReadaheadNote: the direction note gives a load, after a run of
// adjacent loads, and how a jump or a turn ends the run.
func TestReadaheadNote(t *testing.T) {
	var ra readahead
	ra.reset(nil, nil)
	for _, c := range []struct {
		idx, dir int
	}{
		{5, 0}, {6, 0}, {7, 1}, {8, 1}, {8, 1}, // a reload of the same block keeps the run
		{20, 0}, {19, 0}, {18, -1}, {17, -1},
		{18, 0}, {19, 1}, {20, 1}, // a turn starts a new run, 18 its first adjacent load
		{0, 0}, {1, 0}, {2, 1},
	} {
		if got := ra.note(c.idx); got != c.dir {
			t.Fatalf("note(%d) = %d, want %d (state %+v)", c.idx, got, c.dir, ra)
		}
	}
}

// TestReadaheadBounds: a bounded scan reads ahead no block wholly outside
// its bounds: forward up to an upper bound, backward down to a lower one.
func TestReadaheadBounds(t *testing.T) {
	data, points, blocks := readaheadTable(t, NoCompression)
	r0 := mustOpen(t, data, ReaderOptions{})
	// Bounds at the separators of blocks q and 3q: the scans may read
	// those blocks, the ones between and the one after 3q (its first key
	// may lie below the separator), nothing else.
	q := blocks / 4
	mid := func(b int) []byte { return append([]byte(nil), r0.index.sepUser(b)...) }
	lowerKey, upperKey := mid(q), mid(3*q)
	within := int(r0.index.handle(3*q+1).end() - r0.index.handle(q).offset)
	_ = r0.Close()
	for _, forward := range []bool{true, false} {
		f := &readCountFile{File: vfs.NewMemFile(data)}
		r, err := Open(f, "t.sst", int64(len(data)), ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		reads0, bytes0 := f.counts()
		it := r.NewIter(lowerKey, upperKey)
		got := collect(t, it, forward)
		_ = it.Close()
		var want []kv
		for _, p := range points {
			if string(p.key.UserKey) >= string(lowerKey) && string(p.key.UserKey) < string(upperKey) {
				want = append(want, p)
			}
		}
		if err := equalKVs(got, want); err != nil {
			t.Fatalf("forward=%v: %v", forward, err)
		}
		reads, nbytes := f.counts()
		if nbytes-bytes0 > within || reads-reads0 > blocks/4 {
			t.Fatalf("forward=%v: read %d bytes in %d calls; the blocks within bounds are %d bytes", forward, nbytes-bytes0, reads-reads0, within)
		}
		_ = r.Close()
	}
}

// TestReadaheadBufferFreedAtClose: the readahead buffer lives outside the
// Go heap while its iterator reads ahead, and goes as the scan runs off the
// table's end (a compaction keeps its inputs' iterators open until its last
// output) or a seek lands past its last key, or at Close: an iterator
// back in the pool holds no readahead memory. After running off, a seek
// into the last block reads it again.
func TestReadaheadBufferFreedAtClose(t *testing.T) {
	data, points, _ := readaheadTable(t, NoCompression)
	r := mustOpen(t, data, ReaderOptions{})
	defer r.Close()
	before := scanAlloc.Stats().InUse
	for _, uncached := range []bool{false, true} {
		it := r.NewIter(nil, nil)
		if uncached {
			it = r.NewUncachedIter()
		}
		n := 0
		var during int64
		for ok := it.First(); ok; ok = it.Next() {
			if n++; n == len(points)/2 {
				during = scanAlloc.Stats().InUse
			}
		}
		if err := it.Error(); err != nil || n != len(points) {
			t.Fatalf("uncached=%v: %d entries of %d, %v", uncached, n, len(points), err)
		}
		if during < before+maxReadahead {
			t.Fatalf("uncached=%v: readahead memory %d during the scan, want >= %d", uncached, during-before, maxReadahead)
		}
		if ran := scanAlloc.Stats().InUse; ran != before {
			t.Fatalf("uncached=%v: readahead memory %d once the scan ran off the table, want 0", uncached, ran-before)
		}
		last := points[len(points)-1]
		if !it.SeekGE(last.key.UserKey) || !bytes.Equal(it.Key().UserKey, last.key.UserKey) || !bytes.Equal(it.Value(), last.value) {
			t.Fatalf("uncached=%v: SeekGE(%s) after running off: valid %v, key %s", uncached, last.key.UserKey, it.Valid(), it.Key())
		}
		if it.Next() {
			t.Fatalf("uncached=%v: Next after the last key found %s", uncached, it.Key())
		}
		// A seek past the last key ends the pass too: read ahead halfway,
		// then seek beyond the table.
		n = 0
		for ok := it.First(); ok && n < len(points)/2; ok = it.Next() {
			n++
		}
		if scanAlloc.Stats().InUse < before+maxReadahead {
			t.Fatalf("uncached=%v: no readahead halfway through the second scan", uncached)
		}
		if it.SeekGE(append(bytes.Clone(last.key.UserKey), 'z')) {
			t.Fatalf("uncached=%v: SeekGE past the last key found %s", uncached, it.Key())
		}
		if ran := scanAlloc.Stats().InUse; ran != before {
			t.Fatalf("uncached=%v: readahead memory %d after a seek past the table, want 0", uncached, ran-before)
		}
		if err := it.Close(); err != nil {
			t.Fatalf("uncached=%v: Close: %v", uncached, err)
		}
		if after := scanAlloc.Stats().InUse; after != before {
			t.Fatalf("uncached=%v: readahead memory %d after Close, want 0", uncached, after-before)
		}
	}
}
