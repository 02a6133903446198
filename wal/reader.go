package wal

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"strings"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// ReaderStats counts what a Reader delivered and what it dropped.
type ReaderStats struct {
	// Records and Bytes count the logical records returned by Next and
	// their payload bytes.
	Records, Bytes int64
	// DroppedRecords counts logical records known to be lost: a damaged or
	// torn record, a partial record cut short. Records inside a region
	// skipped wholesale (after PointInTime stops, or past an unreadable
	// stretch) cannot be counted and are not. When Next ends with an error
	// nothing is dropped on purpose and the counters stop where the error
	// was found.
	DroppedRecords int64
	// DroppedBytes counts the bytes of the file (fragment headers included)
	// that belong to no returned record, other than block padding: damaged
	// fragments, skipped stretches, the torn tail, and everything after the
	// point where PointInTime stopped quietly.
	DroppedBytes int64
	// TailDroppedBytes is the part of DroppedBytes that was a torn tail.
	TailDroppedBytes int64
	// UnwrittenBytes counts the zeros that ran from a record boundary to
	// end of file: space reserved past the log (Writer.SetReserve) or a
	// file extended before the data of its last appends reached the disk.
	// They are the end of the log, not part of DroppedBytes.
	UnwrittenBytes int64
	// StaleBytes counts the bytes from the end of a recycled log to end
	// of file: an older log's, which the new one did not overwrite (see
	// Recycling in the package documentation). Not part of DroppedBytes.
	StaleBytes int64
	// Corruptions counts corruptions found (a torn tail is not one).
	Corruptions int
}

// resyncBudget bounds the bytes the reader may hash, per block, while it
// looks for valid fragments after damage (SkipAnyCorruptedRecords resync,
// the check that a length running past end of file is not followed by a
// valid fragment, the search for the length such a fragment was written
// with, and PointInTime's check that nothing verifiable follows a
// corruption it would end the log at); past it the reader gives up on the
// block and goes to the next one. It keeps a crafted block (every position
// a plausible header) from costing O(BlockSize²), and bounds PointInTime's
// search to resyncBudget bytes hashed per block of the rest of the file.
const resyncBudget = 4 << 20

// Reader reads the logical records of a record log, checking every fragment
// against the checksum type named in the file header.
//
// Concurrency: a Reader is used by one goroutine at a time.
//
// Memory: the reader keeps one block buffer, grown with the bytes actually
// read up to BlockSize, and one buffer for records that span fragments,
// grown only by fragments actually read. No length field is used to size an
// allocation, so a damaged or hostile file cannot make the reader allocate
// more than a small multiple of its own size. Damage allocates nothing until
// the reader reports it: in PointInTime the search for a verifiable fragment
// after the damage (see Next) reads the rest of the file through the same
// block buffer, hashing at most resyncBudget bytes per block.
type Reader struct {
	f      io.Reader
	name   string
	mode   RecoveryMode
	logNum uint64
	ctype  checksum.Type
	// hasHeader: the file header was read (false for an empty log)
	hasHeader bool
	// recycled: the log was written over an older one's blocks (its
	// header says so): bytes after its end may be that log's.
	recycled bool
	// atGood: the stats when the last record was returned (recycled logs
	// only; see staleEnd).
	atGood ReaderStats

	buf      []byte // the current block as read: BlockSize bytes, or fewer for the last block
	blockOff int64  // file offset of buf[0]
	pos      int    // next unread byte of buf
	eof      bool   // the underlying reader reported EOF: buf is the last block
	zeroFrom int64  // >= 0: bytes from this offset on have all been zero so far
	budget   int    // bytes findFragment may still hash in this block

	rec       []byte // assembled fragments of the current logical record
	inRec     bool   // a FIRST fragment was read and its LAST not yet
	recOff    int64  // file offset of the current record's FIRST fragment
	recBytes  int64  // file bytes of the fragments in rec
	dropping  bool   // SkipAnyCorruptedRecords: silently drop MIDDLE/LAST fragments of a damaged record
	endOffset int64  // file offset just past the last record returned

	done    bool  // Next returns doneErr from now on
	doneErr error // io.EOF or the error that ended reading
	stopped error // PointInTime: the corruption that ended reading quietly
	last    corruption
	hasLast bool
	stats   ReaderStats
}

