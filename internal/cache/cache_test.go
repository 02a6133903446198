package cache

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

func block(n int, fill byte) []byte { return bytes.Repeat([]byte{fill}, n) }

func TestNilCache(t *testing.T) {
	c := New(0)
	if c != nil {
		t.Fatalf("New(0) = %v, want nil", c)
	}
	if New(-5) != nil {
		t.Fatal("New(-5) != nil")
	}
	c.Set(1, 2, []byte("x"), 3)
	if _, _, ok := c.Get(1, 2); ok {
		t.Fatal("nil cache hit")
	}
	c.Delete(1, 2)
	c.EvictFile(1)
	c.ForEachForTesting(func([]byte) { t.Fatal("nil cache has blocks") })
	if m := c.Metrics(); m != (Metrics{}) {
		t.Fatalf("nil cache metrics %+v", m)
	}
	if c.Capacity() != 0 {
		t.Fatal("nil cache capacity")
	}
}

func TestGetSetReplaceDelete(t *testing.T) {
	c := New(1 << 20)
	if _, _, ok := c.Get(1, 0); ok {
		t.Fatal("hit on empty cache")
	}
	c.Set(1, 0, []byte("hello"), 42)
	c.Set(2, 0, []byte("other table"), 7)
	d, s, ok := c.Get(1, 0)
	if !ok || string(d) != "hello" || s != 42 {
		t.Fatalf("Get(1,0) = %q %d %v", d, s, ok)
	}
	d, s, ok = c.Get(2, 0)
	if !ok || string(d) != "other table" || s != 7 {
		t.Fatalf("Get(2,0) = %q %d %v", d, s, ok)
	}
	c.Set(1, 0, []byte("replaced"), 43)
	d, s, ok = c.Get(1, 0)
	if !ok || string(d) != "replaced" || s != 43 {
		t.Fatalf("after replace Get(1,0) = %q %d %v", d, s, ok)
	}
	m := c.Metrics()
	if m.Count != 2 || m.Size != int64(len("replaced")+len("other table")+2*EntryOverhead) {
		t.Fatalf("metrics after replace: %+v", m)
	}
	if m.Hits != 3 || m.Misses != 1 {
		t.Fatalf("hits/misses: %+v", m)
	}
	c.Delete(1, 0)
	if _, _, ok := c.Get(1, 0); ok {
		t.Fatal("hit after Delete")
	}
	c.Delete(1, 0) // absent: no-op
	if m := c.Metrics(); m.Count != 1 {
		t.Fatalf("count after delete: %+v", m)
	}
	if !strings.Contains(c.Metrics().String(), "1 blocks") {
		t.Fatalf("Metrics.String: %s", c.Metrics())
	}
}

func TestCapacityIsRespected(t *testing.T) {
	const capacity = 64 << 10
	c := New(capacity)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5000; i++ {
		n := rng.IntN(4096)
		c.Set(uint64(rng.IntN(4)), uint64(rng.IntN(200)), block(n, byte(i)), uint64(i))
		if m := c.Metrics(); m.Size > capacity {
			t.Fatalf("size %d > capacity %d after %d sets", m.Size, capacity, i)
		}
		if i%7 == 0 {
			c.Get(uint64(rng.IntN(4)), uint64(rng.IntN(200)))
		}
	}
	// Recount by walking: Metrics must agree with the contents.
	var n, size int64
	c.ForEachForTesting(func(d []byte) { n++; size += int64(len(d)) + EntryOverhead })
	if m := c.Metrics(); m.Count != n || m.Size != size {
		t.Fatalf("metrics %+v disagree with contents: count %d size %d", m, n, size)
	}
}

func TestOversizedBlockNotCached(t *testing.T) {
	c := New(1000)
	c.Set(1, 1, block(2000, 1), 0)
	if _, _, ok := c.Get(1, 1); ok {
		t.Fatal("block larger than capacity was cached")
	}
	if m := c.Metrics(); m.Size != 0 || m.Count != 0 {
		t.Fatalf("metrics %+v", m)
	}
}

// TestSecondChance pins the CLOCK policy: with a full cache, a block that was
// read since insertion survives the next eviction and an unread one does not.
func TestSecondChance(t *testing.T) {
	const sz = 100
	c := New(4 * (sz + EntryOverhead)) // one shard, room for exactly 4 blocks
	if len(c.shards) != 1 {
		t.Fatalf("%d shards", len(c.shards))
	}
	for i := uint64(0); i < 4; i++ {
		c.Set(1, i, block(sz, byte(i)), i)
	}
	c.Get(1, 0) // referenced: gets a second chance
	c.Set(1, 4, block(sz, 4), 4)
	if _, _, ok := c.Get(1, 0); !ok {
		t.Fatal("referenced block 0 was evicted")
	}
	if _, _, ok := c.Get(1, 1); ok {
		t.Fatal("unreferenced block 1 survived")
	}
	for _, off := range []uint64{2, 3, 4} {
		if _, _, ok := c.Get(1, off); !ok {
			t.Fatalf("block %d missing", off)
		}
	}
}

