package raftstore

import (
	"encoding/binary"
	"math/bits"
	"slices"

	"github.com/hashicorp/raft"
)

// A log key's value is a chunk: the entries first, first+1, …, last of one
// contiguous run, where last is the index in the key. A chunk of one entry
// is that entry's encoding (format version 1, what every log value was
// before chunks, so logs written then read as they are). A chunk of several
// is format version 2:
//
//	+---+-----------+--------------------+------------------------------+
//	| 2 | uvarint n | n × uvarint length | n entries, AppendLog's bytes |
//	+---+-----------+--------------------+------------------------------+
//
// n ≥ 2, first = last-n+1, and the lengths add up to the rest of the value
// exactly. Each entry keeps its own index, so an entry read from the wrong
// place in a chunk, or a chunk under the wrong key, is caught.
//
// Why chunks: StoreLogs writes raft's whole append (up to
// MaxAppendEntries entries) as one key instead of one key per entry, so the
// memtable takes one insert per call instead of 64, and a flush walks a
// sixtieth of the nodes. Why the last index in the key: the chunk holding
// entry i is then the first key at or above i, which a forward seek finds
// (a reverse step would copy every value it passes). Version 2 is pinned
// by TestLogChunkGolden.
const (
	chunkFormatV2 = 2

	// maxChunkBytes and maxChunkEntries close a chunk: a run longer than
	// that is split, so that a GetLog never reads more than 64 KiB to find
	// one entry, nor walks more than 1,024 lengths. An entry larger than
	// maxChunkBytes is a chunk of its own.
	maxChunkBytes   = 64 << 10
	maxChunkEntries = 1024
)

// chunk is a parsed chunk value. Its slices alias the value it was parsed
// from.
type chunk struct {
	first uint64
	n     int
	sizes []byte // n uvarint lengths (nil for a version-1 value)
	body  []byte // the entries
}

// last returns the index of the chunk's last entry.
func (c *chunk) last() uint64 { return c.first + uint64(c.n) - 1 }

// covers reports whether the chunk holds entry index.
func (c *chunk) covers(index uint64) bool { return index >= c.first && index <= c.last() }

// parseChunk parses the value v stored under the log key of index last.
// It checks the length table against the value; the entries themselves are
// checked by DecodeLog when they are read. It never allocates.
func parseChunk(last uint64, v []byte) (chunk, error) {
	if len(v) == 0 {
		return chunk{}, corruptf("log chunk up to index %d is empty", last)
	}
	if v[0] == logFormatV1 {
		return chunk{first: last, n: 1, body: v}, nil
	}
	if v[0] != chunkFormatV2 {
		return chunk{}, corruptf("log chunk up to index %d: format version %d is unknown (this build reads versions %d and %d)", last, v[0], logFormatV1, chunkFormatV2)
	}
	n, w := binary.Uvarint(v[1:])
	// Every entry takes at least one length byte and one entry byte.
	if w <= 0 || n < 2 || n > uint64(len(v)/2) {
		return chunk{}, corruptf("log chunk up to index %d: bad entry count at offset 1", last)
	}
	if n-1 > last {
		return chunk{}, corruptf("log chunk up to index %d: %d entries would start below index 0", last, n)
	}
	first := last - (n - 1)
	p := 1 + w
	start := p
	var total uint64
	for k := uint64(0); k < n; k++ {
		size, w := binary.Uvarint(v[p:])
		if w <= 0 || size == 0 || size > uint64(len(v)) {
			return chunk{}, corruptf("log chunk up to index %d: bad length of entry %d at offset %d", last, k, p)
		}
		p += w
		total += size
	}
	if total != uint64(len(v)-p) {
		return chunk{}, corruptf("log chunk up to index %d: entries of %d bytes at offset %d, but %d bytes remain", last, total, p, len(v)-p)
	}
	return chunk{first: first, n: int(n), sizes: v[start:p], body: v[p:]}, nil
}

