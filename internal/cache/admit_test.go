package cache

import (
	"testing"
)

// TestAdmission pins when a shard takes a block: always while it has room;
// once full, a block only on its second offer within the doorkeeper's
// window, and a block already cached (a replacement) at once. Turned-away
// blocks are counted, and the caller's reference stays the only one.
func TestAdmission(t *testing.T) {
	const sz = 100
	c := New(4 * charge(New(1), sz)) // one shard, room for 4 blocks
	for i := uint64(0); i < 4; i++ {
		set(c, 1, i, block(sz, byte(i)), i)
	}
	if m := c.Metrics(); m.Count != 4 || m.Rejected != 0 {
		t.Fatalf("filling: %+v; want 4 blocks taken, none turned away", m)
	}
	h := c.Alloc(sz)
	copy(h.Data(), block(sz, 9))
	c.Set(1, 9, h, 9)
	if _, _, ok := get(c, 1, 9); ok {
		t.Fatal("a full shard took a block on its first offer")
	}
	if m := c.Metrics(); m.Rejected != 1 || m.Count != 4 {
		t.Fatalf("after the first offer: %+v", m)
	}
	if !h.Valid() || h.e.refs.Load() != 1 || h.e.cached {
		t.Fatal("a turned-away block holds a reference besides the caller's")
	}
	h.Release()
	if m := c.Metrics(); m.InUse != 4*(charge(c, sz)-EntryOverhead) {
		t.Fatalf("the turned-away block was not freed by its release: %+v", m)
	}
	set(c, 1, 9, block(sz, 9), 9)
	if d, _, ok := get(c, 1, 9); !ok || d[0] != 9 {
		t.Fatal("a full shard turned a block away on its second offer")
	}
	if m := c.Metrics(); m.Count != 4 || m.Rejected != 1 {
		t.Fatalf("after the second offer: %+v", m)
	}
	// A replacement of a cached block needs no second offer (block 2 was
	// taken while the shard had room, so it never met the doorkeeper).
	if _, _, ok := get(c, 1, 2); !ok {
		t.Fatal("block 2 is not cached")
	}
	set(c, 1, 2, block(sz, 10), 10)
	if d, sum, ok := get(c, 1, 2); !ok || d[0] != 10 || sum != 10 {
		t.Fatal("a full shard turned away the replacement of a cached block")
	}
	if m := c.Metrics(); m.Rejected != 1 {
		t.Fatalf("the replacement was counted as turned away: %+v", m)
	}
}

// TestAdmissionHotSet: with a full cache and a stream of blocks read once,
// a hot set that fits is cached after its second round and then hit, while
// the one-off blocks never get in.
func TestAdmissionHotSet(t *testing.T) {
	const sz = 1000
	c := New(minShardCapacity)
	perShard := int(c.shards[0].capacity / charge(c, sz))
	next := uint64(1 << 20)
	oneOff := func(n int) {
		for range n {
			set(c, 2, next, block(sz, 1), 0)
			next++
		}
	}
	oneOff(perShard * len(c.shards) * 2) // the cache is full of one-offs (taken while it had room)
	rejected := c.Metrics().Rejected
	hot := uint64(len(c.shards) * perShard / 4)
	hits := 0
	for round := range 4 {
		for k := range hot {
			if _, _, ok := get(c, 1, k); ok {
				hits++
			} else {
				set(c, 1, k, block(sz, 2), 0)
			}
		}
		oneOff(int(hot))
		if round == 1 {
			hits = 0
		}
	}
	// The one-offs offered once the cache was full (4 rounds of hot) were
	// all turned away, and so were the hot blocks' first offers (hot), but
	// for the doorkeeper's false positives.
	if got, want := c.Metrics().Rejected-rejected, int64(hot*5*9/10); got < want {
		t.Fatalf("%d blocks turned away, want >= %d", got, want)
	}
	// Rounds 3 and 4 hit every hot block but the few that CLOCK's hand
	// reached before their first hit.
	if want := int(2 * hot * 9 / 10); hits < want {
		t.Fatalf("hot set: %d hits in its last two rounds, want >= %d of %d", hits, want, 2*hot)
	}
}

// TestDoorkeeper: a key added is seen for the rest of its generation and
// the next, and forgotten after; false positives stay rare.
func TestDoorkeeper(t *testing.T) {
	var d doorkeeper
	const window = 1000
	h := func(i uint64) uint64 { return hashKey(key{7, i}) }
	for i := range uint64(window) {
		d.add(h(i), window)
	}
	for i := range uint64(window) {
		if !d.seen(h(i)) {
			t.Fatalf("key %d not seen in its own generation", i)
		}
	}
	for i := uint64(window); i < 2*window; i++ {
		d.add(h(i), window)
	}
	for i := range uint64(window) {
		if !d.seen(h(i)) {
			t.Fatalf("key %d not seen in the generation after its own", i)
		}
	}
	for i := uint64(2 * window); i < 3*window+1; i++ {
		d.add(h(i), window)
	}
	old := 0
	for i := range uint64(window) {
		if d.seen(h(i)) {
			old++
		}
	}
	fp := 0
	for i := uint64(1 << 30); i < 1<<30+10000; i++ {
		if d.seen(h(i)) {
			fp++
		}
	}
	// Two generations of 8 bits a key and 3 probes: ~3 % each.
	if old > window/10 || fp > 10000/10 {
		t.Fatalf("forgotten keys seen: %d of %d; never-added keys seen: %d of 10000", old, window, fp)
	}
}
