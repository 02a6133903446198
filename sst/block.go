package sst

import (
	"bytes"
	"encoding/binary"
	"math"
)

// blockWriter builds one block (see "Blocks" in the package comment). It is
// reused across blocks: finish returns the encoded bytes, valid until reset.
type blockWriter struct {
	restartInterval int
	buf             []byte
	restarts        []uint32
	counter         int // entries since the last restart point; 0 = next entry is one
	prevKey         []byte
	nEntries        int
}

func (b *blockWriter) init(restartInterval int) {
	b.restartInterval = restartInterval
	b.reset()
}

func (b *blockWriter) reset() {
	b.buf = b.buf[:0]
	b.restarts = b.restarts[:0]
	b.counter = 0
	b.prevKey = b.prevKey[:0]
	b.nEntries = 0
}

func (b *blockWriter) empty() bool { return b.nEntries == 0 }

// add appends an entry. Keys must be added in the block's order; the caller
// checks that.
func (b *blockWriter) add(key, value []byte) {
	shared := 0
	if b.counter == 0 {
		b.restarts = append(b.restarts, uint32(len(b.buf)))
	} else {
		n := min(len(b.prevKey), len(key))
		for shared < n && b.prevKey[shared] == key[shared] {
			shared++
		}
	}
	b.buf = binary.AppendUvarint(b.buf, uint64(shared))
	b.buf = binary.AppendUvarint(b.buf, uint64(len(key)-shared))
	b.buf = binary.AppendUvarint(b.buf, uint64(len(value)))
	b.buf = append(b.buf, key[shared:]...)
	b.buf = append(b.buf, value...)
	if b.restartInterval > 1 {
		b.prevKey = append(b.prevKey[:0], key...)
	}
	b.counter++
	if b.counter >= b.restartInterval {
		b.counter = 0
	}
	b.nEntries++
}

// estimatedSize is the size finish would return now.
func (b *blockWriter) estimatedSize() int { return len(b.buf) + 4*len(b.restarts) + 4 }

// sizeWith bounds the size of the block after adding an entry with the given
// key and value lengths (varints at most 5 bytes each, maybe a new restart).
func (b *blockWriter) sizeWith(keyLen, valueLen int) int {
	return b.estimatedSize() + 15 + keyLen + valueLen + 4
}

// finish appends the restart array and count and returns the whole block.
// It leaves BlockTrailerLen bytes of spare capacity so the caller can append
// the trailer without copying.
func (b *blockWriter) finish() []byte {
	need := 4*len(b.restarts) + 4 + BlockTrailerLen
	b.buf = growCap(b.buf, need)
	for _, r := range b.restarts {
		b.buf = binary.LittleEndian.AppendUint32(b.buf, r)
	}
	b.buf = binary.LittleEndian.AppendUint32(b.buf, uint32(len(b.restarts)))
	return b.buf
}

// growCap returns b with room for at least n more bytes.
func growCap(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), 2*cap(b)+n)
	copy(nb, b)
	return nb
}

// blockError is what a blockIter reports; the caller adds the file, block
// kind and offset.
type blockError string

func (e blockError) Error() string { return string(e) }

const (
	errBlockTooShort    = blockError("block shorter than its restart count")
	errBlockRestarts    = blockError("restart count exceeds block size")
	errBlockNoRestarts  = blockError("block has entries but no restart points")
	errBlockRestart0    = blockError("first restart point is not at offset 0")
	errBlockRestartOff  = blockError("restart offset out of range")
	errBlockVarint      = blockError("bad varint in block entry")
	errBlockShared      = blockError("entry shares more key bytes than the previous key has")
	errBlockEntryLen    = blockError("entry key or value runs past the end of the block")
	errBlockShortKey    = blockError("internal key shorter than its 8-byte trailer")
	errBlockPrevRestart = blockError("entries do not lead to the current entry from its restart point")
)

// cachedEntry is one entry of the restart interval a blockIter decoded for
// backward iteration.
type cachedEntry struct {
	offset, nextOffset int
	keyStart, keyEnd   int // in blockIter.cacheBuf
	valStart, valEnd   int // in blockIter.data
}