// entry returns the encoding of entry index, which the chunk covers.
func (c *chunk) entry(index uint64) []byte {
	if c.sizes == nil {
		return c.body
	}
	k := index - c.first
	off, p := 0, 0
	for ; ; k-- {
		size, w := binary.Uvarint(c.sizes[p:]) // parseChunk checked the table
		p += w
		if k == 0 {
			return c.body[off : off+int(size) : off+int(size)]
		}
		off += int(size)
	}
}

// each calls fn with the index and encoding of every entry in [lo, hi].
func (c *chunk) each(lo, hi uint64, fn func(index uint64, enc []byte)) {
	if c.sizes == nil {
		if lo <= c.first && c.first <= hi {
			fn(c.first, c.body)
		}
		return
	}
	off, p := 0, 0
	for i := c.first; ; i++ {
		size, w := binary.Uvarint(c.sizes[p:])
		p += w
		if i >= lo && i <= hi {
			fn(i, c.body[off:off+int(size):off+int(size)])
		}
		off += int(size)
		if i == c.last() || i >= hi {
			return
		}
	}
}

// uvarintLen returns the length of x's uvarint encoding.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// fits reports whether a chunk of n entries and total bytes of entries
// takes one more entry of size bytes: the one rule by which both
// appendLogChunk and chunkEnd split a run.
func fits(n, total, size int) bool {
	return n < maxChunkEntries && total+size <= maxChunkBytes
}

// chunkEnd returns the end j of the chunk that starts at entry k of a run
// whose encoded lengths are sizes: at least one entry, and as many more as
// fit.
func chunkEnd(sizes []int, k int) int {
	j, total := k+1, sizes[k]
	for j < len(sizes) && fits(j-k, total, sizes[j]) {
		total += sizes[j]
		j++
	}
	return j
}

// appendLogChunk encodes the first chunk of logs (consecutive indexes, at
// least one): as many entries as fit, one at least. It returns dst
// extended, the start of the chunk's value in it (the value runs to the
// end), and the number of entries taken. sizes is scratch. The entries are
// encoded once, in place: after room for the largest header they could
// need, with the header written right before them once their lengths are
// known (a chunk of one is the entry alone).
func appendLogChunk(dst []byte, logs []*raft.Log, sizes *[]int) (out []byte, start, n int) {
	room := 1 + binary.MaxVarintLen64*(1+min(len(logs), maxChunkEntries))
	base := len(dst)
	out = slices.Grow(dst, room)[:base+room]
	*sizes = (*sizes)[:0]
	total := 0
	for n < len(logs) && n < maxChunkEntries {
		before := len(out)
		out = AppendLog(out, logs[n])
		size := len(out) - before
		if n > 0 && !fits(n, total, size) {
			out = out[:before] // it opens the next chunk
			break
		}
		*sizes = append(*sizes, size)
		total += size
		n++
	}
	if n == 1 {
		return out, base + room, 1
	}
	hlen := 1 + uvarintLen(uint64(n))
	for _, size := range *sizes {
		hlen += uvarintLen(uint64(size))
	}
	start = base + room - hlen
	appendChunkHeader(out[start:start], *sizes)
	return out, start, n
}

// appendChunkHeader appends the version-2 header of a chunk whose entries
// have the encoded lengths sizes (two at least).
func appendChunkHeader(dst []byte, sizes []int) []byte {
	dst = append(dst, chunkFormatV2)
	dst = binary.AppendUvarint(dst, uint64(len(sizes)))
	for _, size := range sizes {
		dst = binary.AppendUvarint(dst, uint64(size))
	}
	return dst
}

// appendRawChunk appends the chunk of entries already encoded (consecutive
// indexes, at least one) to dst; sizes[i] is len(encs[i]).
func appendRawChunk(dst []byte, encs [][]byte, sizes []int) []byte {
	if len(encs) == 1 {
		return append(dst, encs[0]...)
	}
	dst = appendChunkHeader(dst, sizes)
	for _, e := range encs {
		dst = append(dst, e...)
	}
	return dst
}
