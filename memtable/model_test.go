package memtable

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/invariants"
	"github.com/vigildb/vigil/internal/testcmp"
)

// choices is where the model run draws its decisions: a PRNG for the random
// test, the fuzz input for the fuzz target.
type choices interface {
	IntN(n int) int
}

// byteChoices draws from a byte string; exhausted reports when it ran out
// (then every draw is 0).
type byteChoices struct {
	b []byte
}

func (c *byteChoices) IntN(n int) int {
	if len(c.b) == 0 || n <= 1 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	if n > 256 && len(c.b) > 0 {
		v = v<<8 | int(c.b[0])
		c.b = c.b[1:]
	}
	return v % n
}

func (c *byteChoices) exhausted() bool { return len(c.b) == 0 }

type mentry struct {
	key   base.InternalKey
	value []byte
}

// mtModel is the reference: sorted slices of entries, in the order of the
// comparer (resolved) the memtable under test has.
type mtModel struct {
	cmp               *base.Comparer
	points, rangeDels []mentry
}

func (m *mtModel) cmpEntry(a, b mentry) int { return m.cmp.CompareInternal(a.key, b.key) }

func (m *mtModel) add(e mentry) bool {
	list := &m.points
	if e.key.Kind() == base.KindRangeDelete {
		list = &m.rangeDels
	}
	i, found := slices.BinarySearchFunc(*list, e, m.cmpEntry)
	if found {
		return false
	}
	*list = slices.Insert(*list, i, e)
	return true
}

func (m *mtModel) get(ukey []byte, snap uint64) (mentry, bool) {
	snap = min(snap, base.SeqNumMax)
	i, _ := slices.BinarySearchFunc(m.points, mentry{key: base.MakeSearchKey(ukey, snap)}, m.cmpEntry)
	if i < len(m.points) && m.cmp.Equal(m.points[i].key.UserKey, ukey) {
		return m.points[i], true
	}
	return mentry{}, false
}

// seekGE returns the index of the first point entry with user key >= ukey.
func (m *mtModel) seekGE(ukey []byte) int {
	i, _ := slices.BinarySearchFunc(m.points, mentry{key: base.InternalKey{UserKey: ukey, Trailer: ^uint64(0)}}, m.cmpEntry)
	return i
}

func modelKey(c choices) []byte {
	alphabet := []byte{0x00, 'a', 'b', 0xff}
	k := make([]byte, c.IntN(11))
	for i := range k {
		k[i] = alphabet[c.IntN(len(alphabet))]
	}
	return k
}

func checkIter(t testing.TB, it base.InternalIterator, list []mentry, idx int, what string) {
	t.Helper()
	if err := it.Error(); err != nil {
		t.Fatalf("%s: error %v", what, err)
	}
	if idx < 0 || idx >= len(list) {
		if it.Valid() {
			t.Fatalf("%s: valid at %s, model exhausted", what, it.Key())
		}
		return
	}
	if !it.Valid() {
		t.Fatalf("%s: invalid, model at %s", what, list[idx].key)
	}
	if !bytes.Equal(it.Key().UserKey, list[idx].key.UserKey) || it.Key().Trailer != list[idx].key.Trailer {
		t.Fatalf("%s: key %s, model %s", what, it.Key(), list[idx].key)
	}
	if !bytes.Equal(it.Value(), list[idx].value) {
		t.Fatalf("%s: value %x, model %x", what, it.Value(), list[idx].value)
	}
}

