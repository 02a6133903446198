package skiplist

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/invariants"
	"github.com/vigildb/vigil/internal/testcmp"
)

// orderCase names one of the orders a list can have, with a key generator
// that produces keys valid under it.
type orderCase struct {
	name string
	opts Options
	cmp  func(a, b []byte) int
}

func reverseBytewise(a, b []byte) int { return bytes.Compare(b, a) }

// reverseNoAbbrev is testcmp.Reverse without its AbbreviatedKey: every
// comparison of a list under it calls Compare.
var reverseNoAbbrev = &base.Comparer{Compare: testcmp.Reverse.Compare, Name: "vigil.test.ReverseNoAbbrev"}

// userCases are the orders of internal keys under a UserComparer that is
// not bytewise, each with a model order (the comparer's, on encoded
// internal keys).
var userCases = []orderCase{
	{"internal-reverse", Options{InternalKeys: true, UserComparer: testcmp.Reverse}, testcmp.Reverse.Resolve().CompareEncoded},
	{"internal-versioned", Options{InternalKeys: true, UserComparer: testcmp.Versioned}, testcmp.Versioned.Resolve().CompareEncoded},
	{"internal-reverse-noabbrev", Options{InternalKeys: true, UserComparer: reverseNoAbbrev}, reverseNoAbbrev.Resolve().CompareEncoded},
}

// orderCases are every order a list can have; the model run, its fuzz
// target and the abbreviation test go through all of them.
var orderCases = append([]orderCase{
	{"bytewise", Options{}, bytes.Compare},
	{"internal", Options{InternalKeys: true}, compareInternal},
	{"func-reverse", Options{Compare: reverseBytewise}, reverseBytewise},
}, userCases...)

// randKey draws keys from a small alphabet so that common prefixes, prefixes
// of each other, short keys (below the 8-byte abbreviation) and equal
// abbreviations are frequent.
func randKey(rng choices, internal bool) []byte {
	alphabet := []byte{0x00, 'a', 'b', 0xff}
	n := rng.IntN(12)
	shared := 0
	switch rng.IntN(4) {
	case 0:
		n = 8 + rng.IntN(3)
	case 1:
		// A common first 8 bytes, as zero-padded ids and table prefixes
		// have: the abbreviations tie and the second 8 bytes decide, or
		// tie too (lengths 14..19 straddle the 16 that comparison needs).
		n, shared = 14+rng.IntN(6), 8
	}
	k := make([]byte, n, n+8)
	for i := range k {
		k[i] = 'a'
		if i >= shared {
			k[i] = alphabet[rng.IntN(len(alphabet))]
		}
	}
	if internal {
		// Few distinct trailers, so the same prefix shows up with several.
		k = binary.LittleEndian.AppendUint64(k, uint64(rng.IntN(4))<<8|uint64(rng.IntN(2)))
	}
	return k
}

// model is a sorted set of keys under cmp, with the value stored per key.
type model struct {
	cmp  func(a, b []byte) int
	keys [][]byte
	vals map[string][]byte
}

func newModel(cmp func(a, b []byte) int) *model {
	return &model{cmp: cmp, vals: map[string][]byte{}}
}

func (m *model) add(k, v []byte) bool {
	i, found := slices.BinarySearchFunc(m.keys, k, m.cmp)
	if found {
		return false
	}
	m.keys = slices.Insert(m.keys, i, bytes.Clone(k))
	m.vals[string(k)] = bytes.Clone(v)
	return true
}

// ge returns the index of the first key >= k, lt that of the last key < k.
func (m *model) ge(k []byte) int {
	i, _ := slices.BinarySearchFunc(m.keys, k, m.cmp)
	return i
}

func checkAt(t testing.TB, it *Iterator, m *model, idx int, what string) {
	t.Helper()
	if err := it.Error(); err != nil {
		t.Fatalf("%s: unexpected error %v", what, err)
	}
	if idx < 0 || idx >= len(m.keys) {
		if it.Valid() {
			t.Fatalf("%s: iterator valid at %x, model exhausted", what, it.Key())
		}
		return
	}
	if !it.Valid() {
		t.Fatalf("%s: iterator invalid, model at %x", what, m.keys[idx])
	}
	if !bytes.Equal(it.Key(), m.keys[idx]) {
		t.Fatalf("%s: key %x, model %x", what, it.Key(), m.keys[idx])
	}
	if want := m.vals[string(m.keys[idx])]; !bytes.Equal(it.Value(), want) {
		t.Fatalf("%s: value %x, model %x", what, it.Value(), want)
	}
}