// NewReader reads and checks the file header of the record log f and
// returns a Reader of its records. name is used in errors. A bad header is
// an error wrapping base.ErrCorruption in every mode, except that an empty
// file, or one cut short inside its header (a crash right after creating
// it), or a zeroed header followed only by zeros, is an empty log without
// error in every mode but AbsoluteConsistency. An invalid mode is an error
// wrapping base.ErrInvalidArgument.
func NewReader(f io.Reader, name string, mode RecoveryMode) (*Reader, error) {
	if err := checkMode(mode); err != nil {
		return nil, err
	}
	r := &Reader{f: f, name: name, mode: mode, zeroFrom: -1, endOffset: FileHeaderSize}
	if err := r.readBlock(); err != nil {
		return nil, err
	}
	n := len(r.buf)
	switch {
	case n < FileHeaderSize:
		if !isTornHeader(r.buf) {
			return nil, base.CorruptionErrorf("wal: %s: offset 0: bad magic %q, want %q: not a Vigil record log (file has %d bytes)", name, r.buf, fileMagic, n)
		}
		return r.emptyLog(fmt.Sprintf("torn file header: the file has %d of %d header bytes", n, FileHeaderSize))
	case allZero(r.buf[:FileHeaderSize]):
		// Unwritten bytes (a file extended before its data reached disk)
		// are a torn header only if nothing but zeros follows.
		for {
			if i := firstNonZero(r.buf); i >= 0 {
				return nil, base.CorruptionErrorf("wal: %s: offset 0: zeroed file header, but data follows at offset %d", name, r.blockOff+int64(i))
			}
			if r.eof {
				break
			}
			if err := r.readBlock(); err != nil {
				return nil, err
			}
		}
		return r.emptyLog(fmt.Sprintf("zeroed file header: the file's %d bytes are all zero", r.blockOff+int64(len(r.buf))))
	}
	logNum, t, recycled, err := decodeFileHeader(name, r.buf[:FileHeaderSize])
	if err != nil {
		return nil, err
	}
	r.logNum, r.ctype, r.hasHeader, r.recycled = logNum, t, true, recycled
	r.pos = FileHeaderSize
	return r, nil
}

// emptyLog finishes NewReader for a torn or zeroed header.
func (r *Reader) emptyLog(why string) (*Reader, error) {
	size := r.blockOff + int64(len(r.buf))
	if r.mode == AbsoluteConsistency {
		return nil, base.CorruptionErrorf("wal: %s: %s (recovery mode %s)", r.name, why, r.mode)
	}
	r.stats.DroppedBytes = size
	r.stats.TailDroppedBytes = size
	r.endOffset = 0
	r.finish(io.EOF)
	return r, nil
}

// LogNumber returns the log number from the file header (0 for an empty log).
func (r *Reader) LogNumber() uint64 { return r.logNum }

// ChecksumType returns the checksum type from the file header.
func (r *Reader) ChecksumType() checksum.Type { return r.ctype }

// Mode returns the recovery mode the reader applies.
func (r *Reader) Mode() RecoveryMode { return r.mode }

// Stats returns the reader's counters so far.
func (r *Reader) Stats() ReaderStats { return r.stats }

// Offset returns the file offset just past the last record returned by
// Next: the end of the intact prefix.
func (r *Reader) Offset() int64 { return r.endOffset }

// Stopped returns the corruption at which PointInTime mode ended the log
// quietly (Next returned io.EOF): damage with nothing verifiable after it,
// which the reader cannot tell from a crash-cut tail, so the DB can open in
// the state before it but should log what was dropped. It is nil if the log
// ended cleanly or with a torn tail, in every other mode, and when Next
// returned the corruption as an error instead (damage followed by intact
// data).
func (r *Reader) Stopped() error { return r.stopped }

// LastCorruption returns the most recent corruption found, in any mode: in
// SkipAnyCorruptedRecords the last one skipped. Stats().Corruptions says how
// many there were.
func (r *Reader) LastCorruption() error {
	if !r.hasLast {
		return nil
	}
	return r.last.error(r.name)
}

// CheckLogNumber returns an error wrapping base.ErrCorruption if the log
// number in the file header is not want (for example the number in the
// file's name). An empty log (torn or zeroed header) has no number and
// passes.
func (r *Reader) CheckLogNumber(want uint64) error {
	if r.hasHeader && r.logNum != want {
		return base.CorruptionErrorf("wal: %s: offset 12: log number mismatch: the file header says %d, expected %d", r.name, r.logNum, want)
	}
	return nil
}

