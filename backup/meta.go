package backup

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/checksum"
)

// Meta file format, version 2 (pinned by testdata/meta-v2.golden):
//
//	offset  size  field
//	     0     8  magic "VIGILBKP"
//	     8     4  format version (uint32 LE) = 2
//	    12     …  body
//	  n-8      8  CRC-64/Jones of bytes [0, n-8) (uint64 LE; checksum.Sum64(CRC64, …))
//
//	body := id uvarint | created varint (Unix ns) | seq uvarint
//	        | digest.CRC64 (uint64 LE) | digest.Bytes uvarint | digest.Keys uvarint
//	        | file checksum type (1 byte, checksum.Type.Code, not None's 0)
//	        | file count uvarint | file*
//	file := kind (1 byte: 1 shared, 2 private) | name length uvarint (1..255)
//	        | name | size uvarint | checksum (uint64 LE)
//
// Version 1 had the same layout but recorded the range digest's first
// format, and its backups hold record logs of format version 1, which this
// build does not read: it is refused, naming both versions (Vigil has made
// no release).
//
// Varints are minimal (a multi-byte varint never ends in a zero byte), so an
// encoding is canonical: decoding and re-encoding give the same bytes. The
// decoder checks the trailer first, then the magic and version, then every
// length against the bytes left; it never panics and allocates at most a
// small multiple of its input.

const (
	metaMagic   = "VIGILBKP"
	metaVersion = 2
	metaHeader  = len(metaMagic) + 4
	metaTrailer = 8
	// maxMetaSize bounds what a reader loads for one meta file.
	maxMetaSize = 64 << 20
	maxNameLen  = 255
	// minFileEntry is the smallest encoded file entry: kind, name length,
	// one name byte, size, checksum.
	minFileEntry = 1 + 1 + 1 + 1 + 8
)

const (
	kindShared  = 1
	kindPrivate = 2
)

// Info describes one backup, as its meta file records it.
type Info struct {
	// ID numbers the backup (1, 2, ...); its meta file is meta/<ID>.
	ID uint64
	// Created is when Create began the backup.
	Created time.Time
	// Seq is the sequence number of the newest write the backup holds.
	Seq uint64
	// Digest is the range digest (vigil.DB.Digest(nil, nil)) of every live
	// key/value pair the backup holds; Restore checks the restored DB
	// against it.
	Digest vigil.RangeDigest
	// ChecksumType is the type of every File.Checksum (CRC64 for backups
	// this package writes).
	ChecksumType checksum.Type
	// Files lists every file of the backup.
	Files []File
}

// File is one file of a backup.
type File struct {
	// Shared says the file is an SST in shared/ (possibly used by other
	// backups too); otherwise it is in private/<id>/.
	Shared bool
	// Name is the file's name in shared/ or private/<id>/. A shared name is
	// <number>_<size>_<MANIFEST file checksum, 16 hex>_<footer context, 8
	// hex>.sst; a private one is the name it has in the DB directory.
	Name string
	// Size is the file's length in bytes.
	Size uint64
	// Checksum is the whole-file checksum (of the Info's ChecksumType) of
	// every byte of the file.
	Checksum uint64
}

// DBName returns the file's name in a DB directory: <number>.sst for a
// shared table, Name for a private file.
func (f File) DBName() string {
	if !f.Shared {
		return f.Name
	}
	num, _, ok := parseSharedName(f.Name)
	if !ok {
		return f.Name
	}
	return fmt.Sprintf("%06d.sst", num)
}

// Size returns the total size of the backup's files.
func (i *Info) Size() uint64 {
	var n uint64
	for _, f := range i.Files {
		n += f.Size
	}
	return n
}

// sharedName is the name of a table in shared/: its number, size, the
// MANIFEST's file checksum and the footer's random context value, so that
// two different tables with one number never get one name.
func sharedName(num, size, fileChecksum uint64, context uint32) string {
	return fmt.Sprintf("%06d_%d_%016x_%08x.sst", num, size, fileChecksum, context)
}

