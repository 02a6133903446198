package sst

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/vigildb/vigil/internal/base"
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

	// maxKeyAmp, if > 0, bounds keyBytes (the total length of the keys
	// added) to maxKeyAmp times the block's size: an entry that would
	// break the bound becomes a restart point instead, storing its key
	// whole. The range-del block needs this because the reader
	// materialises its keys (see maxRangeDelKeyAmp).
	maxKeyAmp int
	keyBytes  int
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
	b.keyBytes = 0
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
		if b.maxKeyAmp > 0 && b.keyBytes+len(key) > b.maxKeyAmp*b.sizeAfter(shared, len(key), len(value)) {
			// Restart here. The bound then holds again: it held before,
			// and the block grows by at least len(key) bytes.
			shared = 0
			b.restarts = append(b.restarts, uint32(len(b.buf)))
			b.counter = 0
		}
	}
	b.keyBytes += len(key)
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

// sizeAfter is the size of the block after adding an entry that shares
// shared bytes of the previous key, without a new restart point.
func (b *blockWriter) sizeAfter(shared, keyLen, valueLen int) int {
	return b.estimatedSize() + base.UvarintLen(uint64(shared)) + base.UvarintLen(uint64(keyLen-shared)) + base.UvarintLen(uint64(valueLen)) + keyLen - shared + valueLen
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
// backward iteration. Offsets are uint32 because blocks are at most
// MaxBlockSize bytes, so an entry costs 20 bytes of cache however long its
// key; every entry takes at least 3 bytes of the block, so the entries are
// at most 7 times the interval they cover (14 times counting what growing
// the slice by doubling allocates).
type cachedEntry struct {
	offset uint32 // the entry's first byte in the block
	// cacheBuf[bufStart:bufEnd] is the entry's whole key if
	// blockIter.cacheKeys, else its undo bytes (the previous key's
	// [shared:]).
	bufStart, bufEnd uint32
	valStart, valEnd uint32 // the value is data[valStart:valEnd]; the next entry starts at valEnd
}

// blockIter iterates over the entries of one block. It never panics on bad
// bytes: every varint, length and restart offset is bounds-checked, and a
// failure makes the iterator invalid with err set (a blockError).
//
// Positioning methods return whether the iterator is at an entry; key and
// val then hold it. val points into the block; key into keyBuf, which each
// forward step edits in place (keeping the shared prefix), or into cacheBuf.
// Memory is linear in the block, never in the total length of its keys,
// which prefix compression can make quadratic in the block's size (n
// entries that each add a byte to the previous key hold n²/2 key bytes):
//
//   - Forward, keyBuf is the only key buffer; it grows to the longest key,
//     at most the block's size.
//   - Backward, Prev decodes the restart interval before the current entry
//     once (not once per step, which would be quadratic in time) into
//     cached, as LevelDB and Pebble do. Like them it copies every key of
//     the interval into cacheBuf, so that a step back is O(1), but only
//     while that takes at most cacheKeysBudget (4 times the interval's size
//     plus 1 KiB: in a normal data block the keys are a fraction of the
//     interval, the values the rest). Beyond that it decodes the interval
//     again keeping, per entry, only the bytes of the previous key that the
//     entry's key replaced (its "undo" bytes): a step back truncates keyBuf
//     to the shared length and appends them. The undo bytes of an interval
//     total at most the key bytes its entries add, i.e. the interval's size.
//   - Lookback: a step back leaves the key it stepped from where it was.
//     Each fill of the reverse cache trades cacheBuf for cacheBufAlt (and
//     the undo mode, which edits the current key, keyBuf for keyBufAlt), so
//     the previous entry's key survives one refill, and val points into the
//     block. The DB's reverse iteration compares the key it stepped from,
//     and returns its value, without copying them (see
//     base.InternalIterator).
//
// A blockIter is used by one goroutine at a time; it does not own the block.
type blockIter struct {
	data        []byte // the entries: block[:restart array]
	restarts    []byte // the restart array, 4 bytes per restart point
	numRestarts int

	// internalKeys makes every key shorter than the 8-byte trailer an error
	// (data and range-del blocks), so callers can split keys without checks.
	internalKeys bool
	// compare is the user-key order of a data block's seeks under a
	// comparer that is not bytewise (see initData); nil compares
	// bytewise, inline.
	compare func(a, b []byte) int

	offset     int // current entry
	nextOffset int // entry after it (len(data) at the end)
	key, val   []byte
	keyBuf     []byte
	keyBufAlt  []byte // keyBuf's partner in the undo mode (see Lookback)

	cached      []cachedEntry
	cacheBuf    []byte // the cached entries' keys (cacheKeys) or undo bytes
	cacheBufAlt []byte // cacheBuf's partner (see Lookback)
	cacheKeys   bool
	cacheIdx    int // index in cached when positioned by Prev/Last/SeekLT, else -1
	err         error
	errOffset   int // entry offset where err was found
}

// initData is init for a data block whose keys order under cmp (a
// resolved comparer): its seeks compare user keys with it.
func (i *blockIter) initData(b []byte, cmp *base.Comparer) error {
	err := i.init(b, true)
	if !cmp.IsBytewise() {
		i.compare = cmp.Compare
	}
	return err
}

// init points the iterator at block b and checks the restart array's frame.
// Its seeks compare keys bytewise (see initData).
func (i *blockIter) init(b []byte, internalKeys bool) error {
	i.data, i.restarts, i.numRestarts = nil, nil, 0
	i.internalKeys = internalKeys
	i.compare = nil
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

// reusable returns a blockIter with only i's buffers, emptied: what a
// pooled table iterator keeps for its next block iterator.
func (i *blockIter) reusable() blockIter {
	return blockIter{keyBuf: i.keyBuf[:0], keyBufAlt: i.keyBufAlt[:0], cached: i.cached[:0],
		cacheBuf: i.cacheBuf[:0], cacheBufAlt: i.cacheBufAlt[:0]}
}

// dropBuffersOver lets go of i's buffers if one has grown past limit
// bytes, so that one huge block does not pin memory in a pool forever.
func (i *blockIter) dropBuffersOver(limit int) {
	// (cachedEntry is 20 bytes.)
	if cap(i.keyBuf) > limit || cap(i.keyBufAlt) > limit || cap(i.cached) > limit/20 ||
		cap(i.cacheBuf) > limit || cap(i.cacheBufAlt) > limit {
		i.keyBuf, i.keyBufAlt, i.cached, i.cacheBuf, i.cacheBufAlt = nil, nil, nil, nil, nil
	}
}

// reset drops the iterator's references into its block (keeping its own
// buffers), once the block may be freed: a pooled iterator must not point
// into released memory.
func (i *blockIter) reset() {
	i.data, i.restarts, i.numRestarts = nil, nil, 0
	i.key, i.val = nil, nil
	i.offset, i.nextOffset = 0, 0
	i.cacheIdx = -1
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

// compareEncoded is cmp.CompareEncoded with the bytewise order inline, as
// base.CompareEncoded always had it, for the per-entry order checks (the
// Writer's, Verify's, Salvage's, the range-del decoder's): for the default
// comparer they cost what they did before comparers.
func compareEncoded(cmp *base.Comparer, a, b []byte) int {
	if cmp.IsBytewise() {
		return base.CompareEncoded(a, b)
	}
	return cmp.CompareEncoded(a, b)
}

// compareIKeyFunc is compareIKey with user keys ordered by compare.
func compareIKeyFunc(compare func(a, b []byte) int, k, ukey []byte, trailer uint64) int {
	n := len(k) - 8
	if n < 0 {
		return compare(k, ukey)
	}
	if c := compare(k[:n], ukey); c != 0 {
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

// compareKey orders block keys: internal-key order for internal-key blocks
// (user keys by compare, if set, else bytewise), bytewise (trailer
// ignored) otherwise.
func (i *blockIter) compareKey(k, ukey []byte, trailer uint64) int {
	if i.compare != nil {
		return compareIKeyFunc(i.compare, k, ukey, trailer)
	}
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
			if !i.cacheKeys {
				// Redo the entry's step forward (its header was checked
				// when the cache was filled).
				shared, unshared, _, p, _ := i.readHeader(int(i.cached[i.cacheIdx].offset))
				i.keyBuf = append(i.keyBuf[:shared], i.data[p:p+unshared]...)
			}
			i.setCached()
			return true
		}
		// Leaving the cached interval: continue decoding forward from the
		// current key, which readEntry expects in keyBuf.
		if i.cacheKeys {
			i.keyBuf = append(i.keyBuf[:0], i.key...)
		}
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
	if i.cacheIdx > 0 && i.cacheKeys {
		// The usual step: the previous entry's key is in cacheBuf.
		i.cacheIdx--
		e := &i.cached[i.cacheIdx]
		i.key = i.cacheBuf[e.bufStart:e.bufEnd:e.bufEnd]
		i.val = i.data[e.valStart:e.valEnd:e.valEnd]
		i.offset, i.nextOffset = int(e.offset), int(e.valEnd)
		return true
	}
	return i.prevSlow()
}

// prevSlow is prev in the cache's undo mode and at the start of the cached
// interval.
func (i *blockIter) prevSlow() bool {
	if i.cacheIdx > 0 {
		// Undo the current entry's step: keep its shared bytes (its
		// header was checked when the cache was filled), restore the rest.
		// The previous key is built in keyBufAlt, leaving the one
		// stepped from as it was (see Lookback).
		e := &i.cached[i.cacheIdx]
		shared, _, _, _, _ := i.readHeader(int(e.offset))
		i.keyBufAlt = append(append(i.keyBufAlt[:0], i.keyBuf[:shared]...), i.cacheBuf[e.bufStart:e.bufEnd]...)
		i.keyBuf, i.keyBufAlt = i.keyBufAlt, i.keyBuf
		i.cacheIdx--
		i.setCached()
		return true
	}
	cur := i.offset
	if i.cacheIdx == 0 {
		cur = int(i.cached[0].offset)
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

// cacheKeysBudget is how much of cacheBuf the reverse cache may use to hold
// the whole keys of an interval of the given size (see blockIter).
func cacheKeysBudget(interval int) int { return 4*interval + 1024 }

// fillCache decodes the entries in [start, end) into the reverse cache,
// stopping early (if bounded) at the first key >= target, and positions the
// iterator at the last cached entry. start must be a restart point. When
// not bounded, decoding must land exactly on end.
func (i *blockIter) fillCache(start, end int, ukey []byte, trailer uint64, bounded bool) bool {
	i.cacheBuf, i.cacheBufAlt = i.cacheBufAlt[:0], i.cacheBuf // see Lookback
	if ok, fits := i.fillCacheKeys(start, end, ukey, trailer, bounded); fits {
		return ok
	}
	return i.fillCacheUndo(start, end, ukey, trailer, bounded)
}

// fillCacheKeys is fillCache keeping every key whole in cacheBuf. It gives
// up (fits = false) if that would take more than cacheKeysBudget.
func (i *blockIter) fillCacheKeys(start, end int, ukey []byte, trailer uint64, bounded bool) (ok, fits bool) {
	i.cached = i.cached[:0]
	i.cacheBuf = i.cacheBuf[:0]
	i.cacheKeys = true
	budget := cacheKeysBudget(end - start)
	off := start
	prevStart, prevEnd := 0, 0
	for off < end {
		shared, unshared, vlen, p, ok := i.readHeader(off)
		if !ok {
			return false, true
		}
		if shared > prevEnd-prevStart {
			return i.fail(errBlockShared, off), true
		}
		ks := len(i.cacheBuf)
		if ks+shared+unshared > cap(i.cacheBuf) {
			// Only growing cacheBuf costs memory, so only then is the
			// budget checked; and it doubles, where append would grow a
			// large buffer by 1.25x, allocating 5 times its final size.
			if ks+shared+unshared > budget {
				return false, false
			}
			i.cacheBuf = growCap(i.cacheBuf, shared+unshared)
		}
		i.cacheBuf = append(i.cacheBuf, i.cacheBuf[prevStart:prevStart+shared]...)
		i.cacheBuf = append(i.cacheBuf, i.data[p:p+unshared]...)
		ke := len(i.cacheBuf)
		if i.internalKeys && ke-ks < 8 {
			return i.fail(errBlockShortKey, off), true
		}
		if bounded && i.compareKey(i.cacheBuf[ks:ke], ukey, trailer) >= 0 {
			i.cacheBuf = i.cacheBuf[:ks]
			break
		}
		vs := p + unshared
		i.addCached(off, ks, ke, vs, vs+vlen)
		prevStart, prevEnd = ks, ke
		off = vs + vlen
	}
	return i.finishCache(start, end, off, bounded), true
}

// fillCacheUndo is fillCache keeping the current key in keyBuf and each
// entry's undo bytes in cacheBuf.
func (i *blockIter) fillCacheUndo(start, end int, ukey []byte, trailer uint64, bounded bool) bool {
	i.cached = i.cached[:0]
	i.cacheBuf = i.cacheBuf[:0]
	i.cacheKeys = false
	i.keyBuf, i.keyBufAlt = i.keyBufAlt[:0], i.keyBuf // see Lookback
	off := start
	for off < end {
		shared, unshared, vlen, p, ok := i.readHeader(off)
		if !ok {
			return false
		}
		if shared > len(i.keyBuf) {
			return i.fail(errBlockShared, off)
		}
		undoStart := len(i.cacheBuf)
		i.cacheBuf = growCap(i.cacheBuf, len(i.keyBuf)-shared)
		i.cacheBuf = append(i.cacheBuf, i.keyBuf[shared:]...)
		i.keyBuf = append(i.keyBuf[:shared], i.data[p:p+unshared]...)
		if i.internalKeys && len(i.keyBuf) < 8 {
			return i.fail(errBlockShortKey, off)
		}
		if bounded && i.compareKey(i.keyBuf, ukey, trailer) >= 0 {
			// Back to the previous entry's key.
			i.keyBuf = append(i.keyBuf[:shared], i.cacheBuf[undoStart:]...)
			i.cacheBuf = i.cacheBuf[:undoStart]
			break
		}
		vs := p + unshared
		i.addCached(off, undoStart, len(i.cacheBuf), vs, vs+vlen)
		off = vs + vlen
	}
	return i.finishCache(start, end, off, bounded)
}

// addCached appends an entry to cached, doubling its capacity when full
// (append grows large slices by 1.25x, which allocates five times the final
// size along the way). It stores the fields one by one: a struct built
// with 4-byte stores and copied with 16-byte loads stalls store forwarding
// on every entry of a reverse scan.
func (i *blockIter) addCached(offset, bufStart, bufEnd, valStart, valEnd int) {
	n := len(i.cached)
	if n == cap(i.cached) {
		i.growCached()
	}
	i.cached = i.cached[:n+1]
	e := &i.cached[n]
	e.offset, e.bufStart, e.bufEnd = uint32(offset), uint32(bufStart), uint32(bufEnd)
	e.valStart, e.valEnd = uint32(valStart), uint32(valEnd)
}

func (i *blockIter) growCached() {
	i.cached = append(make([]cachedEntry, 0, 2*cap(i.cached)+16), i.cached...)
}

// finishCache ends fillCache, whose decoding stopped at off: it positions
// the iterator at the last cached entry.
func (i *blockIter) finishCache(start, end, off int, bounded bool) bool {
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

// setCached publishes cached entry cacheIdx; in undo mode its key must be
// in keyBuf.
func (i *blockIter) setCached() {
	e := &i.cached[i.cacheIdx]
	if i.cacheKeys {
		i.key = i.cacheBuf[e.bufStart:e.bufEnd:e.bufEnd]
	} else {
		i.key = i.keyBuf
	}
	i.val = i.data[e.valStart:e.valEnd:e.valEnd]
	i.offset, i.nextOffset = int(e.offset), int(e.valEnd)
}
