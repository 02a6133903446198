package sst

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// indexSampleStride is how many index entries share one sample (see
// indexSamples): 2 bytes of memory per data block, and after the samples'
// search a binary search of at most this many entries, plus one beyond
// them when the answer is at an end of the range.
const indexSampleStride = 4

// indexSamples narrows an index search before it touches the index block:
// every indexSampleStride-th separator's user key, abbreviated to the 8
// bytes that follow the prefix all the table's separators share, as a
// big-endian number, in an array of its own.
//
// Why: a binary search of the index block reads, at each probe, the entry's
// offset in the restart array and the entry itself, two cache lines apart
// from those of the probe before. Past the first few probes, which every
// search shares, each is a miss (an index is ~30 bytes a data block: 0.5 MB
// for a 64 MB table). The samples are 16 times denser, and their search
// ends within one cache line; the separators are then compared in a range
// of a few adjacent entries.
//
// The abbreviation skips the shared prefix so that it is made of the bytes
// that tell separators apart, whatever the keys look like: decimal ids'
// leading zeros, a table or tenant prefix, a hash's first byte.
//
// Bytewise order only: an abbreviation orders keys as they order when it
// is a prefix of them. Under another comparer the index is searched whole.
//
// Invariant: nothing a search returns rests on the samples alone. They
// only pick the range [lo, hi) to search; the answer i found there is
// checked against the index (separator i-1 < the key <= separator i; see
// indexBlock.search), and if it fails, the whole index is searched. So
// samples corrupted in memory cost time, never a wrong answer.
//
// Concurrency: built once at Open, before the Reader is shared; read-only
// afterwards.
type indexSamples struct {
	// prefix is the user-key prefix shared by every separator (it aliases
	// the index block).
	prefix []byte
	// abbrs holds one little-endian uint64 per sample: entry
	// j*indexSampleStride's abbreviation. Nil: no samples.
	abbrs []byte
}

// abbrev is the big-endian number of k's first 8 bytes, k padded with
// zeros: abbrev(a) < abbrev(b) implies a < b bytewise.
func abbrev(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}

// buildSamples fills x.samples, its buffer from alloc, for an index whose
// separators are known to increase bytewise (checkIndexOrder). An index
// of fewer than two samples' entries, or not bytewise, gets none.
func (x *indexBlock) buildSamples(alloc func(n int) []byte) {
	n := x.len()
	if x.compare != nil || n < 2*indexSampleStride {
		return
	}
	first, last := x.sepUser(0), x.sepUser(n-1)
	k := 0
	for k < len(first) && k < len(last) && first[k] == last[k] {
		k++
	}
	ns := (n + indexSampleStride - 1) / indexSampleStride
	abbrs := alloc(8 * ns)
	for j := range ns {
		binary.LittleEndian.PutUint64(abbrs[8*j:], abbrev(x.sepUser(j * indexSampleStride)[k:]))
	}
	x.samples = indexSamples{prefix: first[:k:k], abbrs: abbrs}
}

// narrow returns the range [lo, hi) of entries in which the first
// separator >= ukey lies if it is not hi, as far as the samples tell
// (lo == hi: it is lo). The caller checks it (see indexSamples).
func (s *indexSamples) narrow(ukey []byte, n int) (lo, hi int) {
	p := s.prefix
	if len(ukey) < len(p) || !bytes.Equal(ukey[:len(p)], p) {
		// Every separator starts with p.
		if bytes.Compare(ukey, p) < 0 {
			return 0, 0
		}
		return n, n
	}
	a := abbrev(ukey[len(p):])
	abbrs := s.abbrs
	ns := len(abbrs) / 8
	// jl: the first sample >= a; jh: the first > a.
	l, h := 0, ns
	for l < h {
		m := int(uint(l+h) >> 1)
		if binary.LittleEndian.Uint64(abbrs[8*m:]) < a {
			l = m + 1
		} else {
			h = m
		}
	}
	jl := l
	h = ns
	for l < h {
		m := int(uint(l+h) >> 1)
		if binary.LittleEndian.Uint64(abbrs[8*m:]) <= a {
			l = m + 1
		} else {
			h = m
		}
	}
	jh := l
	// Sample jl-1 is < ukey, so is everything before it; sample jh is >
	// ukey.
	if jl > 0 {
		lo = (jl-1)*indexSampleStride + 1
	}
	hi = n
	if jh < ns {
		hi = jh * indexSampleStride
	}
	return lo, hi
}

// checkSamples reports samples that differ from what buildSamples makes of
// the index: memory corruption, found by Verify (a search never trusts
// them alone, so it is no wrong answer, only a slower one).
func (x *indexBlock) checkSamples() error {
	s := x.samples
	if s.abbrs == nil {
		return nil
	}
	k := len(s.prefix)
	for j := range len(s.abbrs) / 8 {
		i := j * indexSampleStride
		u := x.sepUser(i)
		if len(u) < k || !bytes.Equal(u[:k], s.prefix) || binary.LittleEndian.Uint64(s.abbrs[8*j:]) != abbrev(u[k:]) {
			return fmt.Errorf("index sample %d (entry %d) differs from the index", j, i)
		}
	}
	return nil
}
