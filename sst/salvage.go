package sst

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
)

// Salvage: reading what can be read of a damaged table.
//
// A table is immutable, so damage in it is permanent; Open refuses a table
// whose footer, metaindex, index, filter, range-del or properties block does
// not verify, and a read that needs a damaged data block fails. Salvage is
// for repairing a DB (vigil.Repair): it reads the footer and the index,
// which it cannot do without (the footer holds the checksum type and the
// per-file context every block's trailer is bound to; the index holds where
// the data blocks are), then every data block on its own. A data block that
// verifies (its trailer checksum, its structure, its entries' kinds and
// order, within its index separators and after the last entry salvaged) is
// handed over entry by entry; one that does not is skipped whole and
// reported with the user-key range it may have held: from the previous
// block's separator to its own, both inclusive (a user key's versions may
// straddle two blocks). The range tombstones are handed over if the
// metaindex and the range-del block verify; else the whole table's range is
// in doubt, since a lost tombstone may have hidden older data below, and
// the result says so. The filter and properties blocks are not needed.
//
// Salvage never invents an entry: everything it hands over was in a block
// whose checksum verified.

// LostBlock is a data block Salvage skipped.
type LostBlock struct {
	// Offset and Size locate the block in the file (Size without the
	// trailer), as the index gives them.
	Offset, Size uint64
	// First and Last bound the user keys the block may have held, both
	// inclusive; First is nil for the table's first block (no bound but
	// the table's own).
	First, Last []byte
	// Err is why the block was skipped (wraps ErrCorruption, or an I/O
	// error).
	Err error
}

// SalvageResult is what Salvage found.
type SalvageResult struct {
	// DataBlocks is the number of data blocks the index lists.
	DataBlocks int
	// Lost are the data blocks skipped, in file order.
	Lost []LostBlock
	// Entries counts the point entries handed over.
	Entries uint64
	// RangeDels are the table's range tombstones (with the global seqnum,
	// for an external table), when RangeDelsErr is nil.
	RangeDels []RangeTombstone
	// RangeDelsErr is why the range tombstones could not be read.
	RangeDelsErr error
	// Properties are the table's properties, or nil if their block (or
	// the metaindex) did not verify.
	Properties *Properties
}