// blockIter iterates over the entries of one block. It never panics on bad
// bytes: every varint, length and restart offset is bounds-checked, and a
// failure makes the iterator invalid with err set (a blockError).
//
// Positioning methods return whether the iterator is at an entry; key and
// val then hold it. key points into keyBuf (forward decoding) or cacheBuf
// (backward); val points into the block. Moving backward is not quadratic:
// Prev decodes the whole restart interval before the current entry once into
// cached/cacheBuf and then steps through it, as LevelDB and Pebble do.
//
// A blockIter is used by one goroutine at a time; it does not own the block.
type blockIter struct {
	data        []byte // the entries: block[:restart array]
	restarts    []byte // the restart array, 4 bytes per restart point
	numRestarts int

	// internalKeys makes every key shorter than the 8-byte trailer an error
	// (data and range-del blocks), so callers can split keys without checks.
	internalKeys bool

	offset     int // current entry
	nextOffset int // entry after it (len(data) at the end)
	key, val   []byte
	keyBuf     []byte

	cached    []cachedEntry
	cacheBuf  []byte
	cacheIdx  int // index in cached when positioned by Prev/Last/SeekLT, else -1
	err       error
	errOffset int // entry offset where err was found
}

// init points the iterator at block b and checks the restart array's frame.
func (i *blockIter) init(b []byte, internalKeys bool) error {
	i.data, i.restarts, i.numRestarts = nil, nil, 0
	i.internalKeys = internalKeys
	i.key, i.val = nil, nil
	i.offset, i.nextOffset = 0, 0
	i.cacheIdx = -1
	i.err = nil
	if len(b) < 4 {
		return errBlockTooShort
	}
	n := binary.LittleEndian.Uint32(b[len(b)-4:])
	if uint64(n) > uint64(len(b)-4)/4 {
		return errBlockRestarts
	}
	ro := len(b) - 4 - 4*int(n)
	if n == 0 && ro != 0 {
		return errBlockNoRestarts
	}
	if n > 0 && binary.LittleEndian.Uint32(b[ro:]) != 0 {
		return errBlockRestart0
	}
	i.data, i.restarts, i.numRestarts = b[:ro:ro], b[ro:len(b)-4], int(n)
	i.offset, i.nextOffset = ro, ro
	return nil
}

func (i *blockIter) fail(err error, off int) bool {
	i.err = err
	i.errOffset = off
	i.key, i.val = nil, nil
	i.offset, i.nextOffset = len(i.data), len(i.data)
	i.cacheIdx = -1
	return false
}

// restartOffset returns the offset of restart point r (0 <= r < numRestarts).
func (i *blockIter) restartOffset(r int) (int, bool) {
	off := binary.LittleEndian.Uint32(i.restarts[4*r:])
	if uint64(off) >= uint64(len(i.data)) {
		i.fail(errBlockRestartOff, int(off))
		return 0, false
	}
	return int(off), true
}

// readHeader decodes the three varints of the entry at off and checks that
// its key delta and value fit in the block. It returns the delta's start p.
func (i *blockIter) readHeader(off int) (shared, unshared, vlen, p int, ok bool) {
	d := i.data
	p = off
	if p+3 <= len(d) && (d[p]|d[p+1]|d[p+2]) < 0x80 {
		shared, unshared, vlen = int(d[p]), int(d[p+1]), int(d[p+2])
		p += 3
	} else {
		var v [3]uint64
		for j := range v {
			x, n := binary.Uvarint(d[min(p, len(d)):])
			if n <= 0 || x > math.MaxUint32 {
				return 0, 0, 0, 0, i.fail(errBlockVarint, off)
			}
			v[j] = x
			p += n
		}
		shared, unshared, vlen = int(v[0]), int(v[1]), int(v[2])
	}
	if rem := len(d) - p; unshared > rem || vlen > rem-unshared {
		return 0, 0, 0, 0, i.fail(errBlockEntryLen, off)
	}
	return shared, unshared, vlen, p, true
}

