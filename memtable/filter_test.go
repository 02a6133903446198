package memtable

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// TestFilter checks the filter alone: no key added is ever refused, and at
// 8 bits a key (the DB's default sizing for entries of ~130 bytes) at
// most 4 % of keys never added pass (a blocked filter of 6 probes: ~2.5 %).
func TestFilter(t *testing.T) {
	for _, manualMem := range []bool{false, true} {
		const n = 50000
		f := newFilter(n, manualMem) // 8 bits a key
		if got, want := 8*len(f.words), n/64*64; got != want {
			t.Fatalf("a filter of %d bytes reports %d, want whole lines, %d", n, got, want)
		}
		for i := range n {
			f.add(filterHash(fmt.Appendf(nil, "in-%d", i)))
		}
		for i := range n {
			if k := fmt.Appendf(nil, "in-%d", i); !f.mayContain(filterHash(k)) {
				t.Fatalf("manual=%t: %s was added, the filter refuses it", manualMem, k)
			}
		}
		passed := 0
		for i := range n {
			if f.mayContain(filterHash(fmt.Appendf(nil, "out-%d", i))) {
				passed++
			}
		}
		if rate := float64(passed) / n; rate > 0.04 {
			t.Fatalf("manual=%t: %.2f %% of keys never added pass, want <= 4 %%", manualMem, 100*rate)
		}
		f.free()
	}
	if f := newFilter(1, false); f.numLines != 1 || 8*len(f.words) != 64 || filterSize(1) != 64 || filterSize(0) != 0 {
		t.Fatalf("the smallest filter has %d lines, %d bytes; want one line", f.numLines, 8*len(f.words))
	}
	var none *filter
	none.free() // a nil filter frees nothing
}

// buildFilter builds m's filter now and waits for it to be ready.
func (m *MemTable) buildFilter(tb testing.TB) {
	tb.Helper()
	m.filter.start(m.backfillFilter)
	m.filter.building.Wait()
	if !m.filter.ready.Load() {
		tb.Fatal("the filter's build failed")
	}
}

