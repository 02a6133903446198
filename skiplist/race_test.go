package skiplist

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/invariants"
	"github.com/vigildb/vigil/internal/testcmp"
)

// TestConcurrent runs writers and readers at once. Writers insert
// interleaved keys (neighbours come from different writers, so their CASes
// contend on the same links); readers scan in both directions and seek
// while the list grows, checking that everything they see is strictly
// ordered. Afterwards every key must be present exactly once, and the
// backward walk must be the forward walk reversed (back links repaired).
//
// It runs under the built-in InternalKeys order and under UserComparers
// (testcmp.Reverse, testcmp.Versioned), whose keys are 4 bytes of prefix
// and 8 of version, so Versioned's abbreviations (the prefix) tie between
// neighbours and its Compare decides.
func TestConcurrent(t *testing.T) {
	const writers, readers = 3, 2
	perWriter := 4000
	if testing.Short() || invariants.RaceEnabled {
		perWriter = 1000
	}
	for _, c := range []*base.Comparer{nil, testcmp.Reverse, testcmp.Versioned} {
		name := "internal"
		if c != nil {
			name = c.Name
		}
		for _, validate := range []bool{false, true} {
			for _, mode := range []string{"add", "inserter", "yield"} {
				t.Run(fmt.Sprintf("%s/validate=%t/%s", name, validate, mode), func(t *testing.T) {
					runConcurrent(t, c, validate, mode, writers, readers, perWriter)
				})
			}
		}
	}
}

func runConcurrent(t *testing.T, c *base.Comparer, validate bool, mode string, writers, readers, perWriter int) {
	arena, _ := NewArena(writers * perWriter * 128)
	l, err := New(arena, Options{InternalKeys: true, UserComparer: c, Validate: validate})
	if err != nil {
		t.Fatal(err)
	}
	if mode == "yield" {
		l.testYield = runtime.Gosched
	}
	// Choose link summaries while the writers run.
	l.sumAt.Store(min(l.sumAt.Load(), l.head+8<<10))
	key := func(i, w int) []byte {
		v := uint64(i*writers + w)
		k := binary.BigEndian.AppendUint32(nil, uint32(v>>3))
		k = binary.BigEndian.AppendUint64(k, v&7)
		return binary.LittleEndian.AppendUint64(k, 7<<8|1)
	}
	var done atomic.Bool
	var failures atomic.Int64
	fail := func(format string, args ...any) {
		if failures.Add(1) < 5 {
			t.Errorf(format, args...)
		}
	}
	var wg, rg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			ins := l.NewInserter()
			// Ascending runs with random jumps, so the inserter
			// cache both hits and misses.
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			perm := rng.Perm(perWriter / 10)
			for _, blk := range perm {
				for j := 0; j < 10; j++ {
					k := key(blk*10+j, w)
					var err error
					if mode == "inserter" {
						err = ins.Add(k, k[:8])
					} else {
						err = l.Add(k, k[:8])
					}
					if err != nil {
						fail("writer %d: Add(%x): %v", w, k, err)
						return
					}
				}
			}
		}(w)
	}
	for r := 0; r < readers; r++ {
		rg.Add(1)
		go func(r int) {
			defer rg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			it := l.NewIter(false)
			for round := 0; !done.Load(); round++ {
				readRound(l, &it, rng, round, r, key, fail, writers, perWriter)
				if err := it.Error(); err != nil {
					fail("reader %d: %v", r, err)
				}
			}
		}(r)
	}
	wg.Wait()
	done.Store(true)
	rg.Wait()
	if t.Failed() {
		return
	}
	checkAfterConcurrent(t, l, key, writers, perWriter)
}

