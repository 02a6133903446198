package skiplist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// nodeOf returns the node offset of key (which must be present).
func nodeOf(t *testing.T, l *Skiplist, key []byte) uint32 {
	t.Helper()
	it := l.NewIter(false)
	if !it.SeekGE(key) || l.Compare(it.Key(), key) != 0 {
		t.Fatalf("key %x not found", key)
	}
	return it.nd
}

func wantCorrupt(t *testing.T, what string, it *Iterator, valid bool) {
	t.Helper()
	if valid || it.Valid() {
		t.Errorf("%s: iterator valid after corruption", what)
	}
	if !errors.Is(it.Error(), ErrCorruption) {
		t.Errorf("%s: error %v, want ErrCorruption", what, it.Error())
	}
}

// buildOrderCase inserts key000000, key000002, key000001 into a list of
// height 1 and changes the middle key's first byte, making "aey000001": the
// list is then head → key000000 → aey000001 → key000002, out of order. All
// three keys share their first 8 bytes, so the abbreviations tie and the
// full comparison must catch it.
func buildOrderCase(t *testing.T, o Options, suffix func(string) []byte, first byte) (*Skiplist, [3][]byte) {
	arena, _ := NewArena(1 << 12)
	o.MaxHeight = 1
	l, err := New(arena, o)
	if err != nil {
		t.Fatal(err)
	}
	keys := [3][]byte{suffix("key000000"), suffix("key000001"), suffix("key000002")}
	for _, i := range []int{0, 2, 1} {
		if err := l.Add(keys[i], []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	nd := nodeOf(t, l, keys[1])
	arena.Bytes()[l.keyStart(nd)] = first
	return l, keys
}

func TestCorruptOrder(t *testing.T) {
	plain := func(s string) []byte { return []byte(s) }
	internal := func(s string) []byte { return binary.LittleEndian.AppendUint64([]byte(s), 5<<8|1) }
	for _, c := range []struct {
		name   string
		o      Options
		suffix func(string) []byte
		first  byte
	}{
		{"bytewise/tied-abbrev", Options{}, plain, 'a'},
		{"internal/tied-abbrev", Options{InternalKeys: true}, internal, 'a'},
		{"func/no-abbrev", Options{Compare: func(a, b []byte) int { return strings.Compare(string(a), string(b)) }}, plain, 'a'},
		// 'z' breaks the order with the successor, not the predecessor,
		// and differs in the abbreviation from both neighbours.
		{"bytewise/distinct-abbrev", Options{}, plain, 'z'},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, keys := buildOrderCase(t, c.o, c.suffix, c.first)
			it := l.NewIter(true)
			if c.first == 'a' {
				wantCorrupt(t, "SeekGE(key1)", &it, it.SeekGE(keys[1]))
				wantCorrupt(t, "SeekGE(key2)", &it, it.SeekGE(keys[2]))
				wantCorrupt(t, "SeekLT(key2)", &it, it.SeekLT(keys[2]))
				// The search ends on key0 and looks one node ahead, into
				// the damage.
				wantCorrupt(t, "SeekGE(key0)", &it, it.SeekGE(keys[0]))
				wantCorrupt(t, "First", &it, it.First())
				if !it.Last() {
					t.Fatalf("Last should pass (aey000001 < key000002): %v", it.Error())
				}
				wantCorrupt(t, "Last+Prev", &it, it.Prev())
			} else {
				// zey000001 > key000002: the search for key2 moves past
				// key0 and stops at zey... with no link out of order; the
				// look-ahead from the node ending the search sees it (else
				// SeekLT(key2) would step over zey silently and Get(key1)
				// would miss), and so do First+Next+Next and Last.
				wantCorrupt(t, "SeekGE(key2)", &it, it.SeekGE(keys[2]))
				wantCorrupt(t, "SeekLT(key2)", &it, it.SeekLT(keys[2]))
				it.First()
				ok := it.Next()
				ok = ok && it.Next() // the second step reaches the flipped key
				wantCorrupt(t, "First+Next+Next", &it, ok)
				wantCorrupt(t, "Last", &it, it.Last())
			}
			// An absolute positioning call clears the error (one whose
			// search ends away from the damage).
			if c.first == 'a' {
				if !it.Last() || it.Error() != nil {
					t.Fatalf("Last after corruption: %v", it.Error())
				}
			} else if !it.SeekLT(keys[0]) && it.Error() != nil {
				t.Fatalf("SeekLT(key0) after corruption: %v", it.Error())
			}
			// With validation off the same reads report nothing: that is
			// what the option buys.
			plainIt := l.NewIter(false)
			n := 0
			for ok := plainIt.First(); ok; ok = plainIt.Next() {
				n++
			}
			for ok := plainIt.Last(); ok; ok = plainIt.Prev() {
			}
			plainIt.SeekGE(keys[1])
			plainIt.SeekLT(keys[2])
			if plainIt.Error() != nil || n != 3 {
				t.Fatalf("unvalidated reads: %d entries, err %v", n, plainIt.Error())
			}
			if _, err := l.Verify(nil); !errors.Is(err, ErrCorruption) {
				t.Fatalf("Verify: %v, want ErrCorruption", err)
			}
			// The error names both keys in hex.
			it.SeekGE(keys[0])
			it.Next()
			it.Next()
			if err := it.Error(); err != nil && !strings.Contains(err.Error(), "6b6579303030303030") && !strings.Contains(err.Error(), "303030303032") {
				t.Errorf("error does not name the keys: %v", err)
			}
		})
	}
}