// TestEmptyMemTableGet checks that Gets of an empty memtable answer
// "absent" without counting toward the filter's build (a DB's memtable
// after a flush must not build a filter of nothing), and that the first
// entry is found.
func TestEmptyMemTableGet(t *testing.T) {
	m := mustNew(t, Options{Size: 1 << 20, FilterBytes: 1 << 13, filterAfterGets: 5})
	for i := range 20 {
		if _, _, _, found, err := m.Get(fmt.Appendf(nil, "k%d", i), base.SeqNumMax); found || err != nil {
			t.Fatalf("Get of an empty memtable: found %t, %v", found, err)
		}
	}
	if m.filter.f.Load() != nil || m.filter.searched.Load() != 0 {
		t.Fatalf("Gets of an empty memtable counted toward its filter (%d)", m.filter.searched.Load())
	}
	if err := m.Add(1, base.KindSet, []byte("k1"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, _, _, found, err := m.Get([]byte("k1"), base.SeqNumMax); !found || err != nil || string(v) != "v" {
		t.Fatalf("Get after the first Add: %q %t %v", v, found, err)
	}
}

// TestMemTableFilter checks what the filter changes for a MemTable: its
// Capacity counts it from the start; it is built after the Gets of absent
// keys it waits for, not before, and never for Gets that find their keys; a Get of a key it refuses answers "absent" without the
// search; every point kind (Set, Delete, Merge) enters it, and a range
// tombstone does not; paranoid checks have none.
func TestMemTableFilter(t *testing.T) {
	m := mustNew(t, Options{Size: 1 << 20, FilterBytes: 1 << 13, filterAfterGets: 5})
	if m.Capacity() != 1<<20+1<<13 {
		t.Fatalf("Capacity %d; want a filter of 8 KiB counted in it", m.Capacity())
	}
	key := func(i int) []byte { return fmt.Appendf(nil, "k%d", i) }
	for i, kind := range []base.Kind{base.KindSet, base.KindDelete, base.KindMerge} {
		if err := m.Add(uint64(10+i), kind, key(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Add(20, base.KindRangeDelete, []byte("r"), []byte("s")); err != nil {
		t.Fatal(err)
	}
	// Gets that find their keys never build it; Gets of absent keys do,
	// at the 5th.
	for i := range 20 {
		m.Get(key(i%3), base.SeqNumMax)
	}
	for i := range 4 {
		m.Get(key(100+i), base.SeqNumMax)
	}
	if m.filter.f.Load() != nil {
		t.Fatal("a filter before the Gets it waits for")
	}
	m.Get(key(104), base.SeqNumMax) // the 5th: the build starts
	m.filter.building.Wait()
	f := m.filter.f.Load()
	if f == nil || !m.filter.ready.Load() {
		t.Fatal("no filter ready after the 5th Get")
	}
	// Entries added before the build (backfilled) and after it.
	if err := m.Add(30, base.KindSet, key(3), []byte("v")); err != nil {
		t.Fatal(err)
	}
	for i, kind := range []base.Kind{base.KindSet, base.KindDelete, base.KindMerge, base.KindSet} {
		if !f.mayContain(filterHash(key(i))) {
			t.Fatalf("a %s entry is not in the filter", kind)
		}
		if _, _, got, found, err := m.Get(key(i), base.SeqNumMax); err != nil || !found || got != kind {
			t.Fatalf("Get(%s) = %s %t %v", key(i), got, found, err)
		}
	}
	if f.mayContain(filterHash([]byte("r"))) {
		t.Fatal("a range tombstone's start key is in the point filter")
	}
	// A key the filter refuses is absent without a search: a filter that
	// refuses everything hides even the keys that are there.
	clear(f.words)
	if _, _, _, found, err := m.Get(key(0), base.SeqNumMax); found || err != nil {
		t.Fatalf("Get of a key the filter refuses: found %t, %v", found, err)
	}
	p := mustNew(t, Options{Size: 1 << 20, FilterBytes: 1 << 13, ParanoidMemoryChecks: true, filterAfterGets: 1})
	for range 3 {
		p.Get(key(0), base.SeqNumMax)
	}
	if p.filter.f.Load() != nil || p.Capacity() != 1<<20 {
		t.Fatalf("paranoid checks: filter %v, Capacity %d; want none", p.filter.f.Load() != nil, p.Capacity())
	}
}

// TestFilterBuildDuringAdds builds the filter while writers add keys:
// every key, whether the walk or its own Add put it there, must pass.
func TestFilterBuildDuringAdds(t *testing.T) {
	const writers, perWriter = 2, 20000
	m := mustNew(t, Options{Size: writers * perWriter * EntrySize(16, 8), FilterBytes: 1 << 16, ManualMemory: true})
	defer m.Release()
	key := func(w, i int) []byte { return fmt.Appendf(nil, "w%d-%010d", w, i*7919%perWriter) }
	var wg sync.WaitGroup
	var seq atomic.Uint64
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if i == perWriter/4 && w == 0 {
					m.filter.start(m.backfillFilter)
				}
				if err := m.Add(seq.Add(1), base.KindSet, key(w, i), []byte("v")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	m.filter.building.Wait()
	f := m.filter.f.Load()
	if f == nil || !m.filter.ready.Load() {
		t.Fatal("the filter was not built")
	}
	for w := range writers {
		for i := range perWriter {
			if !f.mayContain(filterHash(key(w, i))) {
				t.Fatalf("%s was added, the filter refuses it", key(w, i))
			}
		}
	}
}

// TestFilterPublishedDuringAdd: a filter published, and its walk done,
// between an Add's first look at the filter and its link must still get
// that Add's key (the Add looks again after the link).
func TestFilterPublishedDuringAdd(t *testing.T) {
	m := mustNew(t, Options{Size: 1 << 20, FilterBytes: 1 << 12})
	if err := m.Add(1, base.KindSet, []byte("before"), nil); err != nil {
		t.Fatal(err)
	}
	m.testHookBeforeLink = func() {
		m.testHookBeforeLink = nil
		m.buildFilter(t) // the walk cannot see the entry not yet linked
	}
	if err := m.Add(2, base.KindSet, []byte("during"), nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"before", "during"} {
		if !m.filter.f.Load().mayContain(filterHash([]byte(k))) {
			t.Fatalf("%q is not in the filter", k)
		}
	}
}

// TestFilterBuildRefusesCorruption: a key changed in RAM before the build
// must not enter the filter under its new bytes (its own Get would then be
// refused, where a search reports the damage): the build fails, and Gets
// go on searching.
func TestFilterBuildRefusesCorruption(t *testing.T) {
	m := mustNew(t, Options{Size: 1 << 20, FilterBytes: 1 << 12, ChecksumType: checksum.XXH3, ProtectionBytesPerKey: 8, filterAfterGets: 1})
	for i := range 100 {
		if err := m.Add(uint64(i+1), base.KindSet, fmt.Appendf(nil, "key-%03d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	ko, _, _, _, ok := m.entryForTesting([]byte("key-050"))
	if !ok {
		t.Fatal("no key-050")
	}
	m.arenaForTesting()[ko+len("key-0")] ^= 0x01 // key-050 -> key-150 in RAM
	m.Get([]byte("x"), base.SeqNumMax)           // starts the build
	m.filter.building.Wait()
	if m.filter.ready.Load() {
		t.Fatal("the filter was built over a damaged entry")
	}
	if _, _, _, _, err := m.Get([]byte("key-050"), base.SeqNumMax); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("Get of the damaged key = %v, want ErrCorruption", err)
	}
}

// TestFilterReleaseDuringBuild: Release while the build walks stops it and
// frees everything (a use after the free faults in invariants builds).
func TestFilterReleaseDuringBuild(t *testing.T) {
	m := mustNew(t, Options{Size: 8 << 20, FilterBytes: 1 << 16, ManualMemory: true, filterAfterGets: 1})
	for i := range 40000 {
		if err := m.Add(uint64(i+1), base.KindSet, fmt.Appendf(nil, "key-%08d", i*7919%40000), nil); err != nil {
			t.Fatal(err)
		}
	}
	m.Get([]byte("x"), base.SeqNumMax)
	m.Release()
	if m.filter.building.Wait(); m.filter.f.Load() == nil {
		t.Fatal("no filter was started")
	}
}