// choices is where a model run draws its decisions: a PRNG for the random
// test, the input bytes for the fuzz target.
type choices interface {
	IntN(n int) int
}

// byteChoices draws decisions from a byte string; once it runs dry every
// draw is 0.
type byteChoices struct{ b []byte }

func (c *byteChoices) IntN(n int) int {
	if len(c.b) == 0 || n <= 1 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	return v % n
}

func runModel(t testing.TB, oc orderCase, validate bool, maxHeight int, useInserter bool, rng choices, ops int) {
	internal := oc.opts.InternalKeys
	arena, err := NewArena(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	o := oc.opts
	o.Validate = validate
	o.MaxHeight = maxHeight
	l, err := New(arena, o)
	if err != nil {
		t.Fatal(err)
	}
	// Choose link summaries after a few inserts, so that most of the run
	// searches with them, and later keys fall outside the prefix and the
	// byte range the first ones showed.
	l.sumAt.Store(min(l.sumAt.Load(), l.head+1<<10))
	l.sumMinKeys = 8
	ins := l.NewInserter()
	m := newModel(oc.cmp)
	it := l.NewIter(false)
	idx := -1
	bc, _ := rng.(*byteChoices)
	for op := 0; op < ops && (bc == nil || len(bc.b) > 0); op++ {
		switch r := rng.IntN(20); {
		case r < 8:
			k := randKey(rng, internal)
			v := []byte(fmt.Sprintf("v%d", op))
			var err error
			if useInserter {
				err = ins.Add(k, v)
			} else {
				err = l.Add(k, v)
			}
			added := m.add(k, v)
			switch {
			case added && err != nil:
				t.Fatalf("op %d: Add(%x) = %v, want nil", op, k, err)
			case !added && !errors.Is(err, ErrRecordExists):
				t.Fatalf("op %d: Add(%x) of a present key = %v, want ErrRecordExists", op, k, err)
			}
			// The iterator's position stays meaningful across inserts only
			// by key; re-seek it.
			if idx >= 0 && idx < len(m.keys) && it.Valid() {
				idx = m.ge(it.Key())
			} else {
				idx = -1
				it.First()
				if len(m.keys) > 0 {
					idx = 0
				}
			}
		case r < 10:
			k := randKey(rng, internal)
			it.SeekGE(k)
			idx = m.ge(k)
			checkAt(t, &it, m, idx, fmt.Sprintf("op %d SeekGE(%x)", op, k))
		case r < 12:
			k := randKey(rng, internal)
			it.SeekLT(k)
			idx = m.ge(k) - 1
			checkAt(t, &it, m, idx, fmt.Sprintf("op %d SeekLT(%x)", op, k))
		case r < 13:
			it.First()
			idx = 0
			checkAt(t, &it, m, idx, fmt.Sprintf("op %d First", op))
		case r < 14:
			it.Last()
			idx = len(m.keys) - 1
			checkAt(t, &it, m, idx, fmt.Sprintf("op %d Last", op))
		case r < 17:
			if idx >= 0 && idx < len(m.keys) {
				it.Next()
				idx++
				checkAt(t, &it, m, idx, fmt.Sprintf("op %d Next", op))
			}
		default:
			if idx >= 0 && idx < len(m.keys) {
				it.Prev()
				idx--
				checkAt(t, &it, m, idx, fmt.Sprintf("op %d Prev", op))
			}
		}
		if idx < 0 || idx >= len(m.keys) {
			idx = -1
		}
	}
	// Full walks in both directions.
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		checkAt(t, &it, m, i, "final forward walk")
		i++
	}
	if i != len(m.keys) || it.Error() != nil {
		t.Fatalf("forward walk saw %d keys (err %v), model has %d", i, it.Error(), len(m.keys))
	}
	i = len(m.keys) - 1
	for ok := it.Last(); ok; ok = it.Prev() {
		checkAt(t, &it, m, i, "final backward walk")
		i--
	}
	if i != -1 || it.Error() != nil {
		t.Fatalf("backward walk stopped at model index %d (err %v)", i, it.Error())
	}
	n, err := l.Verify(nil)
	if err != nil || n != len(m.keys) {
		t.Fatalf("Verify = %d, %v; model has %d", n, err, len(m.keys))
	}
}

