package skiplist

// Link summaries: a 32-bit, order-keeping summary of the target's key in
// every link of level 1 and up, so that an unvalidated search can see that
// a level's next node lies past the probe without loading that node.
//
// # Why
//
// A search in a memtable larger than the CPU caches pays a cache miss for
// every node it compares. At each level it moves right past nodes below
// the probe and stops at the first one at or above it; with towers of
// p = 1/2 about half of those stop nodes are new at that level (the other
// half are the node it stopped at one level up, which `bigger` skips). The
// stop node is loaded only to learn that it is bigger: the summary in the
// link that leads to it tells that, for most keys, with one integer compare
// on the cache line the search already holds (the current node's tower).
//
// # The summary
//
// Keys of one memtable usually share a prefix (a table id, zero-padded
// digits, the zero high bytes of a small big-endian number), so the first
// bytes of a key tell little. The list picks a prefix P once, when it has
// some entries: the common prefix of its first and last user keys, up to
// maxSummaryPrefix bytes, cut shorter where a sample of its keys stops
// differing (see newSummaryPrefix). The summary of a user key k is then
//
//	0           if k sorts before every key that starts with P;
//	max(v, 1)   if k starts with P, where v is the bytes of k after P as
//	            a number: 4 raw bytes big-endian, or as many digits as
//	            fit of the byte range the list saw there (summaryPrefix);
//	0xffffffff  if k sorts after every key that starts with P.
//
// It never decreases as keys increase, so summary(a) > summary(b) proves
// a > b; equal summaries prove nothing. Every link to a node whose insert
// began before P was chosen carries 0, which proves nothing either (no
// summary is below 0), so P can be chosen while inserts run: every summary
// the list ever holds is 0 or computed under the one P, which never
// changes once set. A node's summary is fixed when its insert begins, and
// every link to it carries that one value.
//
// # Integrity
//
// A summary is a copy of information in the target's key, the one place in
// the list where that is so (abbreviations are computed from the key bytes
// each time). A summary damaged upwards makes an unvalidated search stop a
// level early and treat the node as bigger, like a damaged link sends it
// anywhere: unvalidated searches already trust links. An unvalidated
// insert that trusts it links its key before that node, so the damage
// becomes an order error in the list, as a damaged link's would; the
// flush's Verify reports both. Validating searches
// and inserts (Options.Validate, ParanoidMemoryChecks) never read
// summaries, and Verify checks every one against its target's key, so the
// memtable's flush-side check reports a damaged summary as corruption.

import (
	"bytes"
	"encoding/binary"
	"math"
)

// maxSummaryPrefix caps the common prefix a list skips in its summaries.
const maxSummaryPrefix = 32

// summaryAfter is how far into the arena (bytes past the head) the list
// first tries to pick its summary prefix, and how much further it tries
// again when it cannot: by then a list of small entries has some hundreds,
// enough for its first and last keys to span the range random inserts
// cover, and for the bytes after the prefix to show their range.
const summaryAfter = 64 << 10

// summaryMinKeys is the fewest entries a list picks its summary prefix
// from. The arena's growth is only a hint of a list's size: the memtable
// keeps its range deletions in a second list in the same arena, and a few
// large values fill 64 KiB alone. A prefix picked from one key would
// separate almost nothing for the rest of the list's life.
const summaryMinKeys = 64

// summarySample caps the entries pickSummaryPrefix reads.
const summarySample = 1024

// noSummary is the probe summary of a search in a list without a summary
// prefix yet: no link summary exceeds it, so none decides anything.
const noSummary = math.MaxUint32

// summaryPrefix is how a list summarizes keys: after the prefix p, up to n
// bytes, each as a digit of radix r. In the raw form (clamp false: keys use
// every byte value after p) a byte is its own digit and r is 256. In the
// clamped form the bytes after p seen when the list chose it lay in
// [lo, hi]: a byte in that range is the digit c-lo+1, so r = hi-lo+3 and
// n grows as r shrinks (8 digits of a decimal id, 5 characters of text). A
// byte below lo, or the key's end, is digit 0 with every later digit 0; a
// byte above hi is digit r-1 with every later digit r-1. Either way the
// summary cannot decrease as keys increase (see summaryOf).
type summaryPrefix struct {
	p      []byte
	lo, hi byte
	clamp  bool
	r      uint32
	n      int
}

// linkWord packs a link of level >= 1: the target's offset in the low 32
// bits, its key's summary in the high 32.
func linkWord(off, sum uint32) uint64 { return uint64(sum)<<32 | uint64(off) }

// summaryOf returns the summary of the user key (or key prefix) k under sp.
//
// Why it never decreases: take keys a < b. If they differ within p, the
// one below p's range gets 0 or the one above gets the maximum, or both
// are on one side. Otherwise their digits are compared in order like
// their bytes: at the first byte where they differ, a's digit is at most
// b's (the digit of a byte never decreases with the byte, and a's end is
// digit 0); if it is less, a's summary is less; if the two are equal,
// both bytes were clamped the same way and every later digit of both is
// the same fill.
func summaryOf(sp *summaryPrefix, k []byte) uint32 {
	p := sp.p
	n := len(p)
	if len(k) < n {
		return summaryShort(p, k)
	}
	if c := bytes.Compare(k[:n], p); c != 0 {
		if c < 0 {
			return 0
		}
		return math.MaxUint32
	}
	rest := k[n:]
	if !sp.clamp && len(rest) >= 4 {
		return max(binary.BigEndian.Uint32(rest), 1)
	}
	var v uint32
	for i := 0; i < sp.n; i++ {
		var d uint32
		if i < len(rest) {
			c := rest[i]
			switch {
			case !sp.clamp:
				d = uint32(c)
			case c < sp.lo:
				return max(fillDigits(v, sp.r, sp.n-i, 0), 1)
			case c > sp.hi:
				return fillDigits(v, sp.r, sp.n-i, sp.r-1)
			default:
				d = uint32(c-sp.lo) + 1
			}
		}
		v = v*sp.r + d
	}
	return max(v, 1)
}

