package raftstore

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
)

// chunkOf encodes logs (consecutive indexes, few enough for one chunk) as
// one chunk.
func chunkOf(logs ...*raft.Log) []byte {
	var sizes []int
	out, start, n := appendLogChunk([]byte("before"), logs, &sizes)
	if n != len(logs) || string(out[:6]) != "before" {
		panic(fmt.Sprintf("appendLogChunk took %d of %d entries, or lost dst", n, len(logs)))
	}
	return out[start:]
}

// TestLogChunkGolden pins chunk format version 2 (and that a chunk of one
// entry is format version 1): a change here breaks every stored log.
func TestLogChunkGolden(t *testing.T) {
	a := &raft.Log{Index: 299, Term: 2, Type: raft.LogCommand, Data: []byte("hi")}
	b := &raft.Log{Index: 300, Term: 2, Type: raft.LogCommand, Data: []byte("hi"), Extensions: []byte("x"), AppendedAt: time.Unix(1, 2)}
	const entryA = "010000" + "ab02" + "02" + "6869"
	const entryB = "010003" + "ac02" + "02" + "02" + "02" + "01" + "78" + "6869"
	const want = "02" + "02" + "08" + "0c" + entryA + entryB
	if got := hex.EncodeToString(chunkOf(a, b)); got != want {
		t.Fatalf("chunk of two\n got %s\nwant %s", got, want)
	}
	if got := hex.EncodeToString(chunkOf(b)); got != entryB {
		t.Fatalf("chunk of one\n got %s\nwant %s", got, entryB)
	}
	// The raw encoder writes the same bytes.
	ea, eb := AppendLog(nil, a), AppendLog(nil, b)
	if got := hex.EncodeToString(appendRawChunk(nil, [][]byte{ea, eb}, []int{len(ea), len(eb)})); got != want {
		t.Fatalf("raw chunk of two\n got %s\nwant %s", got, want)
	}
	enc, _ := hex.DecodeString(want)
	c, err := parseChunk(300, enc)
	if err != nil || c.first != 299 || c.n != 2 {
		t.Fatalf("parseChunk = %+v, %v", c, err)
	}
	var l raft.Log
	if err := DecodeLog(c.entry(300), &l); err != nil || !sameLog(&l, b) {
		t.Fatalf("entry 300 = %+v, %v", l, err)
	}
}

// TestLogChunkSplit: StoreLogs's encoder (appendLogChunk) and the
// rewrite's (chunkEnd over encoded entries) split a run alike, by count
// and by bytes, and each chunk parses back to its entries.
func TestLogChunkSplit(t *testing.T) {
	var logs []*raft.Log
	var sizes []int
	add := func(n int, data int) {
		for range n {
			l := &raft.Log{Index: uint64(len(logs) + 1), Data: make([]byte, data)}
			logs = append(logs, l)
			sizes = append(sizes, len(AppendLog(nil, l)))
		}
	}
	add(1500, 4)            // by count: 1,024, then the rest...
	add(20, 10_000)         // ...with as many of ~10 KiB as fit in 64 KiB
	add(1, maxChunkBytes*2) // larger than a chunk: alone
	add(3, 10)
	var byEnd, byEncoder []int
	for k := 0; k < len(logs); {
		j := chunkEnd(sizes, k)
		byEnd = append(byEnd, j-k)
		total := 0
		for _, n := range sizes[k:j] {
			total += n
		}
		if j-k > maxChunkEntries || (j-k > 1 && total > maxChunkBytes) {
			t.Fatalf("chunk [%d, %d) of %d bytes", k, j, total)
		}
		k = j
	}
	var scratch []int
	for rest := logs; len(rest) > 0; {
		out, start, n := appendLogChunk(nil, rest, &scratch)
		byEncoder = append(byEncoder, n)
		c, err := parseChunk(rest[n-1].Index, out[start:])
		if err != nil || c.first != rest[0].Index || c.n != n {
			t.Fatalf("chunk of %d from %d: parsed %+v, %v", n, rest[0].Index, c, err)
		}
		for i := c.first; i <= c.last(); i++ {
			var l raft.Log
			if err := DecodeLog(c.entry(i), &l); err != nil || !sameLog(&l, rest[i-c.first]) {
				t.Fatalf("entry %d: %+v, %v", i, l, err)
			}
		}
		rest = rest[n:]
	}
	want := "[1024 482 6 6 2 1 3]" // the 476 small ones left share a chunk with 6 large
	if fmt.Sprint(byEnd) != want || fmt.Sprint(byEncoder) != want {
		t.Fatalf("chunks %v (chunkEnd) and %v (appendLogChunk), want %s", byEnd, byEncoder, want)
	}
}

