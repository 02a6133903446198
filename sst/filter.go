package sst

import (
	"encoding/binary"

	"github.com/vigildb/vigil/internal/base"
	"github.com/zeebo/xxh3"
)

// Bloom filter (see "Filter block" in the package comment). One 64-byte cache
// line per key group: a lookup touches one line, so a negative answer costs
// one cache miss however many probes it makes.

const (
	filterLineBytes = 64
	filterLineBits  = filterLineBytes * 8
	filterTrailer   = 5 // numProbes byte + numLines uint32
	maxFilterProbes = 30
)

func filterProbes(bitsPerKey int) int {
	return min(max(bitsPerKey*69/100, 1), maxFilterProbes)
}

// filterHash is the hash a filter stores for a user key, or for a prefix in
// a prefix filter. It is part of the format.
func filterHash(userKey []byte) uint64 { return xxh3.Hash(userKey) }

// splitKey returns the length of key's prefix under c.Split (which must
// not be nil); ok is false when Split answers a length outside the key (a
// faulty comparer), which the caller must not slice with.
func splitKey(c *base.Comparer, key []byte) (n int, ok bool) {
	n = c.Split(key)
	return n, n >= 0 && n <= len(key)
}

// buildFilter encodes a filter over the given key hashes, into dst's
// memory when it is large enough (its contents do not matter), else into
// a new buffer. The result has BlockTrailerLen bytes of spare capacity.
func buildFilter(dst []byte, hashes []uint64, bitsPerKey int) []byte {
	numLines := 0
	if len(hashes) > 0 {
		numLines = (len(hashes)*bitsPerKey + filterLineBits - 1) / filterLineBits
	}
	probes := filterProbes(bitsPerKey)
	n := numLines*filterLineBytes + filterTrailer
	out := dst[:0]
	if cap(out) < n+BlockTrailerLen {
		out = make([]byte, n, n+BlockTrailerLen)
	} else {
		out = out[:n]
		clear(out)
	}
	for _, h := range hashes {
		lo, hi := uint32(h), uint32(h>>32)
		line := out[int((uint64(lo)*uint64(numLines))>>32)*filterLineBytes:][:filterLineBytes]
		delta := hi>>17 | hi<<15
		for j := 0; j < probes; j++ {
			bit := hi % filterLineBits
			line[bit/8] |= 1 << (bit % 8)
			hi += delta
		}
	}
	out[numLines*filterLineBytes] = byte(probes)
	binary.LittleEndian.PutUint32(out[numLines*filterLineBytes+1:], uint32(numLines))
	return out
}

// bloomFilter is a decoded, validated filter block. It is immutable and safe
// for concurrent use.
type bloomFilter struct {
	lines    []byte
	numLines uint64
	probes   int
}

// decodeFilter validates a filter block's frame.
func decodeFilter(b []byte) (bloomFilter, error) {
	if len(b) < filterTrailer {
		return bloomFilter{}, blockError("filter block shorter than its trailer")
	}
	n := len(b) - filterTrailer
	probes := int(b[n])
	numLines := binary.LittleEndian.Uint32(b[n+1:])
	if uint64(numLines)*filterLineBytes != uint64(n) {
		return bloomFilter{}, blockError("filter line count does not match its size")
	}
	if probes < 1 || probes > maxFilterProbes {
		return bloomFilter{}, blockError("filter probe count out of range")
	}
	return bloomFilter{lines: b[:n:n], numLines: uint64(numLines), probes: probes}, nil
}

// lineOffset returns where the line for hash h starts in f.lines (f has
// lines).
func (f *bloomFilter) lineOffset(h uint64) int {
	return int((uint64(uint32(h))*f.numLines)>>32) * filterLineBytes
}

// mayContain reports whether the key may be in the filter; false is certain.
func (f *bloomFilter) mayContain(h uint64) bool {
	if f.numLines == 0 {
		return false
	}
	hi := uint32(h >> 32)
	off := f.lineOffset(h)
	line := f.lines[off : off+filterLineBytes]
	delta := hi>>17 | hi<<15
	for j := 0; j < f.probes; j++ {
		bit := hi % filterLineBits
		if line[bit/8]&(1<<(bit%8)) == 0 {
			return false
		}
		hi += delta
	}
	return true
}