// fillDigits appends k digits d to v in radix r.
func fillDigits(v, r uint32, k int, d uint32) uint32 {
	for ; k > 0; k-- {
		v = v*r + d
	}
	return v
}

// summaryShort is summaryOf for a key shorter than the prefix: it is either
// a proper prefix of p (so below every key with p) or differs within it.
func summaryShort(p, k []byte) uint32 {
	if bytes.Compare(k, p[:len(k)]) > 0 {
		return math.MaxUint32
	}
	return 0
}

// newSummaryPrefix chooses the summary of a list whose first and last user
// keys are first and last, from sample, some of its keys in order (first
// among them).
//
// The prefix is their common prefix (which every key between them has),
// cut short when the sample differs only in fewer bytes than a summary
// holds digits: keys inserted in order (or from a narrow range first) show
// a long common prefix that later keys leave, and every key that leaves it
// gets the same summary. So the summary's digits end where the sample's
// differences end: "0000000000000449" (the 450th of %016d ids) gives the
// prefix "00000000" and 8 decimal digits, room for 10^8 ids. The digits'
// range is that of the bytes after the prefix in the sample.
func newSummaryPrefix(first, last []byte, sample [][]byte) *summaryPrefix {
	n := 0
	for n < len(first) && n < len(last) && n < maxSummaryPrefix && first[n] == last[n] {
		n++
	}
	end := n // one past the last byte in which a key differs from first
	for _, k := range sample {
		for i := min(len(k), len(first)) - 1; i >= end; i-- {
			if k[i] != first[i] {
				end = i + 1
				break
			}
		}
		if len(k) != len(first) {
			// A key ends where the other goes on: count the longer
			// one's bytes as differing.
			end = max(end, len(k), len(first))
		}
	}
	sp := byteRange(first[:n], sample)
	if keep := end - sp.n; keep < n {
		sp = byteRange(first[:max(keep, 0)], sample)
	}
	return sp
}

// byteRange returns the summary after prefix p of keys like sample: raw
// bytes, or digits of the bytes' range in the sample (see summaryPrefix).
func byteRange(p []byte, sample [][]byte) *summaryPrefix {
	n := len(p)
	sp := &summaryPrefix{p: bytes.Clone(p), lo: 255, hi: 0}
	for _, k := range sample {
		if len(k) < n {
			continue
		}
		for _, c := range k[n:min(len(k), n+maxSummaryPrefix)] {
			sp.lo, sp.hi = min(sp.lo, c), max(sp.hi, c)
		}
	}
	if sp.lo > sp.hi || int(sp.hi-sp.lo)+3 > 256 {
		sp.lo, sp.hi, sp.r, sp.n = 0, 255, 256, 4
		return sp
	}
	sp.clamp, sp.r = true, uint32(sp.hi-sp.lo)+3
	for p := uint64(sp.r); p <= math.MaxUint32; p *= uint64(sp.r) {
		sp.n++
	}
	return sp
}

// summaries reports whether the list's order is bytewise on user keys, the
// only order summaries are defined for.
func (l *Skiplist) summaries() bool {
	return l.order == orderBytewise || l.order == orderInternal
}

// userKeyAt returns the user key (the whole key, if the list has no
// trailers) of the node at off.
func (l *Skiplist) userKeyAt(off uint32) []byte {
	k := l.keyAt(off)
	if u, _, ok := l.splitProbe(k); ok {
		return u
	}
	return k
}

// pickSummaryPrefix sets the list's summary prefix from the keys it holds,
// unless it is set already. An insert at arena offset at calls it once at
// passes sumAt; it reads up to summarySample entries along level 0 (a walk
// concurrent inserts do not disturb). With fewer than sumMinKeys entries,
// or a link or length outside the arena, it sets nothing and puts sumAt
// summaryAfter bytes past at, so that inserts do not walk the list again
// before the arena has grown that much more.
func (l *Skiplist) pickSummaryPrefix(at uint32) {
	if !l.summaries() || l.sum.Load() != nil {
		return
	}
	if keys, last, ok := l.sampleKeys(); ok {
		l.sum.CompareAndSwap(nil, newSummaryPrefix(keys[0], last, keys))
		return
	}
	l.sumAt.Store(uint32(min(uint64(at)+summaryAfter, math.MaxUint32)))
}

// sampleKeys returns up to summarySample user keys from the list's start,
// in order, and its last user key; ok is false with fewer than sumMinKeys
// keys or on a link or length outside the arena.
func (l *Skiplist) sampleKeys() (keys [][]byte, last []byte, ok bool) {
	for x := l.loadNext(l.head, 0); x != l.tail && len(keys) < summarySample; x = l.loadNext(x, 0) {
		if !l.inBounds(x) || l.checkExtent(x) != nil {
			return nil, nil, false
		}
		keys = append(keys, l.userKeyAt(x))
	}
	lx := l.loadPrev(l.tail)
	if len(keys) < max(l.sumMinKeys, 1) || lx == l.head || !l.inBounds(lx) || l.checkExtent(lx) != nil {
		return nil, nil, false
	}
	return keys, l.userKeyAt(lx), true
}

// probeSummary is the summary an unvalidated search compares link
// summaries with (noSummary before the list has a prefix).
func (l *Skiplist) probeSummary(prefix []byte) uint32 {
	if sp := l.sum.Load(); sp != nil {
		return summaryOf(sp, prefix)
	}
	return noSummary
}