// Next returns the next logical record. The slice is valid until the next
// call to Next. At the end of the log it returns io.EOF. How damage is
// treated depends on the recovery mode (see the package documentation). In
// PointInTime a corruption followed anywhere later in the file by a
// fragment that verifies is an error wrapping base.ErrCorruption (a crash
// cannot damage a record and leave later ones intact, so dropping the rest
// would silently lose acknowledged writes); a corruption with nothing
// verifiable after it ends the log with io.EOF and Stopped reports it.
// Once Next has returned an error it returns the same error forever.
func (r *Reader) Next() ([]byte, error) {
	for !r.done {
		if r.pos+FragmentHeaderSize > len(r.buf) {
			r.endOfBlock()
			continue
		}
		off := r.blockOff + int64(r.pos)
		h := r.buf[r.pos:]
		stored := binary.LittleEndian.Uint32(h[0:4])
		length := int(binary.LittleEndian.Uint16(h[4:6]))
		typ := h[6]
		if stored == 0 && length == 0 && typ == fragZero {
			r.zeroHeader(off)
			continue
		}
		end := r.pos + FragmentHeaderSize + length
		if end > len(r.buf) {
			if len(r.buf) == BlockSize {
				r.corrupt(corruption{kind: ckLength, off: off, typ: typ, length: length, aux: int64(len(r.buf) - r.pos - FragmentHeaderSize)}, r.pos+1)
				continue
			}
			// The last block: a fragment cut short by end of file is a torn
			// write, unless a valid fragment follows it, which a torn write
			// cannot leave behind, or the fragment is whole under the
			// length it was written with, which a torn write cannot be.
			if q := r.findFragment(r.pos+1, -1); q >= 0 {
				r.corrupt(corruption{kind: ckLengthEOF, off: off, typ: typ, length: length, aux: r.blockOff + int64(q)}, q)
				continue
			}
			if l := r.wholeLength(off); l >= 0 {
				if r.corrupt(corruption{kind: ckLengthWhole, off: off, typ: typ, length: length, aux: int64(l)}, -1) {
					// Skip: go on where the fragment really ends.
					r.stats.DroppedBytes += int64(FragmentHeaderSize + l)
					r.pos += FragmentHeaderSize + l
				}
				continue
			}
			r.tornTail(corruption{kind: ckTornBody, off: off, typ: typ, length: length, aux: int64(len(r.buf) - r.pos - FragmentHeaderSize)})
			continue
		}
		if r.ctype != checksum.None {
			if computed := fragmentChecksum(r.ctype, r.logNum, off, h[checksumSize:FragmentHeaderSize+length]); computed != stored {
				raw := rawChecksum(r.ctype, h[checksumSize:FragmentHeaderSize+length])
				if r.recycled && r.olderLog(stored, raw, off, typ) {
					r.staleEnd(off)
					continue
				}
				r.corrupt(corruption{kind: ckChecksum, off: off, typ: typ, length: length, stored: stored, computed: computed,
					logNum: r.logNum, raw: raw}, r.pos+1)
				continue
			}
		}
		if typ < fragFull || typ > fragLast {
			r.corrupt(corruption{kind: ckType, off: off, typ: typ, length: length}, r.pos+1)
			continue
		}
		payload := h[FragmentHeaderSize : FragmentHeaderSize+length]
		fragBytes := int64(FragmentHeaderSize + length)
		r.pos = end
		switch typ {
		case fragFull, fragFirst:
			r.dropping = false
			if r.inRec {
				// A new record starts while the previous one still waits
				// for its LAST fragment.
				if !r.corruptOrder(corruption{kind: ckPartial, off: r.recOff, typ: typ, aux: off}) {
					continue
				}
			}
			if typ == fragFull {
				return r.deliver(payload, off+fragBytes), nil
			}
			r.inRec, r.recOff, r.recBytes = true, off, fragBytes
			r.rec = append(r.rec[:0], payload...)
		case fragMiddle, fragLast:
			if !r.inRec {
				if r.dropping {
					r.stats.DroppedBytes += fragBytes
				} else if r.corruptOrder(corruption{kind: ckOrphan, off: off, typ: typ, length: length}) {
					r.stats.DroppedBytes += fragBytes
				}
				continue
			}
			r.rec = append(r.rec, payload...)
			r.recBytes += fragBytes
			if typ == fragLast {
				r.inRec = false
				return r.deliver(r.rec, off+fragBytes), nil
			}
		}
	}
	return nil, r.doneErr
}

func (r *Reader) deliver(rec []byte, end int64) []byte {
	r.stats.Records++
	r.stats.Bytes += int64(len(rec))
	r.endOffset = end
	if r.recycled {
		r.atGood = r.stats
	}
	return rec
}

// endOfBlock handles the bytes after the last fragment of a block, which are
// too few for a header: zero padding in a full block, or a torn tail in the
// last one.
func (r *Reader) endOfBlock() {
	rest := r.buf[r.pos:]
	if len(r.buf) == BlockSize {
		if i := firstNonZero(rest); i >= 0 {
			// Damaged padding loses no record: Skip goes on as if it were zero.
			off := r.blockOff + int64(r.pos)
			r.pos = len(r.buf)
			if !r.note(corruption{kind: ckPadding, off: off, aux: int64(len(rest))}) {
				return
			}
		}
		r.nextBlock()
		return
	}
	switch {
	case len(rest) > 0 && !r.inRec && firstNonZero(rest) < 0:
		r.unwritten(r.blockOff + int64(r.pos))
	case len(rest) > 0:
		r.tornTail(corruption{kind: ckTornHeader, off: r.blockOff + int64(r.pos), length: len(rest)})
	case r.inRec:
		r.tornTail(corruption{kind: ckIncomplete, off: r.recOff})
	default:
		r.finish(io.EOF)
	}
}