func TestModel(t *testing.T) {
	ops, seeds := 3000, uint64(3)
	if testing.Short() || invariants.RaceEnabled {
		ops, seeds = 1000, 2
	}
	for _, oc := range orderCases {
		for _, validate := range []bool{false, true} {
			for _, mh := range []int{0, 1, 2} {
				for _, useIns := range []bool{false, true} {
					name := fmt.Sprintf("%s/validate=%t/maxheight=%d/inserter=%t", oc.name, validate, mh, useIns)
					t.Run(name, func(t *testing.T) {
						for seed := uint64(1); seed <= seeds; seed++ {
							runModel(t, oc, validate, mh, useIns, rand.New(rand.NewPCG(seed, 7)), ops)
						}
					})
				}
			}
		}
	}
}

// FuzzModel drives the model run from fuzz input: the first byte picks the
// order, validation, height cap and insert path; every later byte is a
// decision (operation, key bytes).
func FuzzModel(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19})
	f.Add([]byte{0x1d, 3, 7, 1, 1, 2, 0, 9, 14, 2, 12, 0, 19, 3, 7, 2, 2, 2, 15, 16, 17})
	f.Add(bytes.Repeat([]byte{5, 1, 3, 0, 9, 11, 13, 15, 18}, 30))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 {
			return
		}
		cfg := data[0]
		oc := orderCases[int(cfg)%len(orderCases)]
		runModel(t, oc, cfg&4 != 0, int(cfg>>3)%3, cfg&0x40 != 0, &byteChoices{b: data[1:]}, 1<<30)
	})
}

// TestSortedInserts drives the inserter cache's fast path (ascending keys)
// and its fallbacks (descending and interleaved runs).
//
// Under a UserComparer the same key sequences arrive in another order of the
// list's (Reverse: bytewise ascending is descending), so each pattern runs
// the cache's hits and misses both ways.
func TestSortedInserts(t *testing.T) {
	for _, oc := range append([]orderCase{{"internal", Options{InternalKeys: true}, compareInternal}}, userCases...) {
		for _, pattern := range []string{"ascending", "descending", "interleaved"} {
			t.Run(oc.name+"/"+pattern, func(t *testing.T) { runSortedInserts(t, oc, pattern) })
		}
	}
}

func runSortedInserts(t *testing.T, oc orderCase, pattern string) {
	arena, _ := NewArena(4 << 20)
	l, err := New(arena, oc.opts)
	if err != nil {
		t.Fatal(err)
	}
	ins := l.NewInserter()
	m := newModel(oc.cmp)
	const n = 5000
	for i := 0; i < n; i++ {
		j := i
		switch pattern {
		case "descending":
			j = n - i
		case "interleaved":
			j = (i%2)*n + i/2
		}
		k := binary.BigEndian.AppendUint64(nil, uint64(j))
		k = binary.LittleEndian.AppendUint64(k, uint64(i)<<8|1)
		if err := ins.Add(k, k[:4]); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
		m.add(k, k[:4])
	}
	it := l.NewIter(true)
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		checkAt(t, &it, m, i, "walk")
		i++
	}
	if n, err := l.Verify(nil); err != nil || n != len(m.keys) {
		t.Fatalf("Verify = %d, %v, want %d", n, err, len(m.keys))
	}
}

