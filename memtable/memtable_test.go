package memtable

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/testcmp"
)

var _ base.InternalIterator = (*Iter)(nil)

func mustNew(t testing.TB, o Options) *MemTable {
	t.Helper()
	if o.Size == 0 {
		o.Size = 1 << 20
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want []string // substrings of the error; nil = valid
	}{
		{Options{}, nil},
		{Options{ProtectionBytesPerKey: 8}, nil}, // the default type, XXH3
		{Options{ChecksumType: checksum.XXH3, ProtectionBytesPerKey: 8}, nil},
		{Options{ChecksumType: checksum.CRC32c, ProtectionBytesPerKey: 1}, nil},
		{Options{ChecksumType: checksum.CRC64, ProtectionBytesPerKey: 2, ParanoidMemoryChecks: true}, nil},
		{Options{ChecksumType: checksum.XXHash, ProtectionBytesPerKey: 4}, nil},
		{Options{ChecksumType: checksum.XXH3, ProtectionBytesPerKey: 3}, []string{"ProtectionBytesPerKey 3", "0, 1, 2, 4 or 8"}},
		{Options{ChecksumType: checksum.XXH3, ProtectionBytesPerKey: -1}, []string{"ProtectionBytesPerKey -1"}},
		{Options{ChecksumType: checksum.XXH3, ProtectionBytesPerKey: 16}, []string{"ProtectionBytesPerKey 16"}},
		{Options{ChecksumType: checksum.None, ProtectionBytesPerKey: 8}, []string{"ChecksumType is none"}},
		{Options{ChecksumType: 42}, []string{"ChecksumType(42)"}},
		{Options{Comparer: testcmp.Reverse}, nil},
		{Options{Comparer: &base.Comparer{Compare: bytes.Compare}}, []string{"Comparer has no Name"}},
		// Every problem at once.
		{Options{ChecksumType: 9, ProtectionBytesPerKey: 5, Comparer: &base.Comparer{Name: "x"}}, []string{"ChecksumType(9)", "ProtectionBytesPerKey 5", "Comparer x has no Compare"}},
	} {
		err := c.o.Validate()
		if c.want == nil {
			if err != nil {
				t.Errorf("%+v: %v", c.o, err)
			}
			continue
		}
		if !errors.Is(err, base.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", c.o, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %q lacks %q", c.o, err, w)
			}
		}
		o := c.o
		o.Size = 1 << 16
		if _, err := New(o); !errors.Is(err, base.ErrInvalidArgument) {
			t.Errorf("New(%+v) = %v", o, err)
		}
	}
	over := MaxSize
	over++ // at run time: on 32-bit platforms this wraps, still invalid
	for _, size := range []int{0, -1, MinSize - 1, over} {
		if _, err := New(Options{Size: size}); !errors.Is(err, base.ErrInvalidArgument) {
			t.Errorf("New(Size %d) = %v, want ErrInvalidArgument", size, err)
		}
	}
	m, err := New(Options{Size: MinSize})
	if err != nil {
		t.Fatalf("New(MinSize): %v", err)
	}
	if err := m.Add(1, base.KindSet, []byte("k"), nil); !errors.Is(err, ErrArenaFull) {
		t.Fatalf("Add to a memtable of MinSize: %v", err)
	}
}

func TestAddErrors(t *testing.T) {
	m := mustNew(t, Options{})
	if err := m.Add(1, base.Kind(7), []byte("k"), nil); !errors.Is(err, base.ErrInvalidArgument) {
		t.Errorf("kind 7: %v", err)
	}
	if err := m.Add(base.SeqNumMax+1, base.KindSet, []byte("k"), nil); !errors.Is(err, base.ErrInvalidArgument) {
		t.Errorf("seqnum too large: %v", err)
	}
	if err := m.Add(base.SeqNumMax, base.KindSet, []byte("k"), []byte("v")); err != nil {
		t.Errorf("max seqnum: %v", err)
	}
	if err := m.Add(base.SeqNumMax, base.KindSet, []byte("k"), []byte("other")); !errors.Is(err, ErrRecordExists) {
		t.Errorf("duplicate: %v", err)
	}
	// Same user key and seqnum, other kind: a different internal key.
	if err := m.Add(base.SeqNumMax, base.KindDelete, []byte("k"), nil); err != nil {
		t.Errorf("same key+seq, other kind: %v", err)
	}
	if m.Count() != 2 {
		t.Errorf("Count = %d, want 2", m.Count())
	}
	// Set sorts before Delete at equal seqnum (kind descending).
	v, seq, kind, found, err := m.Get([]byte("k"), base.SeqNumMax)
	if err != nil || !found || kind != base.KindSet || seq != base.SeqNumMax || string(v) != "v" {
		t.Errorf("Get = %q %d %s %t %v", v, seq, kind, found, err)
	}
	if err := m.Validate(); err != nil {
		t.Error(err)
	}
}