// zeroHeader handles a fragment header of seven zero bytes: unwritten space.
// Zeros to end of file are the end of the log (unwritten), or a torn tail if
// a record started before them waits for its end; zeros followed by data
// are damage.
func (r *Reader) zeroHeader(off int64) {
	rest := r.buf[r.pos:]
	if i := firstNonZero(rest); i >= 0 {
		r.corrupt(corruption{kind: ckZeroed, off: off, aux: off + int64(i)}, r.pos+1)
		return
	}
	if len(r.buf) < BlockSize {
		r.zeroTail(off)
		return
	}
	// Zeros to the end of a full block: keep reading; nextBlock decides.
	r.zeroFrom = off
	r.pos = len(r.buf)
	r.nextBlock()
}

// nextBlock reads the next block, and settles a run of zeros that reached
// the end of the previous one.
func (r *Reader) nextBlock() {
	if r.eof {
		// A full last block: nothing follows it.
		r.blockOff += int64(len(r.buf))
		r.buf = r.buf[:0]
		r.pos = 0
	} else if err := r.readBlock(); err != nil {
		r.finish(err)
		return
	}
	if r.zeroFrom < 0 {
		return
	}
	i := firstNonZero(r.buf)
	switch {
	case i >= 0:
		from := r.zeroFrom
		r.zeroFrom = -1
		if r.corrupt(corruption{kind: ckZeroed, off: from, aux: r.blockOff + int64(i)}, 0) {
			r.stats.DroppedBytes += r.blockOff - from // the zeros in earlier blocks
		}
	case len(r.buf) < BlockSize:
		from := r.zeroFrom
		r.zeroFrom = -1
		r.zeroTail(from)
	default:
		r.pos = len(r.buf) // still zeros; endOfBlock will call us again
	}
}

// readBlock replaces buf with the next block of the file (BlockSize bytes,
// or what is left at end of file). buf grows with the bytes actually read.
func (r *Reader) readBlock() error {
	r.blockOff += int64(len(r.buf))
	r.buf = r.buf[:0]
	r.pos = 0
	r.budget = resyncBudget
	for noProgress := 0; len(r.buf) < BlockSize; {
		if len(r.buf) == cap(r.buf) {
			nb := make([]byte, len(r.buf), min(BlockSize, max(2*cap(r.buf), 1024)))
			copy(nb, r.buf)
			r.buf = nb
		}
		n, err := r.f.Read(r.buf[len(r.buf):cap(r.buf)])
		r.buf = r.buf[:len(r.buf)+n]
		if err == io.EOF {
			r.eof = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("wal: %s: read at offset %d: %w", r.name, r.blockOff+int64(len(r.buf)), err)
		}
		if n == 0 {
			if noProgress++; noProgress > 100 {
				return fmt.Errorf("wal: %s: read at offset %d: %w", r.name, r.blockOff+int64(len(r.buf)), io.ErrNoProgress)
			}
		}
	}
	return nil
}

// retractSinceGood, in a recycled log read in SkipAnyCorruptedRecords,
// takes back the damage noted since the last record returned when the
// log ends with nothing of it verifying after that damage: those bytes
// were an older log's (see staleEnd), as the other modes find.
func (r *Reader) retractSinceGood() bool {
	if !r.recycled || r.mode != SkipAnyCorruptedRecords || r.stats.Corruptions <= r.atGood.Corruptions {
		return false
	}
	r.stats.StaleBytes += r.stats.DroppedBytes - r.atGood.DroppedBytes
	r.stats.Corruptions, r.stats.DroppedRecords = r.atGood.Corruptions, r.atGood.DroppedRecords
	r.stats.DroppedBytes, r.stats.TailDroppedBytes = r.atGood.DroppedBytes, r.atGood.TailDroppedBytes
	r.inRec, r.dropping, r.hasLast = false, false, r.atGood.Corruptions > 0
	return true
}

func (r *Reader) finish(err error) {
	if err == io.EOF {
		r.retractSinceGood()
	}
	r.done = true
	r.doneErr = err
	r.rec = r.rec[:0]
}

// dropPartial discards a record whose LAST fragment will never come.
func (r *Reader) dropPartial() {
	if r.inRec {
		r.inRec = false
		r.stats.DroppedRecords++
		r.stats.DroppedBytes += r.recBytes
		r.rec = r.rec[:0]
	}
}