// TestCorruptLinksAndLengths points links and lengths outside the arena:
// validating reads return ErrCorruption instead of reading wild memory.
func TestCorruptLinksAndLengths(t *testing.T) {
	build := func() (*Skiplist, []uint32) {
		arena, _ := NewArena(1 << 12)
		l, _ := New(arena, Options{MaxHeight: 1})
		var nodes []uint32
		for i := 0; i < 4; i++ {
			k := []byte(fmt.Sprintf("k%d", i))
			if err := l.Add(k, []byte("value")); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 4; i++ {
			nodes = append(nodes, nodeOf(t, l, []byte(fmt.Sprintf("k%d", i))))
		}
		return l, nodes
	}
	for _, bad := range []uint32{0, 2, 1 << 20, 0xfffffff0, 7} {
		l, nodes := build()
		setNext(l, nodes[1], 0, bad)
		it := l.NewIter(true)
		it.SeekGE([]byte("k1"))
		wantCorrupt(t, fmt.Sprintf("next link %d: Next", bad), &it, it.Next())
		wantCorrupt(t, fmt.Sprintf("next link %d: SeekGE", bad), &it, it.SeekGE([]byte("k3")))
		if _, err := l.Verify(nil); !errors.Is(err, ErrCorruption) {
			t.Errorf("next link %d: Verify %v", bad, err)
		}

		l, nodes = build()
		*l.prevPtr(nodes[2]) = bad
		it = l.NewIter(true)
		it.SeekGE([]byte("k2"))
		wantCorrupt(t, fmt.Sprintf("prev link %d: Prev", bad), &it, it.Prev())
		if _, err := l.Verify(nil); !errors.Is(err, ErrCorruption) {
			t.Errorf("prev link %d: Verify %v", bad, err)
		}
	}
	// Lengths pointing past the arena: Entry reports them (validated or
	// not), Verify too; Key would panic on its bounds check rather than
	// read outside the arena. The lengths are written in the escaped form
	// (over the first key bytes), at the key's or the value's place.
	for _, field := range []int{offKeyLen, offValLen} {
		for _, validate := range []bool{false, true} {
			l, nodes := build()
			setEscapedLens(l, nodes[2])
			binary.LittleEndian.PutUint32(l.buf[int(nodes[2])+field:], 1<<30)
			it := l.NewIter(validate)
			if !it.SeekGE([]byte("k1")) {
				t.Fatal(it.Error())
			}
			if _, _, err := it.Entry(); err != nil {
				t.Fatalf("intact entry: %v", err)
			}
			it.Next()
			if _, _, err := it.Entry(); !errors.Is(err, ErrCorruption) {
				t.Errorf("length at +%d, validate=%t: Entry %v", field, validate, err)
			}
			if _, err := l.Verify(nil); !errors.Is(err, ErrCorruption) {
				t.Errorf("length at +%d: Verify %v", field, err)
			}
		}
	}
	// A back link to another valid node: reads cannot tell (the order
	// still holds), Verify can.
	l, nodes := build()
	*l.prevPtr(nodes[3]) = nodes[1]
	if _, err := l.Verify(nil); !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "back link") {
		t.Errorf("wrong back link: Verify %v", err)
	}
	l, nodes = build()
	*l.prevPtr(l.tail) = nodes[2]
	if _, err := l.Verify(nil); !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "tail") {
		t.Errorf("wrong tail back link: Verify %v", err)
	}
}