// TestConcurrentSameKeys has several goroutines insert the same keys: each
// key must go in exactly once, the others getting ErrRecordExists.
func TestConcurrentSameKeys(t *testing.T) {
	const goroutines, keys = 4, 1000
	arena, _ := NewArena(goroutines * keys * 100)
	l, _ := New(arena, Options{})
	l.testYield = runtime.Gosched
	var wins, exists atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < keys; i++ {
				err := l.Add(binary.BigEndian.AppendUint64(nil, uint64(i)), nil)
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, ErrRecordExists):
					exists.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if wins.Load() != keys || exists.Load() != (goroutines-1)*keys {
		t.Fatalf("%d inserts won, %d lost; want %d and %d", wins.Load(), exists.Load(), keys, (goroutines-1)*keys)
	}
	if n, err := l.Verify(nil); err != nil || n != keys {
		t.Fatalf("Verify = %d, %v", n, err)
	}
}

// readRound is one round of a TestConcurrent reader: walks forward and back
// from random places (every 16th round, the whole list) and seeks, checking
// the order of what it sees.
func readRound(l *Skiplist, it *Iterator, rng *rand.Rand, round, r int, key func(i, w int) []byte, fail func(string, ...any), writers, perWriter int) {
	// Bounded walks from random places; a full walk in
	// both directions every 16th round.
	steps := 32
	if round%16 == 0 {
		steps = 1 << 30
	}
	var prev []byte
	ok := it.SeekGE(key(rng.IntN(perWriter), 0))
	if round%16 == 0 {
		ok = it.First()
	}
	for n := 0; ok && n < steps; n++ {
		if prev != nil && l.Compare(prev, it.Key()) >= 0 {
			fail("reader %d: forward %x then %x", r, prev, it.Key())
		}
		prev = it.Key()
		ok = it.Next()
	}
	prev = nil
	ok = it.SeekLT(key(rng.IntN(perWriter), 0))
	if round%16 == 0 {
		ok = it.Last()
	}
	for n := 0; ok && n < steps; n++ {
		if prev != nil && l.Compare(it.Key(), prev) >= 0 {
			fail("reader %d: backward %x then %x", r, prev, it.Key())
		}
		prev = it.Key()
		ok = it.Prev()
	}
	runtime.Gosched()
	for i := 0; i < 20; i++ {
		k := key(rng.IntN(perWriter), rng.IntN(writers))
		if it.SeekGE(k) && l.Compare(it.Key(), k) < 0 {
			fail("reader %d: SeekGE(%x) landed on smaller %x", r, k, it.Key())
		}
		if it.SeekLT(k) && l.Compare(it.Key(), k) >= 0 {
			fail("reader %d: SeekLT(%x) landed on %x", r, k, it.Key())
		}
	}
}

// checkAfterConcurrent checks a list once TestConcurrent's writers are done:
// every key present once, the backward walk the forward walk reversed,
// Verify passing.
func checkAfterConcurrent(t *testing.T, l *Skiplist, key func(i, w int) []byte, writers, perWriter int) {
	it := l.NewIter(true)
	for w := 0; w < writers; w++ {
		for i := 0; i < perWriter/10*10; i++ {
			k := key(i, w)
			if !it.SeekGE(k) || !bytes.Equal(it.Key(), k) || !bytes.Equal(it.Value(), k[:8]) {
				t.Fatalf("key %x missing after concurrent inserts (err %v)", k, it.Error())
			}
		}
	}
	var fwd [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		fwd = append(fwd, it.Key())
	}
	n := len(fwd)
	for ok := it.Last(); ok; ok = it.Prev() {
		n--
		if n < 0 || !bytes.Equal(fwd[n], it.Key()) {
			t.Fatalf("backward walk disagrees with forward walk at %d", n)
		}
	}
	if n != 0 || it.Error() != nil {
		t.Fatalf("backward walk ended at %d (err %v)", n, it.Error())
	}
	if want := writers * (perWriter / 10 * 10); len(fwd) != want {
		t.Fatalf("%d keys, want %d", len(fwd), want)
	}
	if cnt, err := l.Verify(nil); err != nil || cnt != len(fwd) {
		t.Fatalf("Verify = %d, %v", cnt, err)
	}
}
