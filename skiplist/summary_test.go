package skiplist

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestSummaryOrder checks the property searches rely on: a key's summary
// never exceeds the summary of a bigger key, for prefixes chosen from keys
// of every shape and for keys around and outside their ranges.
func TestSummaryOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, sh := range benchShapes {
		t.Run(sh.name, func(t *testing.T) {
			var keys [][]byte
			for range 500 {
				keys = append(keys, sh.key(nil, rng.Uint64()%(1<<20)))
			}
			slices.SortFunc(keys, bytes.Compare)
			sp := newSummaryPrefix(keys[0], keys[len(keys)-1], keys)
			// Probes: the shape's keys, their prefixes and extensions,
			// and bytes changed to any value, so that keys leave the
			// prefix and the range on both sides.
			probes := slices.Clone(keys)
			for range 4000 {
				k := slices.Clone(keys[rng.IntN(len(keys))])
				switch rng.IntN(4) {
				case 0:
					k = k[:rng.IntN(len(k)+1)]
				case 1:
					k = append(k, byte(rng.IntN(256)))
				default:
					k[rng.IntN(len(k))] = byte(rng.IntN(256))
				}
				probes = append(probes, k)
			}
			slices.SortFunc(probes, bytes.Compare)
			prev := summaryOf(sp, probes[0])
			for i := 1; i < len(probes); i++ {
				s := summaryOf(sp, probes[i])
				if s < prev {
					t.Fatalf("summary of %x = %d, below %d of the smaller %x (prefix %q, clamp %v [%d, %d], radix %d, %d digits)",
						probes[i], s, prev, probes[i-1], sp.p, sp.clamp, sp.lo, sp.hi, sp.r, sp.n)
				}
				prev = s
			}
			// The summaries must tell the shape's own keys apart, or they
			// are of no use to searches.
			keys = slices.CompactFunc(keys, bytes.Equal)
			sums := map[uint32]bool{}
			for _, k := range keys {
				sums[summaryOf(sp, k)] = true
			}
			if len(sums) < len(keys)*9/10 {
				t.Errorf("only %d distinct summaries for %d keys (prefix %q, radix %d, %d digits)", len(sums), len(keys), sp.p, sp.r, sp.n)
			}
		})
	}
}

// summaryList builds an InternalKeys list of n random keys of a shape,
// half through Add and half through an Inserter, and the sorted model of
// its user keys.
func summaryList(t *testing.T, key func([]byte, uint64) []byte, n int, validate bool) (*Skiplist, [][]byte) {
	t.Helper()
	l := newListFor(t, n, maxShapeKey, validate)
	ins := l.NewInserter()
	rng := rand.New(rand.NewPCG(11, 12))
	var keys [][]byte
	for len(keys) < n {
		u := key(nil, rng.Uint64()%(1<<20))
		add := l.Add
		if len(keys)%2 == 1 {
			add = ins.Add
		}
		if err := add(internalKey(nil, u), []byte("value")); err == nil {
			keys = append(keys, u)
		} else if err != ErrRecordExists {
			t.Fatal(err)
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	return l, keys
}

// summarized counts the links of levels 1 and up whose summary is not 0.
func summarized(l *Skiplist) (links, nonzero int) {
	for lvl := 1; lvl < l.Height(); lvl++ {
		for x := l.head; x != l.tail; {
			w := l.loadLink(x, lvl)
			links++
			if w>>32 != 0 {
				nonzero++
			}
			x = uint32(w)
		}
	}
	return links, nonzero
}

// TestSummarySearches checks searches in lists whose links carry summaries
// (most of them, once the list chose its prefix), validating and not, for
// present and absent keys of every shape, against a sorted model.
func TestSummarySearches(t *testing.T) {
	const n = 20000
	for _, sh := range benchShapes {
		for _, validate := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/validate=%t", sh.name, validate), func(t *testing.T) {
				l, keys := summaryList(t, sh.key, n, validate)
				if l.sum.Load() == nil {
					t.Fatal("the list chose no summary prefix")
				}
				if links, nonzero := summarized(l); nonzero < links*3/4 {
					t.Fatalf("%d of %d upper links carry a summary", nonzero, links)
				}
				if got, err := l.Verify(nil); err != nil || got != n {
					t.Fatalf("Verify = %d, %v", got, err)
				}
				rng := rand.New(rand.NewPCG(13, 14))
				for _, v := range []bool{false, true} {
					it := l.NewIter(v)
					for range 4000 {
						probe := sh.key(nil, rng.Uint64()%(1<<20))
						i, found := slices.BinarySearchFunc(keys, probe, bytes.Compare)
						it.SeekGESplit(probe, ^uint64(0))
						checkSummarySeek(t, &it, keys, i, "SeekGE", probe)
						if found {
							i++
						}
						it.SeekLTSplit(probe, 0)
						checkSummarySeek(t, &it, keys, i-1, "SeekLT", probe)
					}
				}
			})
		}
	}
}

func checkSummarySeek(t *testing.T, it *Iterator, keys [][]byte, i int, op string, probe []byte) {
	t.Helper()
	if it.Error() != nil {
		t.Fatalf("%s(%x): %v", op, probe, it.Error())
	}
	if i < 0 || i >= len(keys) {
		if it.Valid() {
			t.Fatalf("%s(%x) = %x, want none", op, probe, it.Key())
		}
		return
	}
	if !it.Valid() || !bytes.Equal(it.Key()[:len(it.Key())-8], keys[i]) {
		t.Fatalf("%s(%x): valid %v, want %x", op, probe, it.Valid(), keys[i])
	}
}

