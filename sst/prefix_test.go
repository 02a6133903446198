package sst

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/testcmp"
)

// countingFile counts the reads of a table's file, to see that an iterator
// a prefix filter rules out reads nothing.
type countingFile struct {
	vfs.File
	reads atomic.Int64
}

func (f *countingFile) ReadAt(p []byte, off int64) (int, error) {
	f.reads.Add(1)
	return f.File.ReadAt(p, off)
}

// prefixName is the i-th prefix of prefixSpec: the even ones are in the
// table, the odd ones are not.
func prefixName(i int) []byte { return []byte(fmt.Sprintf("p%05d", i)) }

// prefixSpec is a table under testcmp.Versioned of n prefixes (the even
// prefixName(i), i < 2n), each with 1..4 versions.
func prefixSpec(n int) tableSpec {
	var s tableSpec
	for i := 0; i < 2*n; i += 2 {
		for v := 1 + i%4; v > 0; v-- { // versions descending: newest first
			k := testcmp.VersionedKey(prefixName(i), uint64(10*v))
			s.points = append(s.points, kv{base.MakeInternalKey(k, uint64(100+v), base.KindSet), []byte("value")})
		}
	}
	return s
}

// TestPrefixFilter: under a comparer with a Split, the filter holds the
// keys' distinct prefixes (one entry per prefix, and it says so in the
// properties). No present prefix or key is ever excluded (MayContain,
// MayContainPrefix, Get, an iterator with ReadOptions.Prefix); absent
// prefixes mostly are, and an iterator for an excluded prefix reads no
// data block. Verify checks every prefix against the filter.
func TestPrefixFilter(t *testing.T) {
	const n = 3000
	spec := prefixSpec(n)
	o := testWriterOptions(checksum.XXH3, SnappyCompression, 512)
	o.Comparer = testcmp.Versioned
	data, _ := build(t, o, spec)
	f := &countingFile{File: vfs.NewMemFile(data)}
	r, err := Open(f, "t.sst", int64(len(data)), ReaderOptions{Comparer: testcmp.Versioned})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	p := r.Properties()
	if !p.PrefixFilter || p.ComparerName != testcmp.Versioned.Name {
		t.Fatalf("properties: prefix filter %v, comparer %q", p.PrefixFilter, p.ComparerName)
	}
	// One filter entry per prefix, not per key.
	if want := uint64((n*o.BloomBitsPerKey + filterLineBits - 1) / filterLineBits); r.filter.numLines != want {
		t.Fatalf("filter of %d lines, want %d for %d prefixes (%d keys)", r.filter.numLines, want, n, len(spec.points))
	}
	for _, e := range spec.points {
		k := e.key.UserKey
		pfx := k[:len(k)-testcmp.VersionLen]
		if !r.MayContain(k) || !r.MayContainPrefix(pfx) {
			t.Fatalf("present key %s or its prefix excluded", base.HexKey(k))
		}
		// Any version of a present prefix may be there: the filter
		// answers for the prefix.
		if !r.MayContain(testcmp.VersionedKey(pfx, 12345)) {
			t.Fatalf("absent version of present prefix %q excluded", pfx)
		}
	}
	excluded := 0
	for i := 1; i < 2*n; i += 2 {
		pfx := prefixName(i)
		may := r.MayContainPrefix(pfx)
		if !may {
			excluded++
		}
		k := testcmp.VersionedKey(pfx, 10)
		if r.MayContain(k) != may {
			t.Fatalf("MayContain(%q@10) = %v, MayContainPrefix(%q) = %v", pfx, !may, pfx, may)
		}
		if _, _, _, found, err := r.Get(k, base.SeqNumMax); found || err != nil {
			t.Fatalf("Get of absent %q@10: found %v, %v", pfx, found, err)
		}
	}
	if excluded < n*95/100 {
		t.Fatalf("only %d of %d absent prefixes excluded", excluded, n)
	}
	checkPrefixIters(t, r, f, n)
}

