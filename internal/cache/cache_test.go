package cache

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/vigildb/vigil/internal/invariants"
)

func block(n int, fill byte) []byte { return bytes.Repeat([]byte{fill}, n) }

// set caches a copy of data, as the SST reader does: Alloc, fill, Set,
// Release.
func set(c *Cache, id, off uint64, data []byte, sum uint64) {
	h := c.Alloc(len(data))
	copy(h.Data(), data)
	c.Set(id, off, h, sum)
	h.Release()
}

// admit caches a copy of data like set, offering it a second time if its
// shard turned it away (a full shard takes a block on its second offer:
// see doorkeeper).
func admit(c *Cache, id, off uint64, data []byte, sum uint64) {
	before := c.Metrics().Rejected
	set(c, id, off, data, sum)
	if c.Metrics().Rejected > before {
		set(c, id, off, data, sum)
	}
}

// get returns a copy of the cached block.
func get(c *Cache, id, off uint64) ([]byte, uint64, bool) {
	h, ok := c.Get(id, off)
	if !ok {
		return nil, 0, false
	}
	defer h.Release()
	return bytes.Clone(h.Data()), h.Sum(), true
}

// charge is what a block of n bytes is charged.
func charge(c *Cache, n int) int64 {
	h := c.Alloc(n)
	defer h.Release()
	return int64(h.e.buf.Size()) + EntryOverhead
}

func TestNilCache(t *testing.T) {
	c := New(0)
	if c != nil {
		t.Fatalf("New(0) = %v, want nil", c)
	}
	if New(-5) != nil {
		t.Fatal("New(-5) != nil")
	}
	h := c.Alloc(1)
	h.Data()[0] = 'x'
	c.Set(1, 2, h, 3)
	h.Release()
	if _, ok := c.Get(1, 2); ok {
		t.Fatal("nil cache hit")
	}
	c.Delete(1, 2)
	c.EvictFile(1)
	c.ForEachBlock(func([]byte) { t.Fatal("nil cache has blocks") })
	if m := c.Metrics(); m != (Metrics{}) {
		t.Fatalf("nil cache metrics %+v", m)
	}
	if c.Capacity() != 0 {
		t.Fatal("nil cache capacity")
	}
}

func TestGetSetReplaceDelete(t *testing.T) {
	c := New(1 << 20)
	if _, ok := c.Get(1, 0); ok {
		t.Fatal("hit on empty cache")
	}
	set(c, 1, 0, []byte("hello"), 42)
	set(c, 2, 0, []byte("other table"), 7)
	d, s, ok := get(c, 1, 0)
	if !ok || string(d) != "hello" || s != 42 {
		t.Fatalf("Get(1,0) = %q %d %v", d, s, ok)
	}
	d, s, ok = get(c, 2, 0)
	if !ok || string(d) != "other table" || s != 7 {
		t.Fatalf("Get(2,0) = %q %d %v", d, s, ok)
	}
	set(c, 1, 0, []byte("replaced"), 43)
	d, s, ok = get(c, 1, 0)
	if !ok || string(d) != "replaced" || s != 43 {
		t.Fatalf("after replace Get(1,0) = %q %d %v", d, s, ok)
	}
	m := c.Metrics()
	if m.Count != 2 || m.Size != charge(c, len("replaced"))+charge(c, len("other table")) {
		t.Fatalf("metrics after replace: %+v", m)
	}
	if m.Hits != 3 || m.Misses != 1 {
		t.Fatalf("hits/misses: %+v", m)
	}
	c.Delete(1, 0)
	if _, ok := c.Get(1, 0); ok {
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
		set(c, uint64(rng.IntN(4)), uint64(rng.IntN(200)), block(n, byte(i)), uint64(i))
		if m := c.Metrics(); m.Size > capacity {
			t.Fatalf("size %d > capacity %d after %d sets", m.Size, capacity, i)
		}
		if i%7 == 0 {
			get(c, uint64(rng.IntN(4)), uint64(rng.IntN(200)))
		}
	}
	// Recount by walking: Metrics must agree with the contents.
	var n, size int64
	var lens []int
	c.ForEachBlock(func(d []byte) { n++; lens = append(lens, len(d)) })
	for _, l := range lens {
		size += charge(c, l)
	}
	if m := c.Metrics(); m.Count != n || m.Size != size {
		t.Fatalf("metrics %+v disagree with contents: count %d size %d", m, n, size)
	}
}