// TestCorruptSummary damages one link summary: Verify (the flush-side
// check) must report it, and validating searches, which never read
// summaries, must still find every key. A summary of 0 proves nothing and
// is not damage.
func TestCorruptSummary(t *testing.T) {
	l, keys := summaryList(t, benchShapes[0].key, 5000, false)
	// A link of level 1 with a summary, and the node it leads to.
	var from uint32
	var w uint64
	for x := l.head; ; x = uint32(w) {
		w = l.loadLink(x, 1)
		if uint32(w) == l.tail {
			t.Fatal("no level-1 link carries a summary")
		}
		if w>>32 != 0 {
			from = x
			break
		}
	}
	set := func(sum uint32) { *l.towerPtr(from, 1) = linkWord(uint32(w), sum) }
	set(0)
	if _, err := l.Verify(nil); err != nil {
		t.Fatalf("Verify with a summary of 0: %v", err)
	}
	set(uint32(w>>32) ^ 0x8000_0000)
	_, err := l.Verify(nil)
	if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "carries summary") {
		t.Fatalf("Verify with a damaged summary: %v", err)
	}
	it := l.NewIter(true)
	for _, k := range keys {
		if !it.SeekGESplit(k, ^uint64(0)) || !bytes.Equal(it.Key()[:len(k)], k) {
			t.Fatalf("validating SeekGE(%x) with a damaged summary: valid %v, error %v", k, it.Valid(), it.Error())
		}
	}
}

// TestSummaryChoice pins what a list picks for each key shape: the raw
// bytes after the prefix for binary keys, a radix of their range for text;
// and a prefix that leaves the summary's digits room to grow when the
// first keys came in order, so that later ones keep distinct summaries.
func TestSummaryChoice(t *testing.T) {
	type choice struct {
		prefix string
		clamp  bool
		r      uint32
		n      int
	}
	varlen := uint32('u'-'0') + 3 // digits, ':' and the fields' letters
	want := map[string]choice{
		"dbbench":  {"\x00\x00\x00\x00", false, 256, 4},
		"decimal":  {"00000000", true, 12, 8},
		"prefixed": {"/tbl/0053/1/\x00\x00\x00\x00", false, 256, 4},
		"hashed":   {"h", false, 256, 4},
		"varlen":   {"user:", true, varlen, 5},
	}
	for _, sh := range benchShapes {
		for _, inOrder := range []bool{false, true} {
			var l *Skiplist
			var keys [][]byte
			if inOrder {
				l = newListFor(t, 20000, maxShapeKey, false)
				ins := l.NewInserter()
				for v := range uint64(20000) {
					k := sh.key(nil, v)
					if err := ins.Add(internalKey(nil, k), []byte("value")); err != nil && err != ErrRecordExists {
						t.Fatal(err)
					}
					keys = append(keys, k)
				}
				slices.SortFunc(keys, bytes.Compare)
				keys = slices.CompactFunc(keys, bytes.Equal)
			} else {
				l, keys = summaryList(t, sh.key, 20000, false)
			}
			sp, w := l.sum.Load(), want[sh.name]
			if sp == nil || string(sp.p) != w.prefix || sp.clamp != w.clamp || sp.r != w.r || sp.n != w.n {
				t.Errorf("%s, in order %t: summary prefix %+v, want %+v", sh.name, inOrder, sp, w)
				continue
			}
			sums := map[uint32]bool{}
			for _, k := range keys {
				sums[summaryOf(sp, k)] = true
			}
			// varlen's 5 characters after "user:" leave some 11 % of
			// its ids of 6 and 7 digits sharing a summary.
			if len(sums) < len(keys)*85/100 {
				t.Errorf("%s, in order %t: %d distinct summaries of %d keys", sh.name, inOrder, len(sums), len(keys))
			}
		}
	}
}

// TestSummaryWaitsForKeys checks that a list picks its summary prefix from
// at least summaryMinKeys entries, whatever the arena's growth says: a
// second list in the same arena (the memtable's range deletions) and a
// list of large values pass summaryAfter with a few entries, and must not
// pick from them.
func TestSummaryWaitsForKeys(t *testing.T) {
	arena, err := NewArena(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	points, err := New(arena, Options{InternalKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	dels, err := New(arena, Options{InternalKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 4<<10)
	var kbuf []byte
	add := func(l *Skiplist, i int, value []byte) {
		t.Helper()
		kbuf = internalKey(kbuf, fmt.Appendf(nil, "%016d", i))
		if err := l.Add(kbuf, value); err != nil {
			t.Fatal(err)
		}
	}
	// 40 entries of 4 KiB: past summaryAfter, under summaryMinKeys.
	for i := range 40 {
		add(points, i*7919%1000, big)
	}
	add(dels, 5, nil)
	add(dels, 6, nil)
	if points.sum.Load() != nil || dels.sum.Load() != nil {
		t.Fatalf("a prefix picked from under %d keys: points %+v, range deletions %+v",
			summaryMinKeys, points.sum.Load(), dels.sum.Load())
	}
	// Tried and deferred: the next try waits for the arena to grow again.
	if at := points.sumAt.Load(); at <= points.head+summaryAfter {
		t.Fatalf("sumAt %d after deferred picks, want past head %d + %d", at, points.head, summaryAfter)
	}
	for i := 40; i < 2*summaryMinKeys+40; i++ {
		add(points, i*7919%1000, big)
	}
	if points.sum.Load() == nil {
		t.Fatalf("no prefix after %d entries", 2*summaryMinKeys+40)
	}
	if dels.sum.Load() != nil {
		t.Fatal("the two-entry list picked a prefix")
	}
	if _, err := points.Verify(nil); err != nil {
		t.Fatal(err)
	}
}