// TestCorruptUpperLevel breaks the order of an upper level only: searches
// that follow that level report it, and Verify does.
func TestCorruptUpperLevel(t *testing.T) {
	arena, _ := NewArena(1 << 16)
	l, _ := New(arena, Options{})
	for i := 0; i < 400; i++ {
		if err := l.Add(binary.BigEndian.AppendUint64(nil, uint64(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if l.Height() < 3 {
		t.Skipf("list height %d too small", l.Height())
	}
	// Make the level-1 chain jump back: the second node at level 1 links
	// to the first one again.
	first := l.loadNext(l.head, 1)
	second := l.loadNext(first, 1)
	setNext(l, second, 1, first)
	if _, err := l.Verify(nil); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Verify: %v", err)
	}
	// A validated search that walks level 1 past second sees second → first.
	detected := false
	it := l.NewIter(true)
	for i := 0; i < 400 && !detected; i++ {
		it.SeekGE(binary.BigEndian.AppendUint64(nil, uint64(i)))
		detected = errors.Is(it.Error(), ErrCorruption)
	}
	if !detected {
		t.Fatal("no validated seek detected the broken level")
	}
}

// TestVerifyUpperLevels damages one upper-level link in ways the one-walk
// check must catch: a link to an offset inside the arena that is no node
// (the chain then never meets level 0 again), a link outside the arena,
// and a non-empty level above the list's height.
func TestVerifyUpperLevels(t *testing.T) {
	build := func(t *testing.T) *Skiplist {
		arena, _ := NewArena(1 << 16)
		l, _ := New(arena, Options{})
		for i := 0; i < 400; i++ {
			if err := l.Add(binary.BigEndian.AppendUint64(nil, uint64(i)), []byte("some value bytes")); err != nil {
				t.Fatal(err)
			}
		}
		if l.Height() < 3 {
			t.Skipf("list height %d too small", l.Height())
		}
		if n, err := l.Verify(nil); err != nil || n != 400 {
			t.Fatalf("intact list: Verify = %d, %v", n, err)
		}
		return l
	}
	t.Run("link-into-a-value", func(t *testing.T) {
		l := build(t)
		first := l.loadNext(l.head, 1)
		// A node; aim at the first 8-aligned offset (what an upper link
		// may name) 8 bytes or more into its key: 8-byte key, 16-byte value.
		target := l.loadNext(first, 0)
		setNext(l, first, 1, (target+offKey+8+7)&^7)
		_, err := l.Verify(nil)
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "level 1 names offset") {
			t.Fatalf("Verify: %v", err)
		}
	})
	t.Run("link-outside-the-arena", func(t *testing.T) {
		l := build(t)
		first := l.loadNext(l.head, 2)
		setNext(l, first, 2, 0xfffffff0)
		_, err := l.Verify(nil)
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "outside the arena") {
			t.Fatalf("Verify: %v", err)
		}
	})
	t.Run("level-above-height", func(t *testing.T) {
		l := build(t)
		h := l.Height()
		if h >= MaxHeight {
			t.Skip("list at the maximum height")
		}
		setNext(l, l.head, h, l.loadNext(l.head, 0))
		_, err := l.Verify(nil)
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "above the list height") {
			t.Fatalf("Verify: %v", err)
		}
	})
}

// setNext overwrites the link of level lvl of the node at off with to, as
// damage would (a link of level >= 1 loses its summary: 0 proves nothing).
func setNext(l *Skiplist, off uint32, lvl int, to uint32) {
	if lvl == 0 {
		*l.next0Ptr(off) = to
		return
	}
	*l.towerPtr(off, lvl) = uint64(to)
}

// setEscapedLens rewrites the node's lengths in the escaped form (lens
// word lensEscape, then key and value lengths in full), as a damaged lens
// word would read, over the first 8 bytes of its key: what a test then
// writes at offKeyLen or offValLen is the length the node claims.
func setEscapedLens(l *Skiplist, off uint32) {
	_, kl, vl := l.layout(off)
	binary.LittleEndian.PutUint32(l.buf[int(off)+offLens:], lensEscape)
	binary.LittleEndian.PutUint32(l.buf[int(off)+offKeyLen:], kl)
	binary.LittleEndian.PutUint32(l.buf[int(off)+offValLen:], vl)
}