func TestParseChunkCorrupt(t *testing.T) {
	two := chunkOf(&raft.Log{Index: 9, Data: []byte("a")}, &raft.Log{Index: 10, Data: []byte("bc")})
	bad := map[string]struct {
		last uint64
		v    []byte
	}{
		"empty":           {10, nil},
		"version 0":       {10, []byte{0, 1, 2}},
		"version 3":       {10, append([]byte{3}, two[1:]...)},
		"count 0":         {10, []byte{2, 0}},
		"count 1":         {10, []byte{2, 1, 1, 7}},
		"count too large": {10, []byte{2, 0xff, 0xff, 0x03, 1, 1}},
		"count bad":       {10, []byte{2, 0x80}},
		"below index 0":   {0, two},
		"length 0":        {10, []byte{2, 2, 0, 2, 1, 1}},
		"length bad":      {10, []byte{2, 2, 0x80, 0x80}},
		"lengths short":   {10, two[:len(two)-1]},
		"lengths long":    {10, append(bytes.Clone(two), 0)},
		"length huge":     {10, []byte{2, 2, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 1, 1}},
	}
	for name, tc := range bad {
		if _, err := parseChunk(tc.last, tc.v); !errors.Is(err, vigil.ErrCorruption) {
			t.Errorf("%s (%x): err = %v, want ErrCorruption", name, tc.v, err)
		}
	}
	if _, err := parseChunk(math.MaxUint64, chunkOf(&raft.Log{Index: math.MaxUint64 - 1}, &raft.Log{Index: math.MaxUint64})); err != nil {
		t.Errorf("chunk ending at the largest index: %v", err)
	}
}

// FuzzParseChunk: arbitrary bytes never panic; a chunk that parses has
// entries that re-encode, entry by entry, to the same chunk.
func FuzzParseChunk(f *testing.F) {
	f.Add(uint64(300), chunkOf(&raft.Log{Index: 299, Data: []byte("a")}, &raft.Log{Index: 300, Extensions: []byte("e")}))
	f.Add(uint64(5), AppendLog(nil, &raft.Log{Index: 5, Data: []byte("x")}))
	f.Fuzz(func(t *testing.T, last uint64, v []byte) {
		c, err := parseChunk(last, v)
		if err != nil {
			if !errors.Is(err, vigil.ErrCorruption) {
				t.Fatalf("error not wrapping ErrCorruption: %v", err)
			}
			return
		}
		if c.last() != last || c.n < 1 {
			t.Fatalf("chunk %+v does not end at %d", c, last)
		}
		var encs [][]byte
		var sizes []int
		c.each(c.first, c.last(), func(index uint64, enc []byte) {
			if !bytes.Equal(enc, c.entry(index)) {
				t.Fatalf("each and entry disagree on %d", index)
			}
			encs, sizes = append(encs, enc), append(sizes, len(enc))
		})
		if len(encs) != c.n {
			t.Fatalf("each visited %d of %d entries", len(encs), c.n)
		}
		if again := appendRawChunk(nil, encs, sizes); !bytes.Equal(again, v) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, v)
		}
	})
}