// corrupt handles damage at buf[pos:]: a fragment that cannot be trusted.
// It reports whether reading goes on (SkipAnyCorruptedRecords only), in
// which case it has moved pos to resumeFrom or to the next valid fragment
// found from there (resumeFrom < 0: stay where pos is).
func (r *Reader) corrupt(c corruption, resumeFrom int) bool {
	if !r.note(c) {
		return false
	}
	if r.inRec {
		r.dropPartial()
	} else if !r.dropping {
		r.stats.DroppedRecords++
	}
	r.dropping = true
	if resumeFrom >= 0 {
		q := len(r.buf)
		if resumeFrom < len(r.buf) {
			hint := -1
			if c.kind == ckChecksum {
				hint = r.pos + FragmentHeaderSize + c.length
			}
			if f := r.findFragment(resumeFrom, hint); f >= 0 {
				q = f
			}
		}
		if q > r.pos {
			r.stats.DroppedBytes += int64(q - r.pos)
		}
		r.pos = q
	}
	return true
}

// corruptOrder handles fragments that are each intact but out of order. In
// SkipAnyCorruptedRecords it drops the partial record and reports true: the
// current fragment is then processed (or dropped) by the caller.
func (r *Reader) corruptOrder(c corruption) bool {
	if !r.note(c) {
		return false
	}
	if c.kind == ckPartial {
		r.dropPartial()
	} else {
		r.stats.DroppedRecords++
	}
	return true
}

// note records a corruption and applies the mode. It reports whether
// reading goes on.
func (r *Reader) note(c corruption) bool {
	if r.recycled && r.mode != SkipAnyCorruptedRecords && c.kind != ckLengthWhole && (c.kind <= ckType || c.kind == ckPadding || c.kind == ckZeroed) {
		return r.noteRecycled(c)
	}
	r.stats.Corruptions++
	r.last, r.hasLast = c, true
	switch r.mode {
	case SkipAnyCorruptedRecords:
		return true
	case PointInTime:
		switch follow, err := r.verifiedAfter(c); {
		case err != nil:
			r.finish(err)
			return false
		case follow >= 0:
			// Intact data after the damage: not a torn tail. Say where,
			// unless the message already names that fragment.
			if c.kind != ckLengthEOF && c.kind != ckPartial && c.kind != ckOrphan {
				c.follow = follow
			}
			r.last = c
			r.finish(c.error(r.name))
			return false
		}
		r.stopped = c.error(r.name)
		start := c.off
		if r.inRec && r.recOff < start {
			start = r.recOff
		}
		if r.inRec || c.kind <= ckType || c.kind == ckOrphan {
			r.stats.DroppedRecords++
		}
		r.inRec = false
		r.dropRest(start)
		return false
	default:
		r.finish(c.error(r.name))
		return false
	}
}

// zeroTail handles zeros from off to end of file, off being where a
// fragment header would start.
func (r *Reader) zeroTail(off int64) {
	if r.inRec {
		r.tornTail(corruption{kind: ckZeroTail, off: off})
		return
	}
	r.unwritten(off)
}

// unwritten ends the log at off, a record boundary from which the file
// holds only zeros: space the writer reserved past the log, or a file
// extended before its last (unsynced) appends reached the disk. Nothing
// after a record boundary is lost that a file ending there would not lose,
// and a file ending at a record boundary is a complete log in every mode,
// so this is no torn tail either, in any mode.
func (r *Reader) unwritten(off int64) {
	r.stats.UnwrittenBytes += r.blockOff + int64(len(r.buf)) - off
	r.finish(io.EOF)
}

// noteRecycled handles damage in a recycled log, in every mode but
// SkipAnyCorruptedRecords: bytes nothing of this log verifies after are
// where an older log's begin (a crash can leave the new log's last
// fragment torn over them, or end it inside one of theirs), so the log
// ends there (staleEnd); damage with a fragment of this log after it is
// corruption, an error as in PointInTime.
func (r *Reader) noteRecycled(c corruption) bool {
	follow, err := r.verifiedAfter(c)
	switch {
	case err != nil:
		r.finish(err)
	case follow < 0:
		r.staleEnd(c.off)
	default:
		r.stats.Corruptions++
		c.follow = follow
		r.last, r.hasLast = c, true
		r.finish(c.error(r.name))
	}
	return false
}

// olderLog reports whether a fragment at off (of type typ, whose stored
// checksum mismatches, raw being its payload's hash) is intact but was
// written by an older log at this offset: the context term recovered
// from stored-raw names a log number below this one. In a recycled file
// that is what lies after the log's end. Random damage passes with odds
// of about logNum in 2^32.
func (r *Reader) olderLog(stored, raw uint32, off int64, typ byte) bool {
	if typ < fragFull || typ > fragLast {
		return false
	}
	cand := (stored - raw) ^ ctxSeed ^ offsetTerm(off)
	ours := uint32(r.logNum) ^ uint32(r.logNum>>32)
	return r.logNum>>32 == 0 && cand < ours
}