// TestArenaFull fills a memtable without reservations: Add ends with
// ErrArenaFull, nothing inserted is lost, and Count matches.
func TestArenaFull(t *testing.T) {
	m := mustNew(t, Options{Size: 64 << 10, ChecksumType: checksum.XXH3, ProtectionBytesPerKey: 8})
	var n uint64
	for ; ; n++ {
		err := m.Add(n+1, base.KindSet, []byte(fmt.Sprintf("key%06d", n)), bytes.Repeat([]byte{'v'}, 100))
		if errors.Is(err, ErrArenaFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 100 || m.Count() != n {
		t.Fatalf("%d adds before full, Count %d", n, m.Count())
	}
	if m.ApproximateSize() > m.Capacity() {
		t.Fatalf("size %d above capacity %d", m.ApproximateSize(), m.Capacity())
	}
	for i := uint64(0); i < n; i++ {
		if _, _, _, found, err := m.Get([]byte(fmt.Sprintf("key%06d", i)), base.SeqNumMax); !found || err != nil {
			t.Fatalf("key%06d lost: %v", i, err)
		}
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestReserve: reservations never over-commit. Two goroutines reserve
// batches of random sizes until Reserve refuses, and every Add of a
// reserved batch must succeed; afterwards the pessimism is given back.
func TestReserve(t *testing.T) {
	for _, mh := range []int{0, 1} {
		m := mustNew(t, Options{Size: 256 << 10, ChecksumType: checksum.CRC32c, ProtectionBytesPerKey: 2, maxHeight: mh})
		if m.Reserve(m.Capacity() + 1) {
			t.Fatal("reserved more than the capacity")
		}
		if m.Reserve(-1) {
			t.Fatal("reserved a negative amount")
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var seq uint64
		nextSeq := func(n int) uint64 {
			mu.Lock()
			defer mu.Unlock()
			s := seq + 1
			seq += uint64(n)
			return s
		}
		batches := [2]int{}
		refused := [2]int{} // the reservation each goroutine was refused last
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 3))
				for {
					type kv struct{ k, v []byte }
					batch := make([]kv, 1+rng.IntN(10))
					need := 0
					for i := range batch {
						batch[i] = kv{make([]byte, rng.IntN(40)), make([]byte, rng.IntN(300))}
						need += EntrySize(len(batch[i].k), len(batch[i].v))
					}
					if !m.Reserve(need) {
						refused[g] = need
						return
					}
					s := nextSeq(len(batch))
					for i, e := range batch {
						if err := m.Add(s+uint64(i), base.KindSet, e.k, e.v); err != nil {
							t.Errorf("goroutine %d: reserved Add failed: %v", g, err)
							return
						}
					}
					batches[g]++
				}
			}(g)
		}
		wg.Wait()
		if batches[0]+batches[1] < 20 {
			t.Fatalf("only %v batches fit", batches)
		}
		if p := m.pending.Load(); p != 0 {
			t.Fatalf("%d bytes still reserved after all batches applied", p)
		}
		// The pessimism is gone: the memtable is nearly full, not merely
		// fully reserved. When a goroutine was refused, the other could
		// hold at most one batch (10 entries) of not yet given back
		// pessimism, each less than EntrySize(0, 0); so the free space is
		// below the smaller refused reservation plus that.
		if free := m.Capacity() - m.ApproximateSize(); free >= min(refused[0], refused[1])+10*EntrySize(0, 0) {
			t.Fatalf("%d bytes free after Reserve refused %v", free, refused)
		}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	// Unreserve gives back an abandoned reservation.
	m := mustNew(t, Options{Size: 64 << 10})
	if !m.Reserve(60 << 10) {
		t.Fatal("first reservation refused")
	}
	if m.Reserve(10 << 10) {
		t.Fatal("over-committed")
	}
	m.Unreserve(60 << 10)
	if !m.Reserve(10 << 10) {
		t.Fatal("Unreserve did not give the space back")
	}
}

// TestRangeDels: range tombstones come out ordered by start under the
// comparer, then seqnum descending. Under Reverse the tombstones are the
// default's mirrored (each start sorts before its end in that order).
func TestRangeDels(t *testing.T) {
	for _, c := range []struct {
		cmp      *base.Comparer
		mirrored bool
		want     []string
	}{
		{base.DefaultComparer, false, []string{"a#9-c", "b#7-z", "b#5-d", "b#3-c"}},
		{testcmp.Versioned, false, []string{"a#9-c", "b#7-z", "b#5-d", "b#3-c"}}, // short keys: all prefix
		{testcmp.Reverse, true, []string{"z#7-b", "d#5-b", "c#9-a", "c#3-b"}},
	} {
		for _, paranoid := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/paranoid=%t", c.cmp.Name, paranoid), func(t *testing.T) {
				runRangeDels(t, c.cmp, c.mirrored, paranoid, c.want)
			})
		}
	}
}

