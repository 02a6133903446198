package cache

import "math/bits"

// doorkeeper is a full shard's admission filter: it remembers the keys of
// the blocks the shard turned away, so that a block asked for a second time
// within a window is cached, and one asked for once is not.
//
// Why: a full cache that takes every block it is offered evicts one to
// make room each time, whether or not the newcomer will be read again.
// When reads spread over a DB many times the cache (random reads, scans),
// most newcomers never are: the shard then pays a write lock, an eviction
// sweep and the free of a cold buffer for a block worth no more than the
// one it replaces, and the next miss decodes into cold memory. Turned away,
// the block is read, used and freed, and its buffer, still in the CPU's
// caches, takes the next miss (manual's hot slot). Blocks read again soon
// (a hot set larger than the cache's free room, a scan repeated) get in
// on their second miss. This is TinyLFU's doorkeeper (Einziger et al.)
// without the frequency sketch behind it: CLOCK's referenced bit already
// keeps the blocks that are hit.
//
// It is two Bloom filters of generations: keys are added to cur; after
// window additions (the shard's entry count when the generation began,
// at least minWindow), cur becomes prev and a cleared one takes its place,
// so a key is remembered for one to two windows. Three probes per key in a
// filter of at least 8 bits per key of a window: about 3 % false positives
// in each generation, up to 6 % for both (a block let in on its first
// miss).
//
// Concurrency: none; the shard's write lock guards it (Set).
type doorkeeper struct {
	cur, prev []uint64
	adds      int
	window    int
}

// minWindow is the shortest generation, for shards holding few blocks.
const minWindow = 64

// probes returns the three bit positions of hash h in a filter of mask+1
// bits, by double hashing: a from bits 17 and up (above the bits that
// place a key in its table), b from bits 41 and up (within one shard its
// top bits are constant, which large filters only feel as a few more
// collisions).
func probes(h uint64, mask uint64) [3]uint64 {
	a := h >> 17
	b := h>>41 | 1
	return [3]uint64{a & mask, (a + b) & mask, (a + 2*b) & mask}
}

// has reports whether filter f holds every bit of h (false for no filter).
func has(f []uint64, h uint64) bool {
	if len(f) == 0 {
		return false
	}
	for _, p := range probes(h, uint64(len(f))*64-1) {
		if f[p/64]&(1<<(p%64)) == 0 {
			return false
		}
	}
	return true
}

// seen reports whether h was added in this generation or the last.
func (d *doorkeeper) seen(h uint64) bool { return has(d.cur, h) || has(d.prev, h) }

// add remembers h, starting a new generation of count (the shard's entries)
// first if this one is full.
func (d *doorkeeper) add(h uint64, count int64) {
	if d.cur == nil || d.adds >= d.window {
		d.rotate(count)
	}
	for _, p := range probes(h, uint64(len(d.cur))*64-1) {
		d.cur[p/64] |= 1 << (p % 64)
	}
	d.adds++
}

// rotate makes cur the previous generation and starts a cleared one sized
// for a window of count keys.
func (d *doorkeeper) rotate(count int64) {
	d.window = max(int(count), minWindow)
	words := 1 << bits.Len(uint(d.window*8/64-1)) // 8 bits a key, a power of two
	next := d.prev
	if len(next) != words {
		next = make([]uint64, words)
	} else {
		clear(next)
	}
	d.prev, d.cur = d.cur, next
	d.adds = 0
}