// parseSharedName checks a shared name's syntax and returns its number and
// size.
func parseSharedName(name string) (num, size uint64, ok bool) {
	rest, ok := strings.CutSuffix(name, ".sst")
	if !ok {
		return 0, 0, false
	}
	parts := strings.Split(rest, "_")
	if len(parts) != 4 || !isHex(parts[2], 16) || !isHex(parts[3], 8) {
		return 0, 0, false
	}
	num, ok1 := parseDecimal(parts[0])
	size, ok2 := parseDecimal(parts[1])
	return num, size, ok1 && ok2
}

// validPrivateName reports whether name is one a backup keeps privately:
// CURRENT, MANIFEST-N, OPTIONS-N or N.log.
func validPrivateName(name string) bool {
	switch {
	case name == "CURRENT":
		return true
	case strings.HasPrefix(name, "MANIFEST-"):
		_, ok := parseDecimal(name[len("MANIFEST-"):])
		return ok
	case strings.HasPrefix(name, "OPTIONS-"):
		_, ok := parseDecimal(name[len("OPTIONS-"):])
		return ok
	case strings.HasSuffix(name, ".log"):
		_, ok := parseDecimal(name[:len(name)-len(".log")])
		return ok
	}
	return false
}

func parseDecimal(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > 20 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && (s[i] < 'a' || s[i] > 'f') {
			return false
		}
	}
	return true
}

// encodeMeta returns the meta file encoding of info.
func encodeMeta(info *Info) []byte {
	b := make([]byte, 0, 64+len(info.Files)*64)
	b = append(b, metaMagic...)
	b = binary.LittleEndian.AppendUint32(b, metaVersion)
	b = binary.AppendUvarint(b, info.ID)
	b = binary.AppendVarint(b, info.Created.UnixNano())
	b = binary.AppendUvarint(b, info.Seq)
	b = binary.LittleEndian.AppendUint64(b, info.Digest.CRC64)
	b = binary.AppendUvarint(b, uint64(info.Digest.Bytes))
	b = binary.AppendUvarint(b, uint64(info.Digest.Keys))
	b = append(b, info.ChecksumType.Code())
	b = binary.AppendUvarint(b, uint64(len(info.Files)))
	for _, f := range info.Files {
		kind := byte(kindPrivate)
		if f.Shared {
			kind = kindShared
		}
		b = append(b, kind)
		b = binary.AppendUvarint(b, uint64(len(f.Name)))
		b = append(b, f.Name...)
		b = binary.AppendUvarint(b, f.Size)
		b = binary.LittleEndian.AppendUint64(b, f.Checksum)
	}
	return binary.LittleEndian.AppendUint64(b, checksum.Sum64(checksum.CRC64, b))
}

// decoder reads a meta body, recording the first problem.
type decoder struct {
	b    []byte
	off  int
	err  error
	name string
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: backup meta %s: at offset %d: %s", vigil.ErrCorruption, d.name, d.off, fmt.Sprintf(format, args...))
	}
}

// uvarint reads a minimal uvarint.
func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	var x uint64
	for i := 0; ; i++ {
		if d.off+i >= len(d.b) {
			d.fail("%s: truncated varint", what)
			return 0
		}
		c := d.b[d.off+i]
		if i == 9 && c > 1 {
			d.fail("%s: varint overflows 64 bits", what)
			return 0
		}
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if i > 0 && c == 0 {
				d.fail("%s: non-minimal varint", what)
				return 0
			}
			d.off += i + 1
			return x
		}
	}
}