func TestPrepareLink(t *testing.T) {
	arena, _ := NewArena(1 << 16)
	l, _ := New(arena, Options{InternalKeys: true})
	p, err := l.Prepare(3+8, 5)
	if err != nil {
		t.Fatal(err)
	}
	copy(p.Key, "abc")
	binary.LittleEndian.PutUint64(p.Key[3:], 42<<8|1)
	copy(p.Value, "hello")
	if err := l.Link(p); err != nil {
		t.Fatal(err)
	}
	it := l.NewIter(true)
	if !it.SeekGESplit([]byte("abc"), ^uint64(0)) {
		t.Fatalf("SeekGESplit found nothing: %v", it.Error())
	}
	if got := it.Key(); !bytes.Equal(got[:3], []byte("abc")) || binary.LittleEndian.Uint64(got[3:]) != 42<<8|1 {
		t.Fatalf("key %x", got)
	}
	if string(it.Value()) != "hello" {
		t.Fatalf("value %q", it.Value())
	}
	if got := arena.Bytes()[it.KeyOffset() : it.KeyOffset()+3]; string(got) != "abc" {
		t.Fatalf("KeyOffset points at %q", got)
	}
	if got := arena.Bytes()[it.ValueOffset() : it.ValueOffset()+5]; string(got) != "hello" {
		t.Fatalf("ValueOffset points at %q", got)
	}
	if _, err := l.Prepare(7, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("7-byte internal key: %v, want ErrInvalidArgument", err)
	}
	if _, err := l.Prepare(-1, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative length: %v, want ErrInvalidArgument", err)
	}
	if it.SeekGE([]byte("short")) || !errors.Is(it.Error(), ErrInvalidArgument) {
		t.Fatalf("SeekGE with a 5-byte internal key: valid=%t err=%v", it.Valid(), it.Error())
	}
	// An absolute positioning call clears the error.
	if !it.First() || it.Error() != nil {
		t.Fatalf("First after error: valid=%t err=%v", it.Valid(), it.Error())
	}
}

