package memtable

import (
	"fmt"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/invariants"
)

// TestAllocations pins the hot paths at zero allocations: Add (once the
// inserter pool is warm), Get, and iterator seeks and steps, with and
// without paranoid checks and protection.
func TestAllocations(t *testing.T) {
	if invariants.RaceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, paranoid := range []bool{false, true} {
		m := mustNew(t, Options{Size: 8 << 20, ParanoidMemoryChecks: paranoid, ChecksumType: checksum.XXH3, ProtectionBytesPerKey: 8})
		keys := make([][]byte, 1000)
		for i := range keys {
			keys[i] = []byte(fmt.Sprintf("key-%06d", i))
		}
		value := make([]byte, 100)
		seq := uint64(1)
		i := 0
		if a := testing.AllocsPerRun(500, func() {
			if err := m.Add(seq, base.KindSet, keys[i%len(keys)], value); err != nil {
				t.Fatal(err)
			}
			seq++
			i++
		}); a != 0 {
			t.Errorf("paranoid=%t: Add allocates %.1f times", paranoid, a)
		}
		if a := testing.AllocsPerRun(500, func() {
			if _, _, _, found, err := m.Get(keys[i%500], base.SeqNumMax); !found || err != nil {
				t.Fatal("miss", err)
			}
			i++
		}); a != 0 {
			t.Errorf("paranoid=%t: Get allocates %.1f times", paranoid, a)
		}
		it := m.NewIter(IterOptions{})
		if a := testing.AllocsPerRun(200, func() {
			it.SeekGE(keys[i%400])
			it.Next()
			it.Prev()
			it.SeekLT(keys[i%400+1])
			it.First()
			it.Last()
			i++
		}); a != 0 || it.Error() != nil {
			t.Errorf("paranoid=%t: iterator allocates %.1f times (err %v)", paranoid, a, it.Error())
		}
	}
}