func TestOversizedBlockNotCached(t *testing.T) {
	c := New(1000)
	h := c.Alloc(2000)
	c.Set(1, 1, h, 0)
	if _, ok := c.Get(1, 1); ok {
		t.Fatal("block larger than capacity was cached")
	}
	if m := c.Metrics(); m.Size != 0 || m.Count != 0 || m.InUse == 0 {
		t.Fatalf("metrics %+v", m)
	}
	// The caller's reference is the only one: releasing it frees the block.
	h.Release()
	if m := c.Metrics(); m.InUse != 0 {
		t.Fatalf("metrics after release %+v", m)
	}
}

// TestSecondChance pins the CLOCK policy: with a full cache, a block that was
// read since insertion survives the next eviction and an unread one does not.
func TestSecondChance(t *testing.T) {
	const sz = 100
	c := New(4 * charge(New(1), sz)) // one shard, room for exactly 4 blocks
	if len(c.shards) != 1 {
		t.Fatalf("%d shards", len(c.shards))
	}
	for i := uint64(0); i < 4; i++ {
		set(c, 1, i, block(sz, byte(i)), i)
	}
	get(c, 1, 0) // referenced: gets a second chance
	admit(c, 1, 4, block(sz, 4), 4)
	if _, _, ok := get(c, 1, 0); !ok {
		t.Fatal("referenced block 0 was evicted")
	}
	if _, _, ok := get(c, 1, 1); ok {
		t.Fatal("unreferenced block 1 survived")
	}
	for _, off := range []uint64{2, 3, 4} {
		if _, _, ok := get(c, 1, off); !ok {
			t.Fatalf("block %d missing", off)
		}
	}
}

func TestEvictFile(t *testing.T) {
	c := New(8 << 20)
	for id := uint64(1); id <= 3; id++ {
		for off := uint64(0); off < 100; off++ {
			set(c, id, off*4096, block(10, byte(id)), id)
		}
	}
	c.EvictFile(2)
	for off := uint64(0); off < 100; off++ {
		if _, _, ok := get(c, 2, off*4096); ok {
			t.Fatalf("block (2,%d) survived EvictFile", off)
		}
		for _, id := range []uint64{1, 3} {
			if d, _, ok := get(c, id, off*4096); !ok || d[0] != byte(id) {
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
		used[c.shardFor(hashKey(key{7, off * 4096}))] = true
	}
	if len(used) != len(c.shards) {
		t.Fatalf("1000 blocks of one table used %d of %d shards", len(used), len(c.shards))
	}
}

func TestForEachBlockCanCorrupt(t *testing.T) {
	c := New(1 << 20)
	set(c, 1, 0, []byte{0, 0, 0}, 0)
	c.ForEachBlock(func(d []byte) { d[1] ^= 0x10 })
	d, _, _ := get(c, 1, 0)
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
					if h, ok := c.Get(id, off); ok {
						d, s := h.Data(), h.Sum()
						want := fmt.Sprintf("%d/%d", id, off)
						// Check the whole block while holding it: a
						// concurrent eviction must not free or reuse it.
						tail := d[len(want):]
						if string(d[:len(want)]) != want || s != id*1000+off || !bytes.Equal(tail, block(len(tail), byte(len(tail)))) {
							t.Errorf("Get(%d,%d) = %q,%d", id, off, d[:len(want)], s)
							h.Release()
							return
						}
						h.Release()
					}
				case r < 95:
					v := []byte(fmt.Sprintf("%d/%d", id, off))
					n := rng.IntN(2000)
					v = append(v, block(n, byte(n))...)
					set(c, id, off, v, id*1000+off)
				case r < 99:
					c.Delete(id, off)
				default:
					c.EvictFile(id)
				}
			}
		}(g)
	}
	wg.Wait()
	if m := c.Metrics(); m.Size > m.Capacity || m.InUse > m.Size {
		t.Fatalf("size over capacity, or blocks leaked: %+v", m)
	}
}

func TestGetDoesNotAllocate(t *testing.T) {
	c := New(1 << 20)
	set(c, 1, 4096, block(4096, 1), 1)
	allocs := testing.AllocsPerRun(100, func() {
		h, ok := c.Get(1, 4096)
		if !ok {
			t.Fatal("miss")
		}
		h.Release()
		c.Get(1, 8192)
	})
	if allocs != 0 {
		t.Fatalf("Get allocates %.1f times", allocs)
	}
}

