package sst

// Readahead for scans.
//
// A scan that misses the block cache reads one data block per system call:
// a 4 KiB block is a pread of a few KiB, and on a DB larger than the cache
// (its files in the page cache) the calls were a third of a backward scan's
// CPU time, as the kernel's own readahead helps only forward reads and
// spares no call either way. So an iterator that loads adjacent blocks one
// after the other (readaheadAfter of them, in one direction) reads the
// blocks ahead of it in that direction with the next miss, in one call of
// minReadahead bytes doubling up to maxReadahead, into a buffer of its own;
// the blocks it then loads are taken from there (each verified and
// decompressed, or cached, as a block read alone is). Only whole blocks are
// read, never past the data blocks. RocksDB's iterators read ahead the same
// way forward (auto_readahead_size, 8 KiB doubling to 256 KiB); this does
// it backward too.
//
// The buffer lives outside the Go heap (scanAlloc) and is freed when its
// iterator closes. On the heap, a compaction's input iterators each left a
// buffer of up to maxReadahead to the collector when they moved on to the
// next file, and pooled iterators kept theirs: 5 MB live during a 10M-key
// fill's compactions, and twice that in RSS at the collector's pacing, at
// the very time a read phase starts filling the block cache.

import "github.com/vigildb/vigil/internal/manual"

// readaheadAfter is the run of adjacent block loads after which an
// iterator reads ahead; minReadahead and maxReadahead bound the size of a
// read ahead, which doubles from the first to the second.
const (
	readaheadAfter = 2
	minReadahead   = 16 << 10
	maxReadahead   = 256 << 10
)

// readahead is an Iter's readahead state: the run of adjacent block
// loads it is in, and the file bytes it read ahead.
//
// Invariant: buf holds the file's bytes [off, off+len(buf)), whole data
// blocks with their trailers, read in one call (or is empty).
type readahead struct {
	mem  manual.Buf // the memory behind buf (the zero Buf: none)
	last int        // the block loaded last; -1 if none
	run  int        // adjacent loads ending at last: > 0 forward, < 0 backward
	size int        // the bytes the next read ahead asks for (0: minReadahead)
	off  uint64     // file offset of buf[0]
	buf  []byte
	// lower, upper are the iterator's bounds (nil: none): no block wholly
	// outside them is read ahead.
	lower, upper []byte
}

// scanAlloc allocates the readahead buffers of every iterator in the
// process. Its free slots keep their pages for the next iterator: a
// dropping allocator (see manual.NewDroppingAllocator) made every short
// scan fault its buffer in again, 4x slower on a virtual machine
// (BenchmarkShortScan). So what stays resident is what the most iterators
// reading ahead at once touched, a few MiB, not twice that as on the heap.
var scanAlloc = manual.NewAllocator()

// release frees the buffer; ra reads ahead into a new one if used again.
func (ra *readahead) release() {
	ra.mem.Free()
	ra.mem, ra.buf = manual.Buf{}, nil
}

// reset starts over for an iterator with bounds [lower, upper): no run,
// nothing read ahead (a buffer is kept for the next read ahead).
func (ra *readahead) reset(lower, upper []byte) {
	ra.last, ra.run, ra.size, ra.off, ra.buf = -1, 0, 0, 0, ra.buf[:0]
	ra.lower, ra.upper = lower, upper
}

// note records a load of block idx and returns the direction in which to
// read ahead for it (dir).
func (ra *readahead) note(idx int) int {
	switch {
	case ra.last >= 0 && idx == ra.last+1:
		ra.run = max(ra.run, 0) + 1
	case ra.last >= 0 && idx == ra.last-1:
		ra.run = min(ra.run, 0) - 1
	case idx != ra.last:
		ra.run, ra.size = 0, 0
	}
	ra.last = idx
	return ra.dir()
}

// dir is the direction in which to read ahead from the block noted last:
// +1, -1, or 0 (not in a run long enough).
func (ra *readahead) dir() int {
	switch {
	case ra.run >= readaheadAfter:
		return 1
	case ra.run <= -readaheadAfter:
		return -1
	}
	return 0
}

// covers reports whether the bytes of block h are in buf.
func (ra *readahead) covers(h handle) bool {
	return h.offset >= ra.off && h.end() <= ra.off+uint64(len(ra.buf))
}

// fillReadahead reads ahead from data block ra.last of index x (handle h,
// its bounds checked against the file) in direction ra.dir(): the whole
// blocks from h on that fit in ra.size bytes, h itself at least, and none
// wholly outside the iterator's bounds (ra.lower, ra.upper), which it would
// never load. The index's handles tile the data blocks (decodeIndex checked
// it), so nothing past them is read.
func (r *fileReader) fillReadahead(ra *readahead, x *indexBlock, h handle) error {
	idx, lower, upper := ra.last, ra.lower, ra.upper
	size := uint64(ra.size)
	if size == 0 {
		size = minReadahead
	}
	lo, hi := h.offset, h.end()
	if ra.dir() > 0 {
		// Block j's keys are above separator j-1.
		for j := idx + 1; j < x.len() && (upper == nil || r.cmp.Cmp(x.sepUser(j-1), upper) < 0); j++ {
			e := x.handle(j).end()
			if e-lo > size {
				break
			}
			hi = e
		}
	} else {
		// Block j's keys are at or below separator j.
		for j := idx - 1; j >= 0 && (lower == nil || r.cmp.Cmp(x.sepUser(j), lower) >= 0); j-- {
			o := x.handle(j).offset
			if hi-o > size {
				break
			}
			lo = o
		}
	}
	n := int(hi - lo)
	if cap(ra.buf) < n {
		// All of maxReadahead at once: its pages are touched only as
		// reads fill them, and the doubling reads need no new buffer.
		ra.release()
		ra.mem = scanAlloc.Alloc(max(n, maxReadahead))
		ra.buf = ra.mem.Bytes()
	}
	ra.buf = ra.buf[:n]
	if err := r.readAt(ra.buf, lo, BlockKindData); err != nil {
		ra.buf = ra.buf[:0]
		return err
	}
	ra.off = lo
	ra.size = int(min(2*size, maxReadahead))
	return nil
}