// checkPrefixIters opens iterators with ReadOptions.Prefix on r (of
// prefixSpec(n), read through f): one for an excluded prefix reads
// nothing and is empty; one for a present prefix, bounded to it, returns
// exactly its versions.
func checkPrefixIters(t *testing.T, r *Reader, f *countingFile, n int) {
	t.Helper()
	for i := 1; i < 2*n; i += 2 {
		pfx := prefixName(i)
		if r.MayContainPrefix(pfx) {
			continue
		}
		before := f.reads.Load()
		it := r.NewIterWithOptions(pfx, append(bytes.Clone(pfx), 0), ReadOptions{Prefix: pfx})
		if it.First() || it.Last() || it.SeekGE(pfx) || it.SeekLT(testcmp.VersionedKey(pfx, 0)) || it.Valid() || it.Next() || it.Prev() {
			t.Fatalf("iterator for excluded prefix %q is positioned", pfx)
		}
		if it.Error() != nil || it.Close() != nil || f.reads.Load() != before {
			t.Fatalf("iterator for excluded prefix %q: %v, %d reads", pfx, it.Error(), f.reads.Load()-before)
		}
	}
	for i := 0; i < 2*n; i += 2 * 97 {
		pfx := prefixName(i)
		// A bare key sorts before its prefix's versions: [pfx, pfx\x00)
		// holds exactly the versions of pfx.
		it := r.NewIterWithOptions(pfx, append(bytes.Clone(pfx), 0), ReadOptions{Prefix: pfx})
		got := collect(t, it, true)
		it.Close()
		if len(got) != 1+i%4 {
			t.Fatalf("prefix %q: %d entries, want %d", pfx, len(got), 1+i%4)
		}
		for _, e := range got {
			if !bytes.HasPrefix(e.key.UserKey, pfx) || len(e.key.UserKey) != len(pfx)+testcmp.VersionLen {
				t.Fatalf("prefix %q: entry %s", pfx, e.key)
			}
		}
	}
}

// TestPrefixFilterNotUsed: tables whose filter cannot answer for a prefix
// (a whole-key filter, none at all) never exclude one, and an iterator
// with a Prefix reads them as usual; a whole-key filter still excludes
// absent keys. An empty table's prefix filter excludes everything.
func TestPrefixFilterNotUsed(t *testing.T) {
	spec := genCmpSpec(newRand(3), testcmp.Reverse.Resolve(), 2000, 0)
	for _, tc := range []struct {
		name  string
		c     *base.Comparer
		spec  tableSpec
		bloom int
	}{
		{"whole-key-filter", testcmp.Reverse, spec, 10},
		{"no-filter", testcmp.Versioned, prefixSpec(500), 0},
		{"no-filter-default", nil, genSpec(newRand(4), 500, 8, 8, 0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testWriterOptions(checksum.XXH3, NoCompression, 512)
			o.Comparer, o.BloomBitsPerKey = tc.c, tc.bloom
			data, _ := build(t, o, tc.spec)
			r := mustOpen(t, data, ReaderOptions{Comparer: tc.c})
			defer r.Close()
			if r.Properties().PrefixFilter {
				t.Fatal("prefix filter recorded")
			}
			excluded := 0
			for i := 0; i < 1000; i++ {
				k := []byte(fmt.Sprintf("absent%d", i))
				if !r.MayContainPrefix(k) || !r.MayContainPrefix(k[:3]) {
					t.Fatalf("MayContainPrefix(%q) = false without a prefix filter", k)
				}
				if !r.MayContain(k) {
					excluded++
				}
				it := r.NewIterWithOptions(nil, nil, ReadOptions{Prefix: k})
				if !it.First() {
					t.Fatalf("iterator with prefix %q over a table without a prefix filter is empty", k)
				}
				it.Close()
			}
			if (tc.bloom > 0) != (excluded > 900) {
				t.Fatalf("%d of 1000 absent keys excluded with %d bloom bits per key", excluded, tc.bloom)
			}
		})
	}
	o := testWriterOptions(checksum.XXH3, NoCompression, 512)
	o.Comparer = testcmp.Versioned
	data, _ := build(t, o, tableSpec{})
	r := mustOpen(t, data, ReaderOptions{Comparer: testcmp.Versioned})
	defer r.Close()
	if !r.Properties().PrefixFilter || r.MayContainPrefix([]byte("p")) || r.NewIterWithOptions(nil, nil, ReadOptions{Prefix: []byte("p")}).First() {
		t.Fatal("an empty table's prefix filter does not exclude a prefix")
	}
}

// TestVerifyChecksPrefixes: a table read with a comparer of the same name
// that splits keys elsewhere than the writer's finds keys whose prefix is
// not in the filter: Verify reports the first, as corruption. (Get and
// MayContain would answer wrongly: the comparer broke its promise that
// the name fixes it.)
func TestVerifyChecksPrefixes(t *testing.T) {
	o := testWriterOptions(checksum.XXH3, NoCompression, 512)
	o.Comparer = testcmp.Versioned
	data, _ := build(t, o, prefixSpec(1000))
	other := *testcmp.Versioned
	other.Split = func(k []byte) int { return len(k) } // whole keys
	r := mustOpen(t, data, ReaderOptions{Comparer: &other})
	defer r.Close()
	err := r.Verify()
	if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "missing from the bloom filter") {
		t.Fatalf("Verify = %v, want a prefix missing from the filter", err)
	}
}