func BenchmarkGetHit(b *testing.B) {
	c := New(64 << 20)
	for i := uint64(0); i < 10000; i++ {
		set(c, 1, i*4096, block(4096, 0), i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		h, ok := c.Get(1, uint64(i%10000)*4096)
		if !ok {
			b.Fatal("miss")
		}
		h.Release()
	}
}

func BenchmarkGetHitParallel(b *testing.B) {
	c := New(64 << 20)
	for i := uint64(0); i < 10000; i++ {
		set(c, 1, i*4096, block(4096, 0), i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(10000)
		for pb.Next() {
			i++
			h, ok := c.Get(1, uint64(i%10000)*4096)
			if !ok {
				b.Fatal("miss")
			}
			h.Release()
		}
	})
}

// BenchmarkSetEvict measures insertion into a full cache, so every Set that
// takes its block also runs the CLOCK hand, and frees the evicted block.
// Each block is offered twice, as a full shard takes a block on its second
// offer (see doorkeeper): an iteration is one block turned away and one
// taken. It includes what a reader does on a miss besides the read:
// allocating the buffer and filling it (the fill stands for the read into
// it).
func BenchmarkSetEvict(b *testing.B) {
	c := New(4 << 20)
	data := block(4096, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		set(c, 1, uint64(i)*4096, data, 0)
		set(c, 1, uint64(i)*4096, data, 0)
	}
}

// SetCapacity evicts at once when the cache shrinks, and lets it fill again
// when it grows.
func TestSetCapacity(t *testing.T) {
	c := New(8 << 20)
	block := make([]byte, 4096)
	for i := uint64(0); i < 2000; i++ {
		set(c, 1, i*4096, block, 0)
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
		set(c, 2, i*4096, block, 0)
	}
	if m := c.Metrics(); m.Size > 16<<20 || m.Count < 2900 {
		t.Fatalf("after growing to 16 MiB: %+v", m)
	}
}

// TestEvictedBlockStaysIntactWhileHeld: a block evicted (by capacity,
// Delete, replacement, EvictFile or SetCapacity) while a reader holds it
// keeps its bytes, and its memory is not reused, until the reader releases
// it; then it is freed.
func TestEvictedBlockStaysIntactWhileHeld(t *testing.T) {
	evictions := map[string]func(c *Cache){
		"capacity": func(c *Cache) {
			for i := uint64(1); i < 200; i++ {
				admit(c, 2, i, block(4000, 0xee), 0)
			}
		},
		"delete":      func(c *Cache) { c.Delete(1, 0) },
		"replace":     func(c *Cache) { set(c, 1, 0, block(4000, 0xee), 0) },
		"evictfile":   func(c *Cache) { c.EvictFile(1) },
		"setcapacity": func(c *Cache) { c.SetCapacity(1) },
	}
	for name, evict := range evictions {
		t.Run(name, func(t *testing.T) {
			c := New(64 << 10)
			set(c, 1, 0, block(4000, 0x5a), 9)
			h, ok := c.Get(1, 0)
			if !ok {
				t.Fatal("miss")
			}
			inUse := c.Metrics().InUse
			evict(c)
			if g, ok := c.Get(1, 0); ok && name != "replace" {
				g.Release()
				t.Fatal("block still cached")
			}
			// Churn the allocator: nothing may land on the held block.
			for i := 0; i < 100; i++ {
				x := c.Alloc(4000)
				copy(x.Data(), block(4000, 0xcc))
				x.Release()
			}
			if !bytes.Equal(h.Data(), block(4000, 0x5a)) || h.Sum() != 9 {
				t.Fatal("held block changed after eviction")
			}
			if m := c.Metrics(); m.InUse < int64(len(h.Data())) {
				t.Fatalf("held block not counted in use: %+v (before eviction %d)", m, inUse)
			}
			before := c.Metrics().InUse
			h.Release()
			if m := c.Metrics(); before-m.InUse < 4000 {
				t.Fatalf("releasing the last reference freed %d bytes: %+v", before-m.InUse, m)
			}
		})
	}
}

// TestRefcountsAreExact: after every Get is released and every block
// evicted, nothing is in use and the allocator's chunks are returned (but
// for its spares).
func TestRefcountsAreExact(t *testing.T) {
	c := New(1 << 20)
	var held []Handle
	for i := uint64(0); i < 500; i++ {
		set(c, i%3, i, block(1000+int(i), byte(i)), i)
		if h, ok := c.Get(i%3, i/2); ok {
			held = append(held, h)
		}
	}
	for id := uint64(0); id < 3; id++ {
		c.EvictFile(id)
	}
	if m := c.Metrics(); m.Count != 0 || m.InUse == 0 {
		t.Fatalf("held blocks not in use: %+v", m)
	}
	for _, h := range held {
		h.Release()
	}
	if m := c.Metrics(); m.InUse != 0 || m.Size != 0 {
		t.Fatalf("after releasing everything: %+v", m)
	}
	c.alloc.ReleaseSpares()
	if m := c.Metrics(); m.Mapped != 0 {
		t.Fatalf("mapped after releasing everything: %+v", m)
	}
}

func TestReleaseTwicePanics(t *testing.T) {
	c := New(1 << 20)
	set(c, 1, 0, block(10, 1), 0)
	h, _ := c.Get(1, 0)
	h.Release()
	c.Delete(1, 0) // the last reference: frees the block
	defer func() {
		if recover() == nil {
			t.Fatal("a second Release did not panic")
		}
	}()
	h.Release()
}

// TestStaleHandleAfterReuse: entries are reused once freed, but a stale
// Handle to one (a copy released already) cannot reach the block that
// reuses it: its Release panics and leaves the new block's count alone.
func TestStaleHandleAfterReuse(t *testing.T) {
	c := New(1 << 20)
	// The pool hands a freed entry back to the same processor first, but
	// need not (the race detector drops a quarter of what is put back):
	// try until it comes back, many times over.
	var stale, reused Handle
	for attempt := 0; attempt < 100 && !reused.Valid(); attempt++ {
		h := c.Alloc(100)
		stale = h
		h.Release()
		var fresh []Handle
		for range 100 {
			x := c.Alloc(100)
			if x.e == stale.e {
				reused = x
				break
			}
			fresh = append(fresh, x)
		}
		for _, x := range fresh {
			x.Release()
		}
	}
	if !reused.Valid() {
		t.Fatal("no freed entry came back from the pool in 100 attempts")
	}
	copy(reused.Data(), block(100, 7))
	if !panics(func() { stale.Release() }) {
		t.Fatal("Release of a stale handle did not panic")
	}
	if n := reused.e.refs.Load(); n != 1 {
		t.Fatalf("the stale Release moved the new block's count to %d", n)
	}
	if !bytes.Equal(reused.Data(), block(100, 7)) {
		t.Fatal("the new block changed")
	}
	reused.Release()
}

func TestSetTwicePanics(t *testing.T) {
	c := New(1 << 20)
	h := c.Alloc(10)
	defer h.Release()
	c.Set(1, 0, h, 0)
	defer func() {
		if recover() == nil {
			t.Fatal("a second Set of one handle did not panic")
		}
	}()
	c.Set(1, 1, h, 0)
}

// TestUseAfterReleaseIsCaught: in invariants builds, using a block after its
// last reference is gone panics: through the Handle (Data, Sum), or through
// the bytes (the memory faults; SetPanicOnFault makes that a panic here).
func TestUseAfterReleaseIsCaught(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("needs -tags invariants")
	}
	c := New(1 << 20)
	keep := c.Alloc(4000) // keeps the chunk mapped
	defer keep.Release()
	set(c, 1, 0, block(4000, 7), 0)
	h, _ := c.Get(1, 0)
	data := h.Data()
	c.EvictFile(1)
	if data[10] != 7 {
		t.Fatal("held block changed")
	}
	h.Release() // the last reference
	if !panics(func() { h.Data() }) {
		t.Fatal("Data after release did not panic")
	}
	if !panics(func() { h.Sum() }) {
		t.Fatal("Sum after release did not panic")
	}
	if !panics(func() { sink = data[10] }) {
		t.Fatal("reading a released block's bytes did not fault")
	}
}

var sink byte

func panics(fn func()) (panicked bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { panicked = recover() != nil }()
	fn()
	return false
}

// BenchmarkMissInsert is a miss as the SST reader handles it on a DB many
// times the cache: Get misses, a buffer is allocated and filled, Set offers
// it to a full cache, which turns it away (the block is new: see
// doorkeeper), and the reader's release frees it. BenchmarkSetEvict has
// the blocks that are taken.
func BenchmarkMissInsert(b *testing.B) {
	c := New(4 << 20)
	data := block(4100, 0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := c.Get(1, uint64(i)*4096); ok {
			b.Fatal("hit")
		}
		set(c, 1, uint64(i)*4096, data, 0)
	}
}