// staleEnd ends a recycled log at off, where an older log's bytes begin
// (olderLog, or damage with nothing of this log after it): the new log
// wrote nothing past it that reached the disk. A record whose FIRST
// fragment came before it is a torn tail, as at the end of any file. In
// SkipAnyCorruptedRecords, damage noted since the last record returned
// was the start of the older bytes: it is taken back.
func (r *Reader) staleEnd(off int64) {
	if r.retractSinceGood() {
		off = r.endOffset
	}
	if r.inRec {
		r.tornTail(corruption{kind: ckIncomplete, off: r.recOff})
		return
	}
	for !r.eof {
		if err := r.readBlock(); err != nil {
			r.finish(err)
			return
		}
	}
	if end := r.blockOff + int64(len(r.buf)); end > off {
		r.stats.StaleBytes += end - off
	}
	r.finish(io.EOF)
}

// tornTail handles a crash-cut end of file at c.off.
func (r *Reader) tornTail(c corruption) {
	start := c.off
	if r.inRec && r.recOff < start {
		start = r.recOff
	}
	if r.inRec || c.kind == ckTornBody || c.kind == ckTornHeader {
		r.stats.DroppedRecords++
	}
	r.inRec = false
	if r.mode == AbsoluteConsistency {
		r.last, r.hasLast = c, true
		r.finish(c.error(r.name))
		return
	}
	end := r.blockOff + int64(len(r.buf))
	r.stats.DroppedBytes += end - start
	r.stats.TailDroppedBytes += end - start
	r.finish(io.EOF)
}

// wholeLength decides whether the fragment at r.pos, in the last block,
// whose length runs past end of file and after which nothing in the block
// verifies, is whole in the file with a damaged length field (corruption)
// rather than cut by a crash (a torn tail). The checksum covers the length,
// so a length l that fits the bytes present under which the fragment
// verifies is, but for a 2^-32 accident, the length it was written with:
// wholeLength returns the first such l it finds, or -1.
//
// It tries only the ends a writer could have given a fragment that a crash,
// if any, left whole (see "A length past end of file" in the package
// documentation): a FULL fragment (or a LAST one at the start of its
// block) ending at end of file; or where the fragment the crash cut starts,
// a FULL header that fits the block and reaches past the last written byte
// or a FIRST header that fills the block; or where only zeros follow (the
// reserve, a torn append's unwritten bytes), perhaps after the first bytes
// of a header. A FIRST or MIDDLE fragment fills its block, whose end is
// past end of file, so it cannot be whole. Each length tried costs a hash
// of the fragment, counted against the block's resyncBudget; when that runs
// out the fragment is taken for torn.
//
// Without it, a flipped bit in the length of a log's last fragment read as
// a torn tail and the record was dropped in silence: a MANIFEST's last,
// synced edit (vigil stress --corrupt-files, seed 1796198194296768274).
func (r *Reader) wholeLength(off int64) int {
	h := r.buf[r.pos:]
	typ := h[6]
	if r.ctype == checksum.None || !(typ == fragFull || typ == fragLast && r.pos == 0) {
		return -1
	}
	eof := len(r.buf)                   // end of file, as an index into buf
	start := r.pos + FragmentHeaderSize // the end of an empty payload
	z := eof                            // just past the last non-zero byte of the fragment or after it
	for z > start && r.buf[z-1] == 0 {
		z--
	}
	stored := binary.LittleEndian.Uint32(h[0:4])
	written := [2]byte{h[4], h[5]}
	defer func() { h[4], h[5] = written[0], written[1] }()
	// verifies reports whether the fragment verifies ending at index e.
	verifies := func(e int) bool {
		l := e - start
		r.budget -= l + 3
		binary.LittleEndian.PutUint16(h[4:6], uint16(l))
		return fragmentChecksum(r.ctype, r.logNum, off, h[checksumSize:FragmentHeaderSize+l]) == stored
	}
	// The fragment ends the file.
	if r.budget > 0 && verifies(eof) {
		return eof - start
	}
	// A torn fragment follows it. From lo on, every end is tried below.
	lo := max(start, z-(FragmentHeaderSize-1))
	for e := start; e < lo && r.budget > 0; e++ {
		g := r.buf[e:]
		gEnd := e + FragmentHeaderSize + int(binary.LittleEndian.Uint16(g[4:6]))
		if (g[6] == fragFull && gEnd > z && gEnd <= BlockSize || g[6] == fragFirst && gEnd == BlockSize) && verifies(e) {
			return e - start
		}
	}
	// Zeros follow it, perhaps after the first bytes of a torn header, or
	// a header cut short by end of file.
	for e := lo; e < eof && r.budget > 0; e++ {
		if verifies(e) {
			return e - start
		}
	}
	return -1
}

