package sst

import (
	"fmt"

	"github.com/vigildb/vigil/internal/base"
)

// tableMeta is everything Open decodes besides the data blocks. Verify
// decodes it again from the file and compares.
type tableMeta struct {
	footer    footer
	index     indexBlock
	filter    bloomFilter
	hasFilter bool
	filterH   handle
	rangeDelH handle
	propsH    handle
	rangeDels []RangeTombstone
	props     Properties
	// mem owns the index and filter blocks (outside the Go heap; see
	// metaAlloc).
	mem *tableMem
	// decoded counts the bytes read and decompressed to build the rest
	// (for the allocation bound tests).
	decoded uint64
}

// readMeta reads and cross-checks everything but the data blocks, without
// the cache. The caller frees m.mem when done with m (on error it is freed
// already).
func (r fileReader) readMeta() (tableMeta, fileReader, error) {
	m, err := r.readMetaInner()
	if err != nil {
		m.mem.free()
	}
	return m, r, err
}

// readMetaInner sets r.t and r.base from the footer (r is readMeta's copy).
func (r *fileReader) readMetaInner() (tableMeta, error) {
	m := tableMeta{mem: new(tableMem)}
	if r.size < FooterLen {
		return m, base.CorruptionErrorf("Input is too short to be an SST file: %d bytes in %s", r.size, r.fid)
	}
	fb := make([]byte, FooterLen)
	m.decoded = FooterLen
	if err := r.readAt(fb, r.size-FooterLen, BlockKindFooter); err != nil {
		return m, err
	}
	ft, err := decodeFooter(fb, r.size, r.fid)
	if err != nil {
		return m, err
	}
	m.footer = ft
	// Blocks are verified with the footer's type and base.
	r.t, r.base = ft.checksumType, ft.base

	// read reads a block into fresh buffers, counting in m.decoded what it
	// read and what it returned.
	read := func(h handle, kind BlockKind) ([]byte, error) {
		if h.size <= MaxBlockSize && h.offset <= r.size && h.end() <= r.size {
			m.decoded += h.size + BlockTrailerLen
		}
		b, err := r.readBlock(h, kind, nil, nil)
		m.decoded += uint64(len(b))
		return b, err
	}

	// Metaindex: the handles of the filter, range-del and properties blocks.
	mb, err := read(ft.metaindex, BlockKindMetaIndex)
	if err != nil {
		return m, err
	}
	if err := r.decodeMetaIndex(mb, ft.metaindex.offset, &m); err != nil {
		return m, err
	}

	// Index: checked entry by entry, but kept as a block (see indexBlock).
	ib, err := r.readOwned(ft.index, BlockKindIndex, &m)
	if err != nil {
		return m, err
	}
	var dataEnd uint64
	if m.index, dataEnd, err = r.decodeIndex(ib, ft.index.offset); err != nil {
		return m, err
	}

	if err := r.checkMetaTiling(&m, dataEnd, ft.index.offset); err != nil {
		return m, err
	}

	if m.hasFilter {
		b, err := r.readOwned(m.filterH, BlockKindFilter, &m)
		if err != nil {
			return m, err
		}
		if m.filter, err = decodeFilter(b); err != nil {
			return m, r.blockErr(BlockKindFilter, m.filterH.offset, err)
		}
	}
	// The properties name the table's comparer: before anything is
	// checked in its order, a table of another order is refused.
	pb, err := read(m.propsH, BlockKindProperties)
	if err != nil {
		return m, err
	}
	if m.props, err = decodeProperties(pb); err != nil {
		return m, r.blockErr(BlockKindProperties, m.propsH.offset, err)
	}
	m.props.FormatVersion = ft.version
	if err := r.checkComparer(&m.props); err != nil {
		return m, err
	}
	if err := r.checkIndexOrder(&m.index, ft.index.offset); err != nil {
		return m, err
	}
	rb, err := read(m.rangeDelH, BlockKindRangeDel)
	if err != nil {
		return m, err
	}
	if m.rangeDels, err = decodeRangeDels(rb, r.cmp); err != nil {
		return m, r.blockErr(BlockKindRangeDel, m.rangeDelH.offset, err)
	}
	if err := m.crossCheck(dataEnd, r.cmp); err != nil {
		return m, blockCorruptf(r.fid, BlockKindProperties, m.propsH.offset, "%v", err)
	}
	return m, nil
}

// readOwned is readBlock for a block the table keeps while open (index,
// filter): it reads the block into a metaAlloc buffer, which m.mem keeps
// if the block is stored uncompressed; a compressed block is decoded into
// a buffer m.mem keeps, and the first is freed. It counts in m.decoded what
// it read and what it returned.
func (r *fileReader) readOwned(h handle, kind BlockKind, m *tableMeta) ([]byte, error) {
	if err := r.checkBounds(h, kind); err != nil {
		return nil, err
	}
	m.decoded += h.size + BlockTrailerLen
	raw := allocMeta(int(h.size) + BlockTrailerLen)
	b, c, err := r.readRawInto(raw.Bytes(), h, kind, true)
	if err == nil && c == NoCompression {
		m.mem.keep(raw)
		m.decoded += uint64(len(b))
		return b, nil
	}
	defer raw.Free()
	if err != nil {
		return nil, err
	}
	dlen, err := r.decodedLen(b, c, h, kind)
	if err != nil {
		return nil, err
	}
	dst := m.mem.alloc(dlen)
	m.decoded += uint64(dlen)
	if err := r.decodeInto(dst, b, c, h, kind); err != nil {
		return nil, err
	}
	return dst, nil
}

