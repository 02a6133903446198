package memtable

import (
	"encoding/binary"
	"testing"

	"github.com/vigildb/vigil/internal/invariants"
	"github.com/vigildb/vigil/internal/manual"
)

// TestArenaTakesWarmPages fills a memtable, releases it, and fills the
// next one, whose arena then gets the first one's resident pages moved in
// ahead of its fill point (manual.FreeFilled and FaultAhead): every entry
// of the second reads back, nothing of the first shows through, and the
// list validates.
func TestArenaTakesWarmPages(t *testing.T) {
	if invariants.Enabled {
		t.Skip("invariants builds never reuse freed memory")
	}
	const size = 16 << 20
	fill := func(m *MemTable, tag byte) int {
		var key [16]byte
		val := make([]byte, 100)
		for i := range val {
			val[i] = tag
		}
		n := 0
		for ; ; n++ {
			binary.BigEndian.PutUint64(key[:], uint64(n)*0x9e3779b97f4a7c15) // random order
			key[15] = tag
			if !m.Reserve(EntrySize(len(key), len(val))) {
				return n
			}
			if err := m.Add(uint64(n+1), KindSet, key[:], val); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := mustNew(t, Options{Size: size, ManualMemory: true})
	if fill(a, 0xaa) == 0 {
		t.Fatal("nothing added")
	}
	if a.ahead == nil {
		t.Skip("no FaultAhead here")
	}
	a.Release()
	kept := manual.WarmBytes()
	if kept == 0 {
		t.Fatal("a filled arena's release kept no warm pages")
	}
	b := mustNew(t, Options{Size: size, ManualMemory: true})
	defer b.Release()
	n := fill(b, 0xbb)
	if got := manual.WarmBytes(); got >= kept {
		t.Fatalf("WarmBytes() = %d after a second arena filled, was %d: no page was taken", got, kept)
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	var key [16]byte
	for i := range n {
		binary.BigEndian.PutUint64(key[:], uint64(i)*0x9e3779b97f4a7c15)
		key[15] = 0xbb
		v, _, _, found, err := b.Get(key[:], uint64(n+1))
		if err != nil || !found || len(v) != 100 || v[0] != 0xbb || v[99] != 0xbb {
			t.Fatalf("entry %d: found %v, err %v, value %x...", i, found, err, v[:min(len(v), 4)])
		}
		key[15] = 0xaa
		if _, _, _, found, _ := b.Get(key[:], uint64(n+1)); found {
			t.Fatalf("entry %d of the released memtable found in the next", i)
		}
	}
}