func TestEvictFile(t *testing.T) {
	c := New(8 << 20)
	for id := uint64(1); id <= 3; id++ {
		for off := uint64(0); off < 100; off++ {
			c.Set(id, off*4096, block(10, byte(id)), id)
		}
	}
	c.EvictFile(2)
	for off := uint64(0); off < 100; off++ {
		if _, _, ok := c.Get(2, off*4096); ok {
			t.Fatalf("block (2,%d) survived EvictFile", off)
		}
		for _, id := range []uint64{1, 3} {
			if d, _, ok := c.Get(id, off*4096); !ok || d[0] != byte(id) {
				t.Fatalf("block (%d,%d) lost", id, off)
			}
		}
	}
	if m := c.Metrics(); m.Count != 200 {
		t.Fatalf("count %d after EvictFile", m.Count)
	}
}

func TestShardingSpreadsAndCapacitySums(t *testing.T) {
	c := New(64 << 20)
	var total int64
	for i := range c.shards {
		total += c.shards[i].capacity
	}
	if total != 64<<20 {
		t.Fatalf("shard capacities sum to %d", total)
	}
	if len(c.shards)&(len(c.shards)-1) != 0 {
		t.Fatalf("%d shards is not a power of two", len(c.shards))
	}
	used := map[*shard]bool{}
	for off := uint64(0); off < 1000; off++ {
		used[c.shardFor(key{7, off * 4096})] = true
	}
	if len(used) != len(c.shards) {
		t.Fatalf("1000 blocks of one table used %d of %d shards", len(used), len(c.shards))
	}
}

func TestForEachForTestingCanCorrupt(t *testing.T) {
	c := New(1 << 20)
	c.Set(1, 0, []byte{0, 0, 0}, 0)
	c.ForEachForTesting(func(d []byte) { d[1] ^= 0x10 })
	d, _, _ := c.Get(1, 0)
	if !bytes.Equal(d, []byte{0, 0x10, 0}) {
		t.Fatalf("block after flip: %x", d)
	}
}

// TestConcurrent hammers one small cache from several goroutines; run with
// -race. Every hit must return the bytes stored for that key (values are
// derived from the key, so any mix-up shows).
func TestConcurrent(t *testing.T) {
	c := New(256 << 10)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for i := 0; i < 20000; i++ {
				id, off := uint64(rng.IntN(3)), uint64(rng.IntN(300))
				switch r := rng.IntN(100); {
				case r < 60:
					if d, s, ok := c.Get(id, off); ok {
						want := fmt.Sprintf("%d/%d", id, off)
						if string(d[:len(want)]) != want || s != id*1000+off {
							t.Errorf("Get(%d,%d) = %q,%d", id, off, d[:len(want)], s)
							return
						}
					}
				case r < 95:
					v := []byte(fmt.Sprintf("%d/%d", id, off))
					v = append(v, make([]byte, rng.IntN(2000))...)
					c.Set(id, off, v, id*1000+off)
				case r < 99:
					c.Delete(id, off)
				default:
					c.EvictFile(id)
				}
			}
		}(g)
	}
	wg.Wait()
	if m := c.Metrics(); m.Size > m.Capacity {
		t.Fatalf("size over capacity: %+v", m)
	}
}

func TestGetDoesNotAllocate(t *testing.T) {
	c := New(1 << 20)
	c.Set(1, 4096, block(4096, 1), 1)
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, ok := c.Get(1, 4096); !ok {
			t.Fatal("miss")
		}
		c.Get(1, 8192)
	})
	if allocs != 0 {
		t.Fatalf("Get allocates %.1f times", allocs)
	}
}

func BenchmarkGetHit(b *testing.B) {
	c := New(64 << 20)
	for i := uint64(0); i < 10000; i++ {
		c.Set(1, i*4096, block(4096, 0), i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, _, ok := c.Get(1, uint64(i%10000)*4096); !ok {
			b.Fatal("miss")
		}
	}
}

func BenchmarkGetHitParallel(b *testing.B) {
	c := New(64 << 20)
	for i := uint64(0); i < 10000; i++ {
		c.Set(1, i*4096, block(4096, 0), i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(10000)
		for pb.Next() {
			i++
			if _, _, ok := c.Get(1, uint64(i%10000)*4096); !ok {
				b.Fatal("miss")
			}
		}
	})
}

// BenchmarkSetEvict measures insertion into a full cache, so every Set also
// runs the CLOCK hand.
func BenchmarkSetEvict(b *testing.B) {
	c := New(4 << 20)
	data := block(4096, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		c.Set(1, uint64(i)*4096, data, 0)
	}
}

// SetCapacity evicts at once when the cache shrinks, and lets it fill again
// when it grows.
func TestSetCapacity(t *testing.T) {
	c := New(8 << 20)
	block := make([]byte, 4096)
	for i := uint64(0); i < 2000; i++ {
		c.Set(1, i*4096, block, 0)
	}
	if m := c.Metrics(); m.Size > 8<<20 || m.Count < 1500 {
		t.Fatalf("filled: %+v", m)
	}
	c.SetCapacity(1 << 20)
	if m := c.Metrics(); m.Size > 1<<20 || m.Capacity != 1<<20 {
		t.Fatalf("after shrinking to 1 MiB: %+v", m)
	}
	c.SetCapacity(16 << 20)
	for i := uint64(0); i < 3000; i++ {
		c.Set(2, i*4096, block, 0)
	}
	if m := c.Metrics(); m.Size > 16<<20 || m.Count < 2900 {
		t.Fatalf("after growing to 16 MiB: %+v", m)
	}
}