// verifiedAfter decides, for PointInTime, whether corruption c is followed
// by intact data: it returns the file offset of a fragment after the damage
// that verifies (a known type, a length that fits its block, and a checksum
// that matches under this log's number and that offset), or -1 if there is
// none to end of file. Ordering errors and a length past end of file were
// found by verifying the fragment that follows (or, for an orphan, the
// fragment itself), so they need no search. For the others the search
// starts right after the damaged fragment (first where its length points)
// and goes on block by block, reusing the one block buffer, with
// findFragment's per-block resyncBudget; it may read the rest of the file,
// which dropRest then need not read again. With checksum type None nothing
// verifies and it returns -1 without reading: the blind spot. A read error
// during the search is returned: a log that cannot be read is not a log
// that ends there.
func (r *Reader) verifiedAfter(c corruption) (int64, error) {
	if r.ctype == checksum.None {
		return -1, nil
	}
	from, hint := r.pos+1, -1
	switch c.kind {
	case ckLengthEOF:
		return c.aux, nil
	case ckLengthWhole:
		// Found only when nothing verifies after it in the block, the
		// file's last.
		return -1, nil
	case ckPartial:
		return c.aux, nil // the FULL or FIRST fragment that verified
	case ckOrphan:
		return c.off, nil // the orphan itself verified
	case ckChecksum:
		hint = r.pos + FragmentHeaderSize + c.length
	case ckZeroed, ckPadding:
		// pos is at the zeros (all rejected cheaply as type 0), at the
		// start of the block where data follows zeros, or past the padding.
		from = r.pos
	}
	for {
		if q := r.findFragment(from, hint); q >= 0 {
			return r.blockOff + int64(q), nil
		}
		if r.eof {
			return -1, nil
		}
		if err := r.readBlock(); err != nil {
			return -1, err
		}
		from, hint = 0, -1
	}
}

// dropRest ends reading (PointInTime) and counts the bytes from start to end
// of file as dropped, reading the rest of the file to know its size.
func (r *Reader) dropRest(start int64) {
	for !r.eof {
		if err := r.readBlock(); err != nil {
			r.finish(err)
			return
		}
	}
	if end := r.blockOff + int64(len(r.buf)); end > start {
		r.stats.DroppedBytes += end - start
	}
	r.finish(io.EOF)
}

// findFragment looks for a valid fragment starting at or after buf[from],
// trying hint first if it is a position in the block. Valid means a known
// type, a length that fits in the block, and a checksum that matches: with
// the log number and offset bound into the checksum, a false match is a
// 2^-32 event. It returns -1 if there is none, if the checksum type is None
// (nothing can be verified), or if resyncBudget runs out.
func (r *Reader) findFragment(from, hint int) int {
	if r.ctype == checksum.None {
		return -1
	}
	try := func(q int) bool {
		if q < 0 || q+FragmentHeaderSize > len(r.buf) {
			return false
		}
		h := r.buf[q:]
		typ := h[6]
		if typ < fragFull || typ > fragLast {
			return false
		}
		length := int(binary.LittleEndian.Uint16(h[4:6]))
		if q+FragmentHeaderSize+length > len(r.buf) {
			return false
		}
		r.budget -= length + 3
		return fragmentChecksum(r.ctype, r.logNum, r.blockOff+int64(q), h[checksumSize:FragmentHeaderSize+length]) == binary.LittleEndian.Uint32(h[0:4])
	}
	if hint >= from && try(hint) {
		return hint
	}
	for q := from; q+FragmentHeaderSize <= len(r.buf) && r.budget > 0; q++ {
		if try(q) {
			return q
		}
	}
	return -1
}

func firstNonZero(b []byte) int {
	for i, c := range b {
		if c != 0 {
			return i
		}
	}
	return -1
}

// corruptKind classifies what a Reader found.
type corruptKind uint8

const (
	ckChecksum    corruptKind = iota // checksum mismatch
	ckLength                         // length runs past the end of a full block
	ckLengthEOF                      // length runs past end of file, but a valid fragment follows
	ckLengthWhole                    // length runs past end of file, but the fragment verifies with a shorter one
	ckType                           // unknown fragment type (only reachable with checksum None)
	ckPadding                        // non-zero block padding
	ckZeroed                         // zeroed bytes followed by data
	ckPartial                        // record without LAST, followed by FULL or FIRST
	ckOrphan                         // MIDDLE or LAST without FIRST
	ckTornHeader                     // torn tail: fragment header cut by end of file
	ckTornBody                       // torn tail: fragment body cut by end of file
	ckZeroTail                       // torn tail: zeros to end of file
	ckIncomplete                     // torn tail: record without LAST at end of file
)

// corruption describes damage without formatting it, so a reader that skips
// many damaged fragments allocates nothing per fragment; error builds the
// message when someone asks for it.
type corruption struct {
	kind             corruptKind
	typ              byte
	length           int
	off              int64
	aux              int64 // kind-specific: bytes left, offset of data or of a valid fragment
	stored, computed uint32
	logNum           uint64
	raw              uint32 // checksum without context, for the mismatch diagnosis
	// follow > 0: PointInTime found a verified fragment at this offset
	// after the damage, which is why the corruption is an error.
	follow int64
}

