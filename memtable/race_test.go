package memtable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/invariants"
)

// TestConcurrent applies batches from two writers (Reserve then Add, as the
// DB does) while two readers Get keys already published and iterate in both
// directions. Readers must find every published key with its value, see
// strictly ordered internal keys and no error; afterwards every key is
// present, Prev walks agree with Next walks, Validate passes and Count is
// exact. It runs under every test comparer: the order readers check is the
// comparer's.
func TestConcurrent(t *testing.T) {
	const writers, readers, batch = 2, 2, 8
	perWriter := 3000
	if testing.Short() || invariants.RaceEnabled {
		perWriter = 800
	}
	for _, cmp := range testComparers {
		for _, paranoid := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/paranoid=%t", cmp.Name, paranoid), func(t *testing.T) {
				runConcurrent(t, cmp, paranoid, writers, readers, batch, perWriter)
			})
		}
	}
}

func runConcurrent(t *testing.T, cmp *base.Comparer, paranoid bool, writers, readers, batch, perWriter int) {
	m := mustNew(t, Options{
		Size:                  writers * perWriter * EntrySize(16, 32),
		ChecksumType:          checksum.XXH3,
		ProtectionBytesPerKey: 8,
		ParanoidMemoryChecks:  paranoid,
		Comparer:              cmp,
		// Built while the writers add (paranoid checks have none): a
		// key whose Add returned must be found through it.
		FilterBytes:     writers * perWriter * EntrySize(16, 32) / 128,
		filterAfterGets: 200,
	})
	cmpInternal := m.Comparer().CompareInternal
	key := func(w, i int) []byte { return []byte(fmt.Sprintf("w%d-%08d", w, (i*7919)%perWriter)) }
	value := func(w, i int) []byte { return []byte(fmt.Sprintf("value of %d/%d", w, i)) }
	var seq atomic.Uint64
	published := make([]atomic.Int64, writers) // keys [0, published) of writer w are in
	var done atomic.Bool
	var failures atomic.Int64
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 5 {
			t.Errorf(format, args...)
		}
	}
	var wg, rg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i += batch {
				n := min(batch, perWriter-i)
				need := 0
				for j := 0; j < n; j++ {
					need += EntrySize(len(key(w, i+j)), len(value(w, i+j)))
				}
				if !m.Reserve(need) {
					fail("writer %d: Reserve(%d) refused at %d", w, need, i)
					return
				}
				s := seq.Add(uint64(n)) - uint64(n) + 1
				for j := 0; j < n; j++ {
					if err := m.Add(s+uint64(j), base.KindSet, key(w, i+j), value(w, i+j)); err != nil {
						fail("writer %d: Add: %v", w, err)
						return
					}
				}
				published[w].Store(int64(i + n))
			}
		}(w)
	}
	for r := 0; r < readers; r++ {
		rg.Add(1)
		go func(r int) {
			defer rg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 11))
			it := m.NewIter(IterOptions{})
			for !done.Load() {
				for i := 0; i < 100; i++ {
					w := rng.IntN(writers)
					p := int(published[w].Load())
					if p == 0 {
						continue
					}
					j := rng.IntN(p)
					v, _, _, found, err := m.Get(key(w, j), base.SeqNumMax)
					if err != nil || !found || !bytes.Equal(v, value(w, j)) {
						fail("reader %d: Get(%s) = %q %t %v", r, key(w, j), v, found, err)
					}
				}
				var prev base.InternalKey
				n := 0
				for ok := it.First(); ok; ok = it.Next() {
					if n > 0 && cmpInternal(prev, it.Key()) >= 0 {
						fail("reader %d: forward %s then %s", r, prev, it.Key())
					}
					prev, n = it.Key(), n+1
				}
				n = 0
				for ok := it.Last(); ok; ok = it.Prev() {
					if n > 0 && cmpInternal(it.Key(), prev) >= 0 {
						fail("reader %d: backward %s then %s", r, prev, it.Key())
					}
					prev, n = it.Key(), n+1
				}
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
	checkAfterConcurrent(t, m, key, value, writers, perWriter)
}

// checkAfterConcurrent checks a memtable once TestConcurrent's writers are
// done: every key readable with its value, the Prev walk the Next walk
// reversed, the count exact, Validate passing.
func checkAfterConcurrent(t *testing.T, m *MemTable, key, value func(w, i int) []byte, writers, perWriter int) {
	cmpInternal := m.Comparer().CompareInternal
	for w := 0; w < writers; w++ {
		for i := 0; i < perWriter; i++ {
			v, _, _, found, err := m.Get(key(w, i), base.SeqNumMax)
			if err != nil || !found || !bytes.Equal(v, value(w, i)) {
				t.Fatalf("Get(%s) after the writers: %q %t %v", key(w, i), v, found, err)
			}
		}
	}
	it := m.NewIter(IterOptions{Validate: true})
	var fwd []base.InternalKey
	for ok := it.First(); ok; ok = it.Next() {
		fwd = append(fwd, it.Key())
	}
	n := len(fwd)
	for ok := it.Last(); ok; ok = it.Prev() {
		n--
		if n < 0 || cmpInternal(fwd[n], it.Key()) != 0 {
			t.Fatalf("Prev walk disagrees with Next walk at %d", n)
		}
	}
	if n != 0 || it.Error() != nil {
		t.Fatalf("Prev walk ended at %d: %v", n, it.Error())
	}
	if len(fwd) != writers*perWriter || m.Count() != uint64(len(fwd)) {
		t.Fatalf("%d entries, Count %d, want %d", len(fwd), m.Count(), writers*perWriter)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
}