// readEntry decodes the entry at off into key/val. The previous key must be
// in keyBuf (empty at a restart point).
func (i *blockIter) readEntry(off int) bool {
	shared, unshared, vlen, p, ok := i.readHeader(off)
	if !ok {
		return false
	}
	if shared > len(i.keyBuf) {
		return i.fail(errBlockShared, off)
	}
	i.keyBuf = append(i.keyBuf[:shared], i.data[p:p+unshared]...)
	if i.internalKeys && len(i.keyBuf) < 8 {
		return i.fail(errBlockShortKey, off)
	}
	p += unshared
	i.key = i.keyBuf
	i.val = i.data[p : p+vlen : p+vlen]
	i.offset = off
	i.nextOffset = p + vlen
	return true
}

// restartKey returns the key of restart point r, which lies in the block
// (shared must be 0 there).
func (i *blockIter) restartKey(r int) ([]byte, bool) {
	off, ok := i.restartOffset(r)
	if !ok {
		return nil, false
	}
	shared, unshared, _, p, ok := i.readHeader(off)
	if !ok {
		return nil, false
	}
	if shared != 0 {
		return nil, i.fail(errBlockShared, off)
	}
	if i.internalKeys && unshared < 8 {
		return nil, i.fail(errBlockShortKey, off)
	}
	return i.data[p : p+unshared], true
}

// compareIKey orders encoded internal key k against (ukey, trailer) like
// base.CompareEncoded; k is assumed to hold at least the trailer (blockIter
// guarantees it with internalKeys) but a shorter k does not panic.
func compareIKey(k, ukey []byte, trailer uint64) int {
	n := len(k) - 8
	if n < 0 {
		return bytes.Compare(k, ukey)
	}
	if c := bytes.Compare(k[:n], ukey); c != 0 {
		return c
	}
	t := binary.LittleEndian.Uint64(k[n:])
	switch {
	case t > trailer:
		return -1
	case t < trailer:
		return 1
	}
	return 0
}

// compareKey orders block keys: internal-key order for internal-key blocks,
// bytewise (trailer ignored) otherwise.
func (i *blockIter) compareKey(k, ukey []byte, trailer uint64) int {
	if i.internalKeys {
		return compareIKey(k, ukey, trailer)
	}
	return bytes.Compare(k, ukey)
}

// searchRestarts returns the number of restart points whose key is < the
// target.
func (i *blockIter) searchRestarts(ukey []byte, trailer uint64) (int, bool) {
	lo, hi := 0, i.numRestarts
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		k, ok := i.restartKey(m)
		if !ok {
			return 0, false
		}
		if i.compareKey(k, ukey, trailer) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, true
}

// first moves to the first entry.
func (i *blockIter) first() bool {
	i.cacheIdx = -1
	if len(i.data) == 0 {
		i.offset, i.nextOffset = 0, 0
		i.key, i.val = nil, nil
		return false
	}
	i.keyBuf = i.keyBuf[:0]
	return i.readEntry(0)
}

// next moves to the following entry.
func (i *blockIter) next() bool {
	if i.cacheIdx >= 0 {
		if i.cacheIdx+1 < len(i.cached) {
			i.cacheIdx++
			i.setCached()
			return true
		}
		// Leaving the cached interval: continue decoding forward from the
		// current key, which readEntry expects in keyBuf.
		i.keyBuf = append(i.keyBuf[:0], i.key...)
		i.cacheIdx = -1
	}
	if i.nextOffset >= len(i.data) {
		i.offset = len(i.data)
		i.key, i.val = nil, nil
		return false
	}
	return i.readEntry(i.nextOffset)
}

// seekGE moves to the first entry >= the target. The target trailer is
// ignored for blocks without internal keys.
func (i *blockIter) seekGE(ukey []byte, trailer uint64) bool {
	i.cacheIdx = -1
	r, ok := i.searchRestarts(ukey, trailer)
	if !ok {
		return false
	}
	// Restart point r is the first whose key is >= target, so the answer is
	// in the interval starting at restart r-1 or is restart r itself.
	off := 0
	if r > 0 {
		if off, ok = i.restartOffset(r - 1); !ok {
			return false
		}
	}
	i.keyBuf = i.keyBuf[:0]
	for off < len(i.data) {
		if !i.readEntry(off) {
			return false
		}
		if i.compareKey(i.key, ukey, trailer) >= 0 {
			return true
		}
		off = i.nextOffset
	}
	i.offset = len(i.data)
	i.key, i.val = nil, nil
	return false
}