// runMemtableModel applies ops drawn from c to a memtable and the model,
// checking every read. It stops after maxOps or when a byteChoices source
// runs dry.
func runMemtableModel(t testing.TB, o Options, c choices, maxOps int) {
	o.Size = 1 << 20
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ref := mtModel{cmp: m.Comparer()}
	seq := uint64(1)
	it := m.NewIter(IterOptions{})
	defer it.Close()
	idx := -1
	bc, _ := c.(*byteChoices)
	for op := 0; op < maxOps && (bc == nil || !bc.exhausted()); op++ {
		switch r := c.IntN(24); {
		case r < 8: // point entry
			kind := base.KindSet
			if c.IntN(4) == 0 {
				kind = base.KindDelete
			}
			k := modelKey(c)
			v := []byte(fmt.Sprintf("v%d", seq))
			if kind == base.KindDelete {
				v = nil
			}
			e := mentry{key: base.MakeInternalKey(k, seq, kind), value: v}
			if err := m.Add(seq, kind, k, v); err != nil {
				t.Fatalf("op %d: Add(%s): %v", op, e.key, err)
			}
			ref.add(e)
			seq++
			idx = -1
		case r < 9: // range tombstone
			a, b := modelKey(c), modelKey(c)
			if ref.cmp.Compare(a, b) > 0 {
				a, b = b, a
			}
			e := mentry{key: base.MakeInternalKey(a, seq, base.KindRangeDelete), value: b}
			if err := m.Add(seq, base.KindRangeDelete, a, b); err != nil {
				t.Fatalf("op %d: Add(%s): %v", op, e.key, err)
			}
			ref.add(e)
			seq++
		case r < 10: // duplicate of an existing entry
			if len(ref.points) == 0 {
				continue
			}
			e := ref.points[c.IntN(len(ref.points))]
			if err := m.Add(e.key.SeqNum(), e.key.Kind(), e.key.UserKey, e.value); !errors.Is(err, ErrRecordExists) {
				t.Fatalf("op %d: duplicate Add(%s) = %v, want ErrRecordExists", op, e.key, err)
			}
		case r < 13: // Get
			k := modelKey(c)
			if len(ref.points) > 0 && c.IntN(2) == 0 {
				k = ref.points[c.IntN(len(ref.points))].key.UserKey
			}
			snap := uint64(c.IntN(int(seq) + 1))
			if c.IntN(8) == 0 {
				snap = base.SeqNumMax + 5 // clamped
			}
			v, s, kind, found, err := m.Get(k, snap)
			want, wantFound := ref.get(k, snap)
			if err != nil || found != wantFound {
				t.Fatalf("op %d: Get(%x, %d) found=%t err=%v, model found=%t", op, k, snap, found, err, wantFound)
			}
			if found && (s != want.key.SeqNum() || kind != want.key.Kind() || !bytes.Equal(v, want.value)) {
				t.Fatalf("op %d: Get(%x, %d) = %q#%d,%s, model %q %s", op, k, snap, v, s, kind, want.value, want.key)
			}
		case r < 15:
			k := modelKey(c)
			it.SeekGE(k)
			idx = ref.seekGE(k)
			checkIter(t, it, ref.points, idx, fmt.Sprintf("op %d SeekGE(%x)", op, k))
		case r < 17:
			k := modelKey(c)
			it.SeekLT(k)
			idx = ref.seekGE(k) - 1
			checkIter(t, it, ref.points, idx, fmt.Sprintf("op %d SeekLT(%x)", op, k))
		case r < 18:
			it.First()
			idx = 0
			checkIter(t, it, ref.points, idx, fmt.Sprintf("op %d First", op))
		case r < 19:
			it.Last()
			idx = len(ref.points) - 1
			checkIter(t, it, ref.points, idx, fmt.Sprintf("op %d Last", op))
		case r < 21:
			if idx >= 0 && idx < len(ref.points) {
				it.Next()
				idx++
				checkIter(t, it, ref.points, idx, fmt.Sprintf("op %d Next", op))
			}
		case r < 23:
			if idx >= 0 && idx < len(ref.points) {
				it.Prev()
				idx--
				checkIter(t, it, ref.points, idx, fmt.Sprintf("op %d Prev", op))
			}
		default:
			snap := uint64(c.IntN(int(seq) + 1))
			got, err := m.RangeDels(snap)
			if err != nil {
				t.Fatalf("op %d: RangeDels: %v", op, err)
			}
			var want []base.RangeTombstone
			for _, e := range ref.rangeDels {
				if e.key.SeqNum() <= snap {
					want = append(want, base.RangeTombstone{Start: e.key.UserKey, End: e.value, Seq: e.key.SeqNum()})
				}
			}
			if !slices.EqualFunc(got, want, func(a, b base.RangeTombstone) bool {
				return bytes.Equal(a.Start, b.Start) && bytes.Equal(a.End, b.End) && a.Seq == b.Seq
			}) {
				t.Fatalf("op %d: RangeDels(%d) = %v, model %v", op, snap, got, want)
			}
		}
		if idx < 0 || idx >= len(ref.points) {
			idx = -1
		}
	}
	// Full walks, both lists, both directions.
	for _, c := range []struct {
		it   base.InternalIterator
		list []mentry
	}{{m.NewIter(IterOptions{Validate: true}), ref.points}, {m.NewRangeDelIter(), ref.rangeDels}} {
		i := 0
		for ok := c.it.First(); ok; ok = c.it.Next() {
			checkIter(t, c.it, c.list, i, "forward walk")
			i++
		}
		if i != len(c.list) || c.it.Error() != nil {
			t.Fatalf("forward walk: %d entries (err %v), model %d", i, c.it.Error(), len(c.list))
		}
		i = len(c.list) - 1
		for ok := c.it.Last(); ok; ok = c.it.Prev() {
			checkIter(t, c.it, c.list, i, "backward walk")
			i--
		}
		if i != -1 || c.it.Error() != nil {
			t.Fatalf("backward walk stopped at %d (err %v)", i, c.it.Error())
		}
		if err := c.it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := m.Count(), uint64(len(ref.points)+len(ref.rangeDels)); got != want {
		t.Fatalf("Count = %d, model %d", got, want)
	}
	if m.Empty() != (m.Count() == 0) {
		t.Fatalf("Empty = %t with Count %d", m.Empty(), m.Count())
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

// testComparers are the orders the order-sensitive tests run under: the
// default and two that sort differently from bytewise, so that a bytewise
// comparison behind the comparer's back misplaces keys and fails.
var testComparers = []*base.Comparer{base.DefaultComparer, testcmp.Reverse, testcmp.Versioned}

func TestModel(t *testing.T) {
	ops := 2000
	if testing.Short() || invariants.RaceEnabled {
		ops = 600
	}
	types := []checksum.Type{checksum.XXH3, checksum.CRC32c, checksum.XXHash, checksum.XXHash64, checksum.CRC64}
	for _, cmp := range testComparers {
		for i, n := range []int{0, 1, 2, 4, 8} {
			for _, paranoid := range []bool{false, true} {
				for _, mh := range []int{0, 1} {
					o := Options{ProtectionBytesPerKey: n, ParanoidMemoryChecks: paranoid, maxHeight: mh, Comparer: cmp}
					if n > 0 {
						o.ChecksumType = types[i%len(types)]
					}
					if mh == 0 {
						// A small filter, built after a few Gets:
						// Gets it answers and Gets it lets through.
						o.FilterBytes, o.filterAfterGets = 256, 8
					}
					t.Run(fmt.Sprintf("%s/prot=%d/%s/paranoid=%t/maxheight=%d/filter=%d", cmp.Name, n, o.ChecksumType, paranoid, mh, o.FilterBytes), func(t *testing.T) {
						for seed := uint64(1); seed <= 2; seed++ {
							runMemtableModel(t, o, rand.New(rand.NewPCG(seed, uint64(n))), ops)
						}
					})
				}
			}
		}
	}
}

// FuzzModel drives the model run from fuzz input: every byte is a decision
// (operation, key bytes, snapshot), the first two pick the options (the
// first, the protection bytes and the comparer).
func FuzzModel(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add([]byte{8, 1, 0, 3, 1, 1, 2, 0, 9, 14, 2, 12, 0, 19, 20, 21, 22, 23, 5, 5, 5})
	f.Add(bytes.Repeat([]byte{3, 0, 1, 2, 12, 17, 20, 22}, 20))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		prot := []int{0, 1, 2, 4, 8}[int(data[0])%5]
		cmp := testComparers[int(data[0])/5%len(testComparers)]
		o := Options{ProtectionBytesPerKey: prot, ParanoidMemoryChecks: data[1]&1 != 0, Comparer: cmp}
		if data[1]&2 != 0 {
			o.maxHeight = 1
		}
		if data[1]&0x80 != 0 {
			o.FilterBytes, o.filterAfterGets = 256, 4
		}
		if prot > 0 {
			o.ChecksumType = checksum.TypeFromCode(uint8(1 + int(data[1]>>2)%5)) // a checked type
		}
		runMemtableModel(t, o, &byteChoices{b: data[2:]}, 1<<30)
	})
}