// decodeMetaIndex reads the handles of the filter, range-del and
// properties blocks from the metaindex block mb (at offset off) into m.
func (r *fileReader) decodeMetaIndex(mb []byte, off uint64, m *tableMeta) error {
	var haveProps, haveRange bool
	var it blockIter
	if err := it.init(mb, false); err != nil {
		return r.blockErr(BlockKindMetaIndex, off, err)
	}
	expect := []string{metaFilter, metaProperties, metaRangeDel}
	for ok := it.first(); ok; ok = it.next() {
		for len(expect) > 0 && string(it.key) != expect[0] {
			expect = expect[1:]
		}
		h, hok := decodeHandle(it.val)
		if len(expect) == 0 || !hok {
			return blockCorruptf(r.fid, BlockKindMetaIndex, off, "bad metaindex entry %q", truncate(it.key))
		}
		switch expect[0] {
		case metaFilter:
			m.filterH, m.hasFilter = h, true
		case metaProperties:
			m.propsH, haveProps = h, true
		case metaRangeDel:
			m.rangeDelH, haveRange = h, true
		}
		expect = expect[1:]
	}
	if it.err != nil {
		return r.blockErr(BlockKindMetaIndex, off, it.err)
	}
	if !haveProps || !haveRange {
		return blockCorruptf(r.fid, BlockKindMetaIndex, off, "metaindex lacks the properties or range-del handle")
	}
	return nil
}

// checkMetaTiling checks that the blocks after the data blocks tile the
// file in order: filter (if any), range-del, properties, then the index at
// indexOff.
func (r *fileReader) checkMetaTiling(m *tableMeta, dataEnd, indexOff uint64) error {
	next := dataEnd
	tile := func(h handle, kind BlockKind) error {
		if h.offset != next || h.size > MaxBlockSize || h.end() > indexOff {
			return blockCorruptf(r.fid, kind, h.offset, "bad handle (size %d; expected offset %d)", h.size, next)
		}
		next = h.end()
		return nil
	}
	if m.hasFilter {
		if err := tile(m.filterH, BlockKindFilter); err != nil {
			return err
		}
	}
	if err := tile(m.rangeDelH, BlockKindRangeDel); err != nil {
		return err
	}
	if err := tile(m.propsH, BlockKindProperties); err != nil {
		return err
	}
	if next != indexOff {
		return blockCorruptf(r.fid, BlockKindIndex, indexOff, "index block does not follow the properties block (ends at %d)", next)
	}
	return nil
}

// crossCheck compares the properties with the blocks they describe (cmp
// orders the keys).
func (m *tableMeta) crossCheck(dataEnd uint64, cmp *base.Comparer) error {
	p := &m.props
	filterSize := uint64(0)
	if m.hasFilter {
		filterSize = m.filterH.size + BlockTrailerLen
	}
	switch {
	case p.ChecksumType != m.footer.checksumType:
		return fmt.Errorf("properties say checksum type %s, footer %s", p.ChecksumType, m.footer.checksumType)
	case p.NumDataBlocks != uint64(m.index.len()):
		return fmt.Errorf("properties say %d data blocks, index has %d", p.NumDataBlocks, m.index.len())
	case p.DataSize != dataEnd:
		return fmt.Errorf("properties say %d bytes of data blocks, index says %d", p.DataSize, dataEnd)
	case p.IndexSize != m.footer.index.size+BlockTrailerLen:
		return fmt.Errorf("properties say index size %d, footer %d", p.IndexSize, m.footer.index.size+BlockTrailerLen)
	case p.FilterSize != filterSize:
		return fmt.Errorf("properties say filter size %d, metaindex %d", p.FilterSize, filterSize)
	case m.hasFilter != (p.BloomBitsPerKey > 0):
		return fmt.Errorf("properties say %d bloom bits per key, filter present: %v", p.BloomBitsPerKey, m.hasFilter)
	case p.PrefixFilter && !m.hasFilter:
		return fmt.Errorf("properties say the filter holds prefixes, but there is no filter")
	case p.RangeDelSize != m.rangeDelH.size+BlockTrailerLen:
		return fmt.Errorf("properties say range-del size %d, metaindex %d", p.RangeDelSize, m.rangeDelH.size+BlockTrailerLen)
	case p.NumRangeDels != uint64(len(m.rangeDels)):
		return fmt.Errorf("properties say %d range tombstones, block has %d", p.NumRangeDels, len(m.rangeDels))
	case (p.NumEntries == 0) != (m.index.len() == 0):
		return fmt.Errorf("properties say %d entries, index has %d data blocks", p.NumEntries, m.index.len())
	case p.NumDeletions > p.NumEntries:
		return fmt.Errorf("properties say %d deletions of %d entries", p.NumDeletions, p.NumEntries)
	case p.External && (p.SmallestSeq != 0 || p.LargestSeq != 0):
		return fmt.Errorf("external table with seqnums %d..%d (external entries have seqnum 0)", p.SmallestSeq, p.LargestSeq)
	}
	if p.External {
		// Checked at Open, so that a global seqnum never makes two
		// tombstones of the file ambiguous; points are checked by Verify.
		for i, t := range m.rangeDels {
			if t.Seq != 0 {
				return fmt.Errorf("external table with range tombstone %s at seqnum %d", base.HexKey(t.Start), t.Seq)
			}
			if i > 0 && cmp.Cmp(t.Start, m.rangeDels[i-1].End) < 0 {
				return fmt.Errorf("external table with overlapping range tombstones at %s", base.HexKey(t.Start))
			}
		}
	}
	return nil
}
