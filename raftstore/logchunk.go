package raftstore

import (
	"encoding/binary"

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

// encodedLogLen returns the exact length AppendLog appends for l.
func encodedLogLen(l *raft.Log) int {
	n := 3 + uvarintLen(l.Index) + uvarintLen(l.Term)
	if !l.AppendedAt.IsZero() {
		sec := l.AppendedAt.Unix()
		zz := uint64(sec<<1) ^ uint64(sec>>63) // varint's zig-zag
		n += uvarintLen(zz) + uvarintLen(uint64(l.AppendedAt.Nanosecond()))
	}
	if len(l.Extensions) > 0 {
		n += uvarintLen(uint64(len(l.Extensions))) + len(l.Extensions)
	}
	return n + len(l.Data)
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// chunkEnd returns the end j of the chunk that starts at logs[k]: at most
// maxChunkEntries entries and maxChunkBytes of entries, at least one.
// sizes[i] is the encoded length of logs[i].
func chunkEnd(sizes []int, k int) int {
	j, total := k+1, sizes[k]
	for j < len(sizes) && j-k < maxChunkEntries && total+sizes[j] <= maxChunkBytes {
		total += sizes[j]
		j++
	}
	return j
}

// appendLogChunk appends the chunk of logs (consecutive indexes, at least
// one) to dst; sizes[i] is encodedLogLen(logs[i]).
func appendLogChunk(dst []byte, logs []*raft.Log, sizes []int) []byte {
	if len(logs) == 1 {
		return AppendLog(dst, logs[0])
	}
	dst = append(dst, chunkFormatV2)
	dst = binary.AppendUvarint(dst, uint64(len(logs)))
	for _, n := range sizes {
		dst = binary.AppendUvarint(dst, uint64(n))
	}
	for i, l := range logs {
		before := len(dst)
		dst = AppendLog(dst, l)
		if len(dst)-before != sizes[i] {
			panic("raftstore: encodedLogLen disagrees with AppendLog")
		}
	}
	return dst
}

// appendRawChunk appends the chunk of entries already encoded (consecutive
// indexes, at least one) to dst.
func appendRawChunk(dst []byte, encs [][]byte) []byte {
	if len(encs) == 1 {
		return append(dst, encs[0]...)
	}
	dst = append(dst, chunkFormatV2)
	dst = binary.AppendUvarint(dst, uint64(len(encs)))
	for _, e := range encs {
		dst = binary.AppendUvarint(dst, uint64(len(e)))
	}
	for _, e := range encs {
		dst = append(dst, e...)
	}
	return dst
}