// seekLT moves to the last entry < the target.
func (i *blockIter) seekLT(ukey []byte, trailer uint64) bool {
	r, ok := i.searchRestarts(ukey, trailer)
	if !ok {
		return false
	}
	if r == 0 {
		// Even the first key is >= target.
		i.cacheIdx = -1
		i.offset = 0
		i.key, i.val = nil, nil
		return false
	}
	// The last entry < target is in the interval of restart r-1 (restart r,
	// if any, is >= target).
	start, ok := i.restartOffset(r - 1)
	if !ok {
		return false
	}
	end := len(i.data)
	if r < i.numRestarts {
		if end, ok = i.restartOffset(r); !ok {
			return false
		}
	}
	return i.fillCache(start, end, ukey, trailer, true)
}

// last moves to the last entry.
func (i *blockIter) last() bool {
	if i.numRestarts == 0 {
		i.cacheIdx = -1
		i.offset = 0
		i.key, i.val = nil, nil
		return false
	}
	start, ok := i.restartOffset(i.numRestarts - 1)
	if !ok {
		return false
	}
	return i.fillCache(start, len(i.data), nil, 0, false)
}

// prev moves to the preceding entry.
func (i *blockIter) prev() bool {
	if i.cacheIdx > 0 {
		i.cacheIdx--
		i.setCached()
		return true
	}
	cur := i.offset
	if i.cacheIdx == 0 {
		cur = i.cached[0].offset
	}
	if cur == 0 || i.numRestarts == 0 {
		i.cacheIdx = -1
		i.offset = 0
		i.key, i.val = nil, nil
		return false
	}
	// Find the last restart point before cur and decode from it up to cur.
	lo, hi := 0, i.numRestarts
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		off, ok := i.restartOffset(m)
		if !ok {
			return false
		}
		if off < cur {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return i.fail(errBlockPrevRestart, cur)
	}
	start, ok := i.restartOffset(lo - 1)
	if !ok {
		return false
	}
	return i.fillCache(start, cur, nil, 0, false)
}

// fillCache decodes the entries in [start, end) into the reverse cache,
// stopping early (if bounded) at the first key >= target, and positions the
// iterator at the last cached entry. start must be a restart point. When
// not bounded, decoding must land exactly on end.
func (i *blockIter) fillCache(start, end int, ukey []byte, trailer uint64, bounded bool) bool {
	i.cached = i.cached[:0]
	i.cacheBuf = i.cacheBuf[:0]
	off := start
	prevStart, prevEnd := 0, 0
	for off < end {
		shared, unshared, vlen, p, ok := i.readHeader(off)
		if !ok {
			return false
		}
		if shared > prevEnd-prevStart {
			return i.fail(errBlockShared, off)
		}
		ks := len(i.cacheBuf)
		i.cacheBuf = append(i.cacheBuf, i.cacheBuf[prevStart:prevStart+shared]...)
		i.cacheBuf = append(i.cacheBuf, i.data[p:p+unshared]...)
		ke := len(i.cacheBuf)
		if i.internalKeys && ke-ks < 8 {
			return i.fail(errBlockShortKey, off)
		}
		if bounded && i.compareKey(i.cacheBuf[ks:ke], ukey, trailer) >= 0 {
			i.cacheBuf = i.cacheBuf[:ks]
			break
		}
		vs := p + unshared
		i.cached = append(i.cached, cachedEntry{
			offset: off, nextOffset: vs + vlen,
			keyStart: ks, keyEnd: ke, valStart: vs, valEnd: vs + vlen,
		})
		prevStart, prevEnd = ks, ke
		off = vs + vlen
	}
	if !bounded && off != end {
		return i.fail(errBlockPrevRestart, start)
	}
	if len(i.cached) == 0 {
		i.cacheIdx = -1
		i.offset = 0
		i.key, i.val = nil, nil
		return false
	}
	i.cacheIdx = len(i.cached) - 1
	i.setCached()
	return true
}

func (i *blockIter) setCached() {
	e := &i.cached[i.cacheIdx]
	i.key = i.cacheBuf[e.keyStart:e.keyEnd:e.keyEnd]
	i.val = i.data[e.valStart:e.valEnd:e.valEnd]
	i.offset = e.offset
	i.nextOffset = e.nextOffset
}