func (d *decoder) varint(what string) int64 {
	u := d.uvarint(what)
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (d *decoder) fixed64(what string) uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.off < 8 {
		d.fail("%s: truncated", what)
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

func (d *decoder) byte1(what string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail("%s: truncated", what)
		return 0
	}
	c := d.b[d.off]
	d.off++
	return c
}

// decodeMeta parses a meta file's bytes; name is used in errors. Every
// problem is an error wrapping vigil.ErrCorruption (a meta of a newer
// format version included: this build cannot vouch for it).
func decodeMeta(data []byte, name string) (*Info, error) {
	d := &decoder{name: name}
	if len(data) < metaHeader+metaTrailer {
		d.fail("%d bytes, shorter than header and trailer", len(data))
		return nil, d.err
	}
	n := len(data) - metaTrailer
	if got, want := checksum.Sum64(checksum.CRC64, data[:n]), binary.LittleEndian.Uint64(data[n:]); got != want {
		d.off = n
		d.fail("checksum mismatch: stored %#016x, computed %#016x", want, got)
		return nil, d.err
	}
	if string(data[:len(metaMagic)]) != metaMagic {
		d.fail("bad magic %q", data[:len(metaMagic)])
		return nil, d.err
	}
	if v := binary.LittleEndian.Uint32(data[len(metaMagic):]); v != metaVersion {
		d.off = len(metaMagic)
		d.fail("unsupported format version %d (this build reads %d)", v, metaVersion)
		return nil, d.err
	}
	d.b, d.off = data[:n], metaHeader
	info := &Info{}
	info.ID = d.uvarint("id")
	if d.err == nil && info.ID == 0 {
		d.fail("backup id 0")
	}
	info.Created = time.Unix(0, d.varint("creation time"))
	info.Seq = d.uvarint("seq")
	info.Digest.CRC64 = d.fixed64("digest")
	bytes, keys := d.uvarint("digest bytes"), d.uvarint("digest keys")
	if d.err == nil && (bytes > math.MaxInt64 || keys > math.MaxInt64) {
		d.fail("digest length %d or key count %d out of range", bytes, keys)
	}
	info.Digest.Bytes, info.Digest.Keys = int64(bytes), int64(keys)
	code := d.byte1("checksum type")
	info.ChecksumType = checksum.TypeFromCode(code)
	if d.err == nil && (!info.ChecksumType.Valid() || info.ChecksumType == checksum.None) {
		d.fail("bad file checksum type %d", code)
	}
	count := d.uvarint("file count")
	if d.err == nil && count > uint64((len(d.b)-d.off)/minFileEntry) {
		d.fail("file count %d exceeds what %d bytes can hold", count, len(d.b)-d.off)
	}
	if d.err != nil {
		return nil, d.err
	}
	info.Files = make([]File, 0, count)
	seen := make(map[string]bool, count)
	for i := uint64(0); i < count && d.err == nil; i++ {
		var f File
		switch kind := d.byte1("file kind"); kind {
		case kindShared:
			f.Shared = true
		case kindPrivate:
		default:
			d.fail("file %d: bad kind %d", i, kind)
		}
		l := d.uvarint("name length")
		if d.err != nil {
			break
		}
		if l == 0 || l > maxNameLen || l > uint64(len(d.b)-d.off) {
			d.fail("file %d: name length %d out of range", i, l)
			break
		}
		f.Name = string(d.b[d.off : d.off+int(l)])
		d.off += int(l)
		f.Size = d.uvarint("file size")
		f.Checksum = d.fixed64("file checksum")
		if d.err != nil {
			break
		}
		if f.Shared {
			if _, size, ok := parseSharedName(f.Name); !ok || size != f.Size {
				d.fail("file %d: %q is not a shared table name for %d bytes", i, f.Name, f.Size)
			}
		} else if !validPrivateName(f.Name) {
			d.fail("file %d: %q is not a private file name", i, f.Name)
		}
		if db := f.DBName(); seen[db] {
			d.fail("file %d: %s listed twice", i, db)
		} else {
			seen[db] = true
		}
		info.Files = append(info.Files, f)
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d bytes after the last file", len(d.b)-d.off)
	}
	if d.err != nil {
		return nil, d.err
	}
	return info, nil
}