// Salvage reads what verifies of the table in f (size bytes, named name in
// errors) and calls emit with each point entry of each data block that
// verifies, in order; emit's key and value are valid only during the call.
// o.FileNum names the table; o.GlobalSeqNum, if not zero, is the seqnum
// every entry and tombstone reads back with (an ingested table);
// o.Comparer is the order the blocks are checked in; o.Expect and o.Cache
// are ignored. It returns an error wrapping ErrCorruption when even the
// footer or the index does not verify (nothing can be salvaged), one
// wrapping ErrInvalidArgument when the properties verify and name another
// comparer than o.Comparer (whose order would make every block look
// damaged), an I/O error as it is, or emit's error. Salvage does not
// close f.
func Salvage(f vfs.File, name string, size int64, o ReaderOptions, emit func(k InternalKey, value []byte) error) (*SalvageResult, error) {
	if size < 0 {
		return nil, invalidArgf("negative size %d for %s", size, name)
	}
	fr := fileReader{f: f, fid: fileID{name: name, num: o.FileNum}, size: uint64(size), cmp: o.Comparer.Resolve()}
	if msg := fr.cmp.Check(); msg != "" {
		return nil, invalidArgf("salvaging %s: %s", fr.fid, msg)
	}
	if fr.size < FooterLen {
		return nil, base.CorruptionErrorf("sst: %s is too short to be a table: %d bytes", fr.fid, fr.size)
	}
	fb := make([]byte, FooterLen)
	if err := fr.readAt(fb, fr.size-FooterLen, BlockKindFooter); err != nil {
		return nil, err
	}
	ft, err := decodeFooter(fb, fr.size, fr.fid)
	if err != nil {
		return nil, err
	}
	fr.t, fr.base = ft.checksumType, ft.base
	ib, err := fr.readBlock(ft.index, BlockKindIndex, nil, nil)
	if err != nil {
		return nil, err
	}
	index, _, err := fr.decodeIndex(ib, ft.index.offset)
	if err != nil {
		return nil, err
	}
	s := salvager{fr: &fr, index: index, globalSeq: o.GlobalSeqNum, emit: emit}
	res := &SalvageResult{DataBlocks: index.len()}
	s.meta(ft, res)
	if res.Properties != nil {
		// Only the name: Salvage reads no filter.
		if p := *res.Properties; p.ComparerName != fr.cmp.Name {
			return nil, fr.checkComparer(&p)
		}
	}
	if err := fr.checkIndexOrder(&index, ft.index.offset); err != nil {
		return nil, err
	}
	for bi := 0; bi < index.len(); bi++ {
		if err := s.block(bi, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// salvager is the state of one Salvage.
type salvager struct {
	fr        *fileReader
	index     indexBlock
	globalSeq uint64
	emit      func(k InternalKey, value []byte) error
	raw, dec  []byte
	it        blockIter
	// prev is the last key handed over (encoded), nil before the first;
	// prevBuf is check's copy of the key before the current one.
	prev, prevBuf []byte
}

// meta reads the metaindex, then the range-del and properties blocks, into
// res; a block that does not verify is recorded, not returned.
func (s *salvager) meta(ft footer, res *SalvageResult) {
	fr := s.fr
	var m tableMeta
	mb, err := fr.readBlock(ft.metaindex, BlockKindMetaIndex, nil, nil)
	if err == nil {
		err = fr.decodeMetaIndex(mb, ft.metaindex.offset, &m)
	}
	if err != nil {
		res.RangeDelsErr = err
		return
	}
	rb, err := fr.readBlock(m.rangeDelH, BlockKindRangeDel, nil, nil)
	if err == nil {
		if res.RangeDels, err = decodeRangeDels(rb, fr.cmp); err != nil {
			err = fr.blockErr(BlockKindRangeDel, m.rangeDelH.offset, err)
		}
	}
	if err != nil {
		res.RangeDels, res.RangeDelsErr = nil, err
	} else if s.globalSeq != 0 {
		for i := range res.RangeDels {
			res.RangeDels[i].Seq = s.globalSeq
		}
	}
	if pb, err := fr.readBlock(m.propsH, BlockKindProperties, nil, nil); err == nil {
		if p, err := decodeProperties(pb); err == nil {
			p.FormatVersion = ft.version
			res.Properties = &p
		}
	}
}

// block salvages data block bi: checked whole first, then handed over.
// Only emit's error and I/O errors are returned; damage is recorded in res.
func (s *salvager) block(bi int, res *SalvageResult) error {
	fr, h := s.fr, s.index.handle(bi)
	lost := func(err error) error {
		lb := LostBlock{Offset: h.offset, Size: h.size, Last: bytes.Clone(s.index.sepUser(bi)), Err: err}
		if bi > 0 {
			lb.First = bytes.Clone(s.index.sepUser(bi - 1))
		}
		res.Lost = append(res.Lost, lb)
		return nil
	}
	data, err := fr.readBlock(h, BlockKindData, &s.raw, &s.dec)
	if err != nil {
		if base.IsCorruption(err) {
			return lost(err)
		}
		return err
	}
	if err := s.check(bi, data); err != nil {
		return lost(err)
	}
	it := &s.it
	_ = it.initData(data, fr.cmp) // checked above
	for ok := it.first(); ok; ok = it.next() {
		s.prev = append(s.prev[:0], it.key...)
		k, _ := base.DecodeInternalKey(it.key)
		if s.globalSeq != 0 {
			k = base.MakeInternalKey(k.UserKey, s.globalSeq, k.Kind())
		}
		if err := s.emit(k, it.val); err != nil {
			return err
		}
		res.Entries++
	}
	return nil
}

// check checks decoded data block bi as Verify does, without the filter:
// structure, kinds, order after the last entry handed over, and the index
// separators on either side.
func (s *salvager) check(bi int, data []byte) error {
	fr, h, it := s.fr, s.index.handle(bi), &s.it
	if err := it.init(data, true); err != nil {
		return fr.blockErr(BlockKindData, h.offset, err)
	}
	sep := s.index.sep(bi)
	prev := append(s.prevBuf[:0], s.prev...)
	if s.prev == nil {
		prev = nil
	}
	n := 0
	for ok := it.first(); ok; ok = it.next() {
		k, _ := base.DecodeInternalKey(it.key)
		fail := func(format string, args ...any) error {
			return blockCorruptf(fr.fid, BlockKindData, h.offset, "entry %s at block offset %d: %s", k, it.offset, fmt.Sprintf(format, args...))
		}
		switch {
		case !k.Kind().IsPoint():
			return fail("kind %s not allowed in a data block", k.Kind())
		case prev != nil && compareEncoded(fr.cmp, prev, it.key) >= 0:
			return fail("out of order")
		case compareEncoded(fr.cmp, it.key, sep) > 0:
			return fail("above the block's index separator")
		case bi > 0 && compareEncoded(fr.cmp, it.key, s.index.sep(bi-1)) <= 0:
			return fail("not above the previous block's separator")
		case s.globalSeq != 0 && k.SeqNum() != 0:
			return fail("seqnum %d in an external table", k.SeqNum())
		}
		prev = append(prev[:0], it.key...)
		n++
	}
	s.prevBuf = prev
	if it.err != nil {
		return fr.dataErr(h, it)
	}
	if n == 0 {
		return blockCorruptf(fr.fid, BlockKindData, h.offset, "empty data block")
	}
	return nil
}
