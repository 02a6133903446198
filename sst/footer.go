package sst

import (
	"encoding/binary"
	"fmt"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// handle locates a block: its offset and its size on disk without trailer.
type handle struct {
	offset, size uint64
}

// end is the offset just past the block's trailer.
func (h handle) end() uint64 { return h.offset + h.size + BlockTrailerLen }

func appendHandle(dst []byte, h handle) []byte {
	dst = binary.AppendUvarint(dst, h.offset)
	return binary.AppendUvarint(dst, h.size)
}

// decodeHandle decodes a handle that must fill b exactly.
func decodeHandle(b []byte) (handle, bool) {
	off, n := binary.Uvarint(b)
	if n <= 0 {
		return handle{}, false
	}
	size, m := binary.Uvarint(b[n:])
	if m <= 0 || n+m != len(b) {
		return handle{}, false
	}
	return handle{off, size}, true
}

// footer is the decoded footer (see "Footer" in the package comment).
type footer struct {
	checksumType checksum.Type
	version      uint32
	base         uint32
	metaindex    handle
	index        handle
}

const footerChecksumOff = 41

// encode returns the footer bytes for a footer starting at file offset off.
func (f *footer) encode(off uint64) []byte {
	b := make([]byte, FooterLen)
	b[0] = f.checksumType.Code()
	binary.LittleEndian.PutUint32(b[1:], f.version)
	binary.LittleEndian.PutUint32(b[5:], f.base)
	binary.LittleEndian.PutUint64(b[9:], f.metaindex.offset)
	binary.LittleEndian.PutUint64(b[17:], f.metaindex.size)
	binary.LittleEndian.PutUint64(b[25:], f.index.offset)
	binary.LittleEndian.PutUint64(b[33:], f.index.size)
	sum := checksum.Value(f.checksumType, b[:footerChecksumOff]) + checksum.ContextModifier(f.base, off)
	binary.LittleEndian.PutUint32(b[footerChecksumOff:], sum)
	binary.LittleEndian.PutUint64(b[45:], Magic)
	return b
}

// decodeFooter decodes and verifies the footer b (the last FooterLen bytes
// of a file of the given size). The checks and messages follow RocksDB's
// Footer::DecodeFrom; every error wraps ErrCorruption and names the
// file.
func decodeFooter(b []byte, fileSize uint64, f fileID) (footer, error) {
	if uint64(len(b)) < FooterLen || fileSize < FooterLen {
		return footer{}, base.CorruptionErrorf("Input is too short to be an SST file: %d bytes in %s", fileSize, f)
	}
	off := fileSize - FooterLen
	if m := binary.LittleEndian.Uint64(b[45:]); m != Magic {
		return footer{}, base.CorruptionErrorf("Bad table magic number: expected 0x%016x, found 0x%016x in %s", Magic, m, f)
	}
	ft := footer{
		checksumType: checksum.TypeFromCode(b[0]),
		version:      binary.LittleEndian.Uint32(b[1:]),
		base:         binary.LittleEndian.Uint32(b[5:]),
		metaindex:    handle{binary.LittleEndian.Uint64(b[9:]), binary.LittleEndian.Uint64(b[17:])},
		index:        handle{binary.LittleEndian.Uint64(b[25:]), binary.LittleEndian.Uint64(b[33:])},
	}
	if ft.version != FormatVersion {
		return footer{}, base.CorruptionErrorf("Corrupt or unsupported format_version %d for magic 0x%016x in %s", ft.version, Magic, f)
	}
	if !ft.checksumType.Valid() {
		return footer{}, base.CorruptionErrorf("Corrupt or unsupported checksum type: %d in %s", b[0], f)
	}
	if ft.base == 0 {
		return footer{}, base.CorruptionErrorf("Invalid base context checksum 0 in %s", f)
	}
	stored := binary.LittleEndian.Uint32(b[footerChecksumOff:]) - checksum.ContextModifier(ft.base, off)
	computed := checksum.Value(ft.checksumType, b[:footerChecksumOff])
	if stored != computed {
		return footer{}, base.CorruptionErrorf("Footer at %d checksum mismatch: stored(context removed) = %s, computed = %s, type = %s in %s",
			off, fmtChecksum(ft.checksumType, stored), fmtChecksum(ft.checksumType, computed), ft.checksumType, f)
	}
	// The metaindex block ends where the footer starts; the index block
	// ends where the metaindex block starts.
	if ft.metaindex.size > MaxBlockSize || ft.metaindex.offset > off || ft.metaindex.end() != off {
		return footer{}, base.CorruptionErrorf("bad metaindex handle (offset %d, size %d) in footer at %d of %s",
			ft.metaindex.offset, ft.metaindex.size, off, f)
	}
	if ft.index.size > MaxBlockSize || ft.index.offset > off || ft.index.end() != ft.metaindex.offset {
		return footer{}, base.CorruptionErrorf("bad index handle (offset %d, size %d) in footer at %d of %s",
			ft.index.offset, ft.index.size, off, f)
	}
	return ft, nil
}

// fmtChecksum renders a stored or computed 32-bit checksum; CRC32c values
// are shown unmasked, as RocksDB does, so they can be compared with a plain
// CRC-32C of the bytes.
func fmtChecksum(t checksum.Type, v uint32) string {
	if t == checksum.CRC32c {
		return fmt.Sprintf("0x%08x (unmasked)", checksum.UnmaskCRC32c(v))
	}
	return fmt.Sprintf("0x%08x", v)
}