func runRangeDels(t *testing.T, cmp *base.Comparer, mirrored, paranoid bool, want []string) {
	m := mustNew(t, Options{ParanoidMemoryChecks: paranoid, ChecksumType: checksum.XXH3, ProtectionBytesPerKey: 4, Comparer: cmp})
	adds := []struct {
		seq        uint64
		start, end string
	}{{5, "b", "d"}, {9, "a", "c"}, {7, "b", "z"}, {3, "b", "c"}}
	for _, a := range adds {
		if mirrored {
			a.start, a.end = a.end, a.start
		}
		if err := m.Add(a.seq, base.KindRangeDelete, []byte(a.start), []byte(a.end)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Add(8, base.KindSet, []byte("b"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	// Ordered by start ascending, then seqnum descending.
	var got []string
	it := m.NewRangeDelIter()
	for ok := it.First(); ok; ok = it.Next() {
		if it.Key().Kind() != base.KindRangeDelete {
			t.Fatalf("kind %s", it.Key().Kind())
		}
		got = append(got, fmt.Sprintf("%s#%d-%s", it.Key().UserKey, it.Key().SeqNum(), it.Value()))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || it.Error() != nil {
		t.Fatalf("range-del iterator: %v (err %v), want %v", got, it.Error(), want)
	}
	rd, err := m.RangeDels(6)
	if err != nil || len(rd) != 2 || rd[0].Seq != 5 || rd[1].Seq != 3 || cmp.Compare(rd[0].Start, rd[1].Start) > 0 {
		t.Fatalf("RangeDels(6) = %v, %v", rd, err)
	}
	// Range tombstones are not point entries.
	if _, _, _, found, err := m.Get([]byte("a"), 100); found || err != nil {
		t.Fatalf("Get saw a range tombstone: %t %v", found, err)
	}
	if v, seq, _, found, _ := m.Get([]byte("b"), 100); !found || seq != 8 || string(v) != "x" {
		t.Fatalf("Get(b) = %q %d %t", v, seq, found)
	}
	if m.Count() != 5 {
		t.Fatalf("Count = %d", m.Count())
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestGetSnapshots reads every version of a key at snapshots between them,
// under every test comparer: the same results whatever the order.
func TestGetSnapshots(t *testing.T) {
	for _, cmp := range testComparers {
		t.Run(cmp.Name, func(t *testing.T) { runGetSnapshots(t, cmp) })
	}
}

func runGetSnapshots(t *testing.T, cmp *base.Comparer) {
	m := mustNew(t, Options{ChecksumType: checksum.XXH3, ProtectionBytesPerKey: 8, Comparer: cmp})
	m.Add(10, base.KindSet, []byte("k"), []byte("v10"))
	m.Add(20, base.KindDelete, []byte("k"), nil)
	m.Add(30, base.KindSet, []byte("k"), []byte("v30"))
	m.Add(15, base.KindSet, []byte("k2"), []byte("other"))
	for _, c := range []struct {
		snap  uint64
		found bool
		seq   uint64
		kind  base.Kind
		val   string
	}{
		{5, false, 0, 0, ""},
		{10, true, 10, base.KindSet, "v10"},
		{19, true, 10, base.KindSet, "v10"},
		{20, true, 20, base.KindDelete, ""},
		{29, true, 20, base.KindDelete, ""},
		{30, true, 30, base.KindSet, "v30"},
		{base.SeqNumMax, true, 30, base.KindSet, "v30"},
	} {
		v, seq, kind, found, err := m.Get([]byte("k"), c.snap)
		if err != nil || found != c.found || seq != c.seq || kind != c.kind || string(v) != c.val {
			t.Errorf("Get(k, %d) = %q %d %s %t %v, want %+v", c.snap, v, seq, kind, found, err, c)
		}
	}
	for _, k := range []string{"", "j", "k0", "k3", "zz"} {
		if _, _, _, found, err := m.Get([]byte(k), base.SeqNumMax); found || err != nil {
			t.Errorf("Get(%q) found=%t err=%v", k, found, err)
		}
	}
}

func TestEntryForTesting(t *testing.T) {
	for _, prot := range []int{0, 8} {
		o := Options{ProtectionBytesPerKey: prot}
		if prot > 0 {
			o.ChecksumType = checksum.XXH3
		}
		m := mustNew(t, o)
		m.Add(1, base.KindSet, []byte("alpha"), []byte("old"))
		m.Add(2, base.KindSet, []byte("alpha"), []byte("newest"))
		m.Add(3, base.KindRangeDelete, []byte("beta"), []byte("gamma"))
		arena := m.arenaForTesting()
		if len(arena) != m.ApproximateSize() {
			t.Fatalf("arena %d bytes, size %d", len(arena), m.ApproximateSize())
		}
		for _, c := range []struct{ key, val string }{{"alpha", "newest"}, {"beta", "gamma"}} {
			ko, kl, vo, vl, ok := m.entryForTesting([]byte(c.key))
			if !ok || string(arena[ko:ko+kl]) != c.key || string(arena[vo:vo+vl]) != c.val {
				t.Fatalf("EntryForTesting(%s) = %d %d %d %d %t", c.key, ko, kl, vo, vl, ok)
			}
		}
		if _, _, _, _, ok := m.entryForTesting([]byte("alph")); ok {
			t.Fatal("EntryForTesting found a missing key")
		}
	}
}

// TestIteratorContract covers the parts of base.InternalIterator's contract
// the model run does not: moves on an exhausted iterator, and Close.
// Under each test comparer, first and second are its first and second key.
func TestIteratorContract(t *testing.T) {
	for _, cmp := range testComparers {
		first, second := "a", "b"
		if cmp.Compare([]byte(first), []byte(second)) > 0 {
			first, second = second, first
		}
		t.Run(cmp.Name, func(t *testing.T) { runIteratorContract(t, cmp, first, second) })
	}
}

func runIteratorContract(t *testing.T, cmp *base.Comparer, first, second string) {
	m := mustNew(t, Options{ParanoidMemoryChecks: true, Comparer: cmp})
	it := m.NewIter(IterOptions{})
	if it.First() || it.Last() || it.Valid() || it.Next() || it.Prev() || it.Error() != nil {
		t.Fatal("empty memtable iterator")
	}
	m.Add(1, base.KindSet, []byte("a"), []byte("1"))
	m.Add(2, base.KindSet, []byte("b"), []byte("2"))
	if !it.Last() || string(it.Key().UserKey) != second || it.Next() || it.Next() || it.Valid() {
		t.Fatal("Next past the end")
	}
	if !it.SeekGE([]byte(first)) || string(it.Key().UserKey) != first || it.Prev() || it.Prev() {
		t.Fatal("Prev past the start")
	}
	if !it.SeekLT([]byte(second)) || string(it.Key().UserKey) != first {
		t.Fatal("SeekLT")
	}
	if err := it.Close(); err != nil || it.Valid() {
		t.Fatal("Close")
	}
}