func TestOptionsAndArena(t *testing.T) {
	over := MaxArenaSize
	over++ // at run time: on 32-bit platforms this wraps, still invalid
	for _, c := range []int{-1, 0, MinArenaSize - 1, over} {
		if _, err := NewArena(c); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("NewArena(%d) = %v, want ErrInvalidArgument", c, err)
		}
	}
	a, err := NewArena(MinArenaSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(a, Options{InternalKeys: true, Compare: bytes.Compare}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Compare+InternalKeys: %v", err)
	}
	if _, err := New(a, Options{MaxHeight: MaxHeight + 1}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("MaxHeight too large: %v", err)
	}
	if _, err := New(nil, Options{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil arena: %v", err)
	}
	l, err := New(a, Options{})
	if err != nil {
		t.Fatalf("list in a minimal arena: %v", err)
	}
	if a.Size() != a.Capacity() {
		t.Fatalf("minimal arena: size %d, capacity %d", a.Size(), a.Capacity())
	}
	// A second list does not fit.
	if _, err := New(a, Options{}); !errors.Is(err, ErrArenaFull) {
		t.Fatalf("second list in a full arena: %v", err)
	}
	if err := l.Add([]byte("k"), nil); !errors.Is(err, ErrArenaFull) {
		t.Fatalf("Add to a full arena: %v", err)
	}
	it := l.NewIter(true)
	if it.First() || it.Last() || it.SeekGE([]byte("a")) || it.SeekLT([]byte("z")) || it.Error() != nil {
		t.Fatal("empty list: an iterator found something or failed")
	}
	if n, err := l.Verify(nil); n != 0 || err != nil {
		t.Fatalf("Verify of empty list = %d, %v", n, err)
	}
}

// TestArenaFull fills an arena with random keys: inserts end with
// ErrArenaFull, never a panic, everything inserted before stays readable,
// and a failed insert consumes nothing.
func TestArenaFull(t *testing.T) {
	for _, mh := range []int{0, 1} {
		arena, _ := NewArena(16 << 10)
		l, _ := New(arena, Options{MaxHeight: mh})
		rng := rand.New(rand.NewPCG(3, 4))
		var added [][]byte
		for {
			k := binary.BigEndian.AppendUint64(nil, rng.Uint64())
			err := l.Add(k, bytes.Repeat([]byte{1}, rng.IntN(200)))
			if errors.Is(err, ErrArenaFull) {
				before := arena.Size()
				if err := l.Add(k, make([]byte, 4096)); !errors.Is(err, ErrArenaFull) {
					t.Fatalf("large insert into a full arena: %v", err)
				}
				if arena.Size() != before {
					t.Fatalf("failed insert consumed %d bytes", arena.Size()-before)
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			added = append(added, k)
		}
		if len(added) < 50 {
			t.Fatalf("only %d entries fit in 16 KiB", len(added))
		}
		it := l.NewIter(true)
		for _, k := range added {
			if !it.SeekGE(k) || !bytes.Equal(it.Key(), k) {
				t.Fatalf("key %x lost after arena full (err %v)", k, it.Error())
			}
		}
		if n, err := l.Verify(nil); err != nil || n != len(added) {
			t.Fatalf("Verify = %d, %v, want %d", n, err, len(added))
		}
		if err := l.Add([]byte("x"), make([]byte, 32<<10)); !errors.Is(err, ErrArenaFull) {
			t.Fatalf("entry larger than the arena: %v", err)
		}
	}
}

// TestNodeAtArenaEnd places a node in the last bytes of the arena, with a key
// and value shorter than the 8-byte abbreviation load; under -race (which
// enables checkptr) any read straddling the end of the buffer would fail.
func TestNodeAtArenaEnd(t *testing.T) {
	for _, kv := range [][2]int{{0, 0}, {1, 0}, {3, 2}, {7, 1}, {9, 0}} {
		size := MinArenaSize + int(nodeSize(1, uint64(kv[0]), uint64(kv[1])))
		arena, err := NewArena(size)
		if err != nil {
			t.Fatal(err)
		}
		l, _ := New(arena, Options{MaxHeight: 1})
		k := bytes.Repeat([]byte{'k'}, kv[0])
		v := bytes.Repeat([]byte{'v'}, kv[1])
		if err := l.Add(k, v); err != nil {
			t.Fatalf("%v: %v", kv, err)
		}
		if arena.Size() != arena.Capacity() {
			t.Fatalf("%v: arena not exactly full: %d of %d", kv, arena.Size(), arena.Capacity())
		}
		for _, validate := range []bool{false, true} {
			it := l.NewIter(validate)
			if !it.SeekGE(k) || !bytes.Equal(it.Key(), k) || !bytes.Equal(it.Value(), v) {
				t.Fatalf("%v: SeekGE: valid=%t err=%v", kv, it.Valid(), it.Error())
			}
			if !it.Last() || !it.First() || it.Next() || it.Error() != nil {
				t.Fatalf("%v: walk failed: %v", kv, it.Error())
			}
		}
		if n, err := l.Verify(nil); n != 1 || err != nil {
			t.Fatalf("%v: Verify = %d, %v", kv, n, err)
		}
	}
}

func TestAbbrev(t *testing.T) {
	arena, _ := NewArena(1 << 12)
	for _, oc := range orderCases {
		l, _ := New(arena, oc.opts)
		for _, k := range [][]byte{nil, {1}, {1, 2, 3}, []byte("abcdefgh"), []byte("abcdefghij"), []byte("abcdefghijklmnopq")} {
			key := k
			if oc.opts.InternalKeys {
				key = binary.LittleEndian.AppendUint64(bytes.Clone(k), 0xffff)
			}
			p, err := l.Prepare(len(key), 3)
			if err != nil {
				t.Fatal(err)
			}
			copy(p.Key, key)
			copy(p.Value, "\xff\xff\xff") // must not leak into the abbreviation
			prefix, _, _ := l.splitProbe(key)
			if l.order == orderUser {
				checkUserAbbrev(t, oc, l, p.off, k, prefix)
				continue
			}
			if got, want := l.abbrevAt(p.off), l.abbrevOf(prefix); got != want {
				t.Errorf("%s: abbrev of %x: node %x, probe %x", oc.name, key, got, want)
			}
			if oc.opts.Compare != nil && l.abbrevAt(p.off) != 0 {
				t.Errorf("%s: custom order got a non-zero abbreviation", oc.name)
			}
		}
	}
}

// checkUserAbbrev checks the abbreviations of the node at off, whose user
// key is k, in a list under a UserComparer: the comparer's, computed from
// the node's key bytes, equal to the probe's; the built-in one 0, so that
// the iterator's quick checks always fall through to checkPairSlow.
func checkUserAbbrev(t *testing.T, oc orderCase, l *Skiplist, off uint32, k, prefix []byte) {
	t.Helper()
	var want uint64
	if f := oc.opts.UserComparer.AbbreviatedKey; f != nil {
		want = f(k)
	}
	if got := l.userAbbrevAt(off); got != want {
		t.Errorf("%s: comparer's abbreviation of node %x = %x, want %x", oc.name, k, got, want)
	}
	if got := l.userAbbrevOf(prefix); got != want {
		t.Errorf("%s: comparer's abbreviation of probe %x = %x, want %x", oc.name, k, got, want)
	}
	if got := l.abbrevAt(off); got != 0 {
		t.Errorf("%s: built-in abbreviation %x, want 0", oc.name, got)
	}
	// A key length corrupted past the arena: the abbreviation is computed
	// on the key cut at the arena's end, never read past it.
	saved := slices.Clone(l.buf[int(off)+offLens : int(off)+escHeader])
	setEscapedLens(l, off)
	binary.LittleEndian.PutUint32(l.buf[int(off)+offKeyLen:], 1<<30)
	l.userAbbrevAt(off)
	copy(l.buf[int(off)+offLens:], saved)
}

// TestNodeLengths stores entries whose lengths fit the node's packed lens
// word, and ones just past it (escaped: full lengths after the header),
// side by side: each reads back whole through every path, unvalidated and
// validating, and Verify counts them all.
func TestNodeLengths(t *testing.T) {
	cases := []struct{ kl, vl int }{
		{1, 0}, {8, 100}, {maxPackedK, 0}, {maxPackedK + 1, 0}, {9, maxPackedV},
		{10, maxPackedV + 1}, {maxPackedK + 2, maxPackedV + 2}, {11, 3},
	}
	arena, err := NewArena(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(arena, Options{})
	if err != nil {
		t.Fatal(err)
	}
	entry := func(i int) (k, v []byte) {
		c := cases[i]
		k = bytes.Repeat([]byte{byte('a' + i)}, c.kl)
		v = bytes.Repeat([]byte{byte('A' + i)}, c.vl)
		return k, v
	}
	for i, c := range cases {
		k, v := entry(i)
		if err := l.Add(k, v); err != nil {
			t.Fatal(err)
		}
		header := nodeHeader
		if c.kl > maxPackedK || c.vl > maxPackedV {
			header = escHeader
		}
		// The node's own bytes, whatever its height and alignment pad.
		nd := nodeOf(t, l, k)
		if got := arena.Size() - int(nd); got != header+max(8, (c.kl+c.vl+3)&^3) {
			t.Errorf("case %d (%d, %d): node takes %d bytes after its offset, want header %d + key and value", i, c.kl, c.vl, got, header)
		}
		if l.keyStart(nd) != int(nd)+header {
			t.Errorf("case %d: key at +%d, want +%d", i, l.keyStart(nd)-int(nd), header)
		}
	}
	for _, validate := range []bool{false, true} {
		it := l.NewIter(validate)
		for i := range cases {
			k, v := entry(i)
			if !it.SeekGE(k) {
				t.Fatalf("validate=%t: SeekGE(case %d) found nothing: %v", validate, i, it.Error())
			}
			gk, gv, err := it.Entry()
			if err != nil || !bytes.Equal(gk, k) || !bytes.Equal(gv, v) || !bytes.Equal(it.Key(), k) || !bytes.Equal(it.Value(), v) {
				t.Fatalf("validate=%t: case %d reads back %d+%d bytes (%v), want %d+%d", validate, i, len(gk), len(gv), err, len(k), len(v))
			}
			b := arena.Bytes()
			if !bytes.Equal(b[it.KeyOffset():it.KeyOffset()+len(k)], k) || !bytes.Equal(b[it.ValueOffset():it.ValueOffset()+len(v)], v) {
				t.Fatalf("case %d: KeyOffset %d / ValueOffset %d do not point at its key and value", i, it.KeyOffset(), it.ValueOffset())
			}
		}
	}
	if n, err := l.Verify(nil); err != nil || n != len(cases) {
		t.Fatalf("Verify = %d, %v; want %d entries", n, err, len(cases))
	}
}