// TestStoreReadsV010 opens a store that raftstore v0.1.0 wrote (one key
// per entry: entries 1–100 in batches of 10, 1–60 flushed to a table,
// then DeleteRange(1, 10) and a stable key; testdata/v0.1.0-store.md has
// the program), reads it, and writes over it: appends, a range
// deletion and an overwrite that cut across old keys and new chunks.
func TestStoreReadsV010(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "v0.1.0-store"))); err != nil {
		t.Fatal(err)
	}
	want := func(i, term uint64) *raft.Log {
		l := &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: fmt.Appendf(nil, "entry %d", i)}
		if i%7 == 0 && term < 10 {
			l.Extensions, l.AppendedAt = []byte("ext"), time.Unix(1700000000+int64(i), 0)
		}
		return l
	}
	model := map[uint64]*raft.Log{}
	for i := uint64(11); i <= 100; i++ {
		model[i] = want(i, 1+i/40)
	}
	check := func(s *Store, at string) {
		t.Helper()
		var lo, hi uint64 = math.MaxUint64, 0
		for i := range model {
			lo, hi = min(lo, i), max(hi, i)
		}
		if f, _ := s.FirstIndex(); f != lo {
			t.Fatalf("%s: FirstIndex %d, want %d", at, f, lo)
		}
		if l, _ := s.LastIndex(); l != hi {
			t.Fatalf("%s: LastIndex %d, want %d", at, l, hi)
		}
		for i := uint64(0); i <= hi+2; i++ {
			var got raft.Log
			err := s.GetLog(i, &got)
			switch w, ok := model[i]; {
			case !ok && err != raft.ErrLogNotFound:
				t.Fatalf("%s: GetLog(%d) = %v, want not found", at, i, err)
			case ok && (err != nil || !sameLog(&got, w)):
				t.Fatalf("%s: GetLog(%d) = %+v, %v, want %+v", at, i, got, err, w)
			}
		}
		if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 3 {
			t.Fatalf("%s: CurrentTerm = %d, %v", at, v, err)
		}
	}
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	check(s, "as v0.1.0 left it")

	var logs []*raft.Log
	for i := uint64(101); i <= 164; i++ {
		logs = append(logs, want(i, 20))
		model[i] = logs[len(logs)-1]
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(11, 55); err != nil {
		t.Fatal(err)
	}
	logs = logs[:0]
	for i := uint64(90); i <= 120; i++ {
		logs = append(logs, want(i, 30))
		model[i] = logs[len(logs)-1]
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	for i := uint64(11); i <= 55; i++ {
		delete(model, i)
	}
	check(s, "after writes")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	check(s, "reopened")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestGetLogConcurrent reads entries in order and at random while one
// writer appends, compacts a prefix and overwrites a suffix (as a follower
// does after a conflict): every entry read is the one stored under its
// index by some write, never a stale neighbour, and a read below the
// first index after a compaction returned finds nothing.
func TestGetLogConcurrent(t *testing.T) {
	s := openTestStore(t, vfs.NewMem(), "")
	defer s.Close()
	entry := func(i, term uint64) *raft.Log {
		return &raft.Log{Index: i, Term: term, Data: fmt.Appendf(nil, "%d/%d", i, term)}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for {
				select {
				case <-done:
					return
				default:
				}
				first, _ := s.FirstIndex()
				last, _ := s.LastIndex()
				if last == 0 {
					continue
				}
				i := first + uint64(rng.IntN(int(last-first+1)))
				for k := 0; k < 70 && i <= last; k, i = k+1, i+1 {
					var l raft.Log
					err := s.GetLog(i, &l)
					if err == raft.ErrLogNotFound {
						continue // compacted or overwritten meanwhile
					}
					if err != nil || l.Index != i || string(l.Data) != fmt.Sprintf("%d/%d", i, l.Term) {
						t.Errorf("GetLog(%d) = %+v, %v", i, l, err)
						return
					}
				}
			}
		}()
	}
	next, term := uint64(1), uint64(1)
	for step := range 400 {
		var logs []*raft.Log
		for range 1 + step%64 {
			logs = append(logs, entry(next, term))
			next++
		}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
		switch step % 10 {
		case 4: // a compaction, cutting a chunk
			upTo := next - 100
			if next < 200 {
				break
			}
			if err := s.DeleteRange(0, upTo); err != nil {
				t.Fatal(err)
			}
			var l raft.Log
			if err := s.GetLog(upTo, &l); err != raft.ErrLogNotFound {
				t.Fatalf("GetLog(%d) after its compaction = %v", upTo, err)
			}
		case 7: // a conflicting suffix replaced by a new term
			from := next - 30
			term++
			if err := s.DeleteRange(from, next); err != nil {
				t.Fatal(err)
			}
			next = from
		}
	}
	close(done)
	wg.Wait()
}

// TestGetLogCacheAfterWrites: a chunk GetLog keeps for in-order reads is
// not used once a write that changes it has returned: a suffix cut, a
// cut in the middle and an overwrite of cached entries.
func TestGetLogCacheAfterWrites(t *testing.T) {
	s := openTestStore(t, vfs.NewMem(), "")
	defer s.Close()
	entry := func(i, term uint64) *raft.Log { return &raft.Log{Index: i, Term: term} }
	var logs []*raft.Log
	for i := uint64(1); i <= 64; i++ {
		logs = append(logs, entry(i, 1))
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	readInOrder := func(lo, hi uint64) {
		t.Helper()
		for i := lo; i <= hi; i++ {
			var l raft.Log
			if err := s.GetLog(i, &l); err != nil {
				t.Fatalf("GetLog(%d): %v", i, err)
			}
		}
		if cc := s.cache.Load(); cc == nil || !cc.c.covers(hi) {
			t.Fatalf("in-order reads up to %d left no chunk holding it cached", hi)
		}
	}
	gone := func(i uint64, what string) {
		t.Helper()
		var l raft.Log
		if err := s.GetLog(i, &l); err != raft.ErrLogNotFound {
			t.Fatalf("GetLog(%d) after %s = %+v, %v, want raft.ErrLogNotFound", i, what, l, err)
		}
	}
	readInOrder(10, 20)
	if err := s.DeleteRange(50, 64); err != nil { // a suffix
		t.Fatal(err)
	}
	gone(55, "a suffix cut")
	readInOrder(10, 20)
	if err := s.DeleteRange(30, 40); err != nil { // the middle
		t.Fatal(err)
	}
	gone(35, "a cut in the middle")
	readInOrder(10, 20)
	if err := s.StoreLogs([]*raft.Log{entry(15, 2), entry(16, 2)}); err != nil { // an overwrite
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(15, &l); err != nil || l.Term != 2 {
		t.Fatalf("GetLog(15) after its overwrite = term %d, %v, want term 2", l.Term, err)
	}
}