func (c corruption) error(name string) error {
	err := c.baseError(name)
	if c.follow > 0 {
		return fmt.Errorf("%w; a valid fragment follows at offset %d, so it is not a torn tail", err, c.follow)
	}
	return err
}

func (c corruption) baseError(name string) error {
	prefix := fmt.Sprintf("wal: %s: offset %d", name, c.off)
	switch c.kind {
	case ckChecksum:
		return base.CorruptionErrorf("%s: %s fragment (length %d): checksum mismatch (stored %#08x, computed %#08x)%s",
			prefix, fragTypeName(c.typ), c.length, c.stored, c.computed, c.hint())
	case ckLength:
		return base.CorruptionErrorf("%s: bad fragment length %d: only %d bytes left in the block", prefix, c.length, c.aux)
	case ckLengthEOF:
		return base.CorruptionErrorf("%s: bad fragment length %d runs past end of file, but a valid fragment follows at offset %d", prefix, c.length, c.aux)
	case ckLengthWhole:
		return base.CorruptionErrorf("%s: bad fragment length %d runs past end of file, but the %s fragment is whole: it verifies with length %d, so its length field was damaged (not a torn write)",
			prefix, c.length, fragTypeName(c.typ), c.aux)
	case ckType:
		return base.CorruptionErrorf("%s: bad fragment type %d (length %d)", prefix, c.typ, c.length)
	case ckPadding:
		return base.CorruptionErrorf("%s: %d bytes of block padding are not zero", prefix, c.aux)
	case ckZeroed:
		return base.CorruptionErrorf("%s: zeroed bytes followed by data at offset %d", prefix, c.aux)
	case ckPartial:
		return base.CorruptionErrorf("%s: fragments out of order: the record starting here has no LAST fragment; a %s fragment follows at offset %d", prefix, fragTypeName(c.typ), c.aux)
	case ckOrphan:
		return base.CorruptionErrorf("%s: fragments out of order: %s fragment (length %d) without a FIRST", prefix, fragTypeName(c.typ), c.length)
	case ckTornHeader:
		return base.CorruptionErrorf("%s: torn tail: fragment header cut short by end of file (%d of %d bytes)", prefix, c.length, FragmentHeaderSize)
	case ckTornBody:
		return base.CorruptionErrorf("%s: torn tail: %s fragment of length %d cut short by end of file (%d bytes present)", prefix, fragTypeName(c.typ), c.length, max(c.aux, 0))
	case ckZeroTail:
		return base.CorruptionErrorf("%s: torn tail: zeroed bytes from here to end of file", prefix)
	case ckIncomplete:
		return base.CorruptionErrorf("%s: torn tail: the record starting here has no LAST fragment at end of file", prefix)
	}
	return base.CorruptionErrorf("%s: corruption kind %d", prefix, c.kind)
}

// hint explains a checksum mismatch whose stored value is the right
// checksum of the payload under another binding. Because the context value
// is added, stored-raw recovers it; if it decodes to a log number close to
// ours, or to a plausible offset in this log, the payload is intact and the
// fragment belongs elsewhere. For random damage either match has odds below
// 10^-4.
func (c corruption) hint() string {
	if c.raw == 0 && c.stored == 0 {
		return ""
	}
	if x := c.stored ^ c.computed; x&(x-1) == 0 {
		// One bit apart: a flip in the checksum field itself is far likelier
		// than a fragment from elsewhere (whose context would differ in
		// many bits), and the log/offset decoding below would misread it.
		return fmt.Sprintf("; the two differ in exactly one bit (bit %d): most likely a flipped bit in the stored checksum", bits.TrailingZeros32(x))
	}
	delta := c.stored - c.raw
	ours := uint32(c.logNum) ^ uint32(c.logNum>>32)
	candLog := delta ^ ctxSeed ^ offsetTerm(c.off)
	candOff := delta ^ logBase(c.logNum)
	var alts []string
	if candLog != ours && absDiff(candLog, ours) < 1<<16 {
		alts = append(alts, fmt.Sprintf("log %d at this offset (this is log %d: log number mismatch, a fragment from another log)", candLog, c.logNum))
	}
	if candOff != offsetTerm(c.off) && candOff >= FileHeaderSize && int64(candOff) < max(1<<20, 2*c.off) {
		alts = append(alts, fmt.Sprintf("offset %d of this log (a misplaced fragment)", candOff))
	}
	if len(alts) == 0 {
		return ""
	}
	return "; the payload is intact but its checksum was computed for " + strings.Join(alts, ", or for ")
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}
