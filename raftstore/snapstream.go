package raftstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/vfsutil"
)

// The snapshot stream, version 1: the files of a Vigil checkpoint, one
// after the other.
//
//	magic "VIGILSNP" | version u8 (1)
//	file*            'F' | uvarint len | name | uvarint size | size bytes | crc u32
//	end              'E' | uvarint file count | crc u32
//
// Each crc (big-endian CRC-32C) covers every byte of the stream before it,
// the earlier crcs included, so a flipped name, size or content byte fails
// at the next crc, before any file of a damaged stream is used. Names are
// plain file names (no separators, not "." or ".."), at most 255 bytes.
const (
	snapMagic     = "VIGILSNP"
	snapFormatV1  = 1
	snapFileTag   = 'F'
	snapEndTag    = 'E'
	maxSnapName   = 255
	maxSnapFiles  = 1 << 20
	snapCopyChunk = 256 << 10
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// writeSnapshot streams the files of directory dir of fs to w. It returns
// the number of bytes written.
func writeSnapshot(w io.Writer, fs vfs.FS, dir string) (int64, error) {
	names, err := fs.List(dir)
	if err != nil {
		return 0, fmt.Errorf("listing %s: %w", dir, err)
	}
	slices.Sort(names)
	sw := &snapWriter{w: bufio.NewWriterSize(w, snapCopyChunk), crc: crc32.New(crcTable)}
	sw.write([]byte(snapMagic))
	sw.write([]byte{snapFormatV1})
	var count uint64
	for _, name := range names {
		if err := checkSnapName(name); err != nil {
			return sw.n, err
		}
		path := fs.PathJoin(dir, name)
		f, err := fs.Open(path)
		if err != nil {
			return sw.n, fmt.Errorf("opening %s: %w", path, err)
		}
		info, err := f.Stat()
		if err == nil && info.IsDir() {
			err = fmt.Errorf("%s is a directory; a checkpoint holds only files", path)
		}
		if err != nil {
			f.Close()
			return sw.n, err
		}
		size := info.Size()
		sw.write([]byte{snapFileTag})
		sw.uvarint(uint64(len(name)))
		sw.write([]byte(name))
		sw.uvarint(uint64(size))
		if sw.err == nil {
			var copied int64
			copied, err = io.CopyN(sw, f, size)
			if err != nil && sw.err == nil {
				err = fmt.Errorf("reading %s (%d of %d bytes): %w", path, copied, size, err)
			}
		}
		f.Close()
		if err != nil {
			return sw.n, err
		}
		sw.sum()
		count++
	}
	sw.write([]byte{snapEndTag})
	sw.uvarint(count)
	sw.sum()
	if sw.err == nil {
		sw.err = sw.w.Flush()
	}
	if sw.err != nil {
		return sw.n, fmt.Errorf("writing the snapshot stream: %w", sw.err)
	}
	return sw.n, nil
}

type snapWriter struct {
	w   *bufio.Writer
	crc hash.Hash32
	n   int64
	err error
	tmp [binary.MaxVarintLen64]byte
}

func (s *snapWriter) Write(p []byte) (int, error) {
	s.write(p)
	if s.err != nil {
		return 0, s.err
	}
	return len(p), nil
}

func (s *snapWriter) write(p []byte) {
	if s.err != nil {
		return
	}
	s.crc.Write(p)
	var n int
	n, s.err = s.w.Write(p)
	s.n += int64(n)
}

func (s *snapWriter) uvarint(v uint64) {
	s.write(binary.AppendUvarint(s.tmp[:0], v))
}

func (s *snapWriter) sum() {
	s.write(binary.BigEndian.AppendUint32(s.tmp[:0], s.crc.Sum32()))
}

// checkSnapName refuses a name that is not a plain file name.
func checkSnapName(name string) error {
	if name == "" || len(name) > maxSnapName || name == "." || name == ".." ||
		strings.ContainsAny(name, "/\\\x00") {
		return corruptf("snapshot file name %q is not a plain file name of 1 to %d bytes", name, maxSnapName)
	}
	return nil
}

// readSnapshot reads a stream written by writeSnapshot from r and creates
// its files in directory dir of fs (which must exist), each synced. It
// returns the number of files. A stream that does not check out is an
// error wrapping vigil.ErrCorruption; it may have created some files, which
// the caller removes with dir. Memory stays bounded whatever the stream
// says: contents are copied through a fixed buffer.
func readSnapshot(r io.Reader, fs vfs.FS, dir string) (int, error) {
	sr := &snapReader{r: bufio.NewReaderSize(r, snapCopyChunk), crc: crc32.New(crcTable)}
	var hdr [len(snapMagic) + 1]byte
	if err := sr.full(hdr[:], "header"); err != nil {
		return 0, err
	}
	if string(hdr[:len(snapMagic)]) != snapMagic {
		return 0, corruptf("snapshot stream starts with %q, not %q", hdr[:len(snapMagic)], snapMagic)
	}
	if v := hdr[len(snapMagic)]; v != snapFormatV1 {
		return 0, corruptf("snapshot stream format version %d is unknown (this build reads version %d)", v, snapFormatV1)
	}
	seen := map[string]bool{}
	for count := 0; ; count++ {
		tag, err := sr.byte("record tag")
		if err != nil {
			return count, err
		}
		switch tag {
		case snapEndTag:
			n, err := sr.uvarint("file count")
			if err != nil {
				return count, err
			}
			if err := sr.check("end"); err != nil {
				return count, err
			}
			if n != uint64(count) {
				return count, corruptf("snapshot stream ends claiming %d files after %d", n, count)
			}
			if _, err := sr.r.ReadByte(); err != io.EOF {
				if err == nil {
					return count, corruptf("snapshot stream has bytes after its end record")
				}
				return count, fmt.Errorf("reading the snapshot stream: %w", err)
			}
			return count, nil
		case snapFileTag:
		default:
			return count, corruptf("snapshot stream record %d has tag %#x", count, tag)
		}
		if count >= maxSnapFiles {
			return count, corruptf("snapshot stream holds more than %d files", maxSnapFiles)
		}
		n, err := sr.uvarint("name length")
		if err != nil {
			return count, err
		}
		if n == 0 || n > maxSnapName {
			return count, corruptf("snapshot file %d: name of %d bytes", count, n)
		}
		var nameBuf [maxSnapName]byte
		if err := sr.full(nameBuf[:n], "file name"); err != nil {
			return count, err
		}
		name := string(nameBuf[:n])
		if err := checkSnapName(name); err != nil {
			return count, err
		}
		if seen[name] {
			return count, corruptf("snapshot stream holds %q twice", name)
		}
		seen[name] = true
		size, err := sr.uvarint("file size")
		if err != nil {
			return count, err
		}
		if size > 1<<62 {
			return count, corruptf("snapshot file %q: size %d", name, size)
		}
		if err := sr.copyFile(fs, fs.PathJoin(dir, name), int64(size)); err != nil {
			return count, err
		}
		if err := sr.check("file " + name); err != nil {
			return count, err
		}
	}
}

type snapReader struct {
	r   *bufio.Reader
	crc hash.Hash32
	tmp [4]byte
}

// wrap turns a short stream into a corruption error.
func (s *snapReader) wrap(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corruptf("snapshot stream ends inside its %s", what)
	}
	return fmt.Errorf("reading the snapshot stream's %s: %w", what, err)
}

func (s *snapReader) full(p []byte, what string) error {
	if _, err := io.ReadFull(s.r, p); err != nil {
		return s.wrap(err, what)
	}
	s.crc.Write(p)
	return nil
}

func (s *snapReader) byte(what string) (byte, error) {
	b, err := s.r.ReadByte()
	if err != nil {
		return 0, s.wrap(err, what)
	}
	s.tmp[0] = b
	s.crc.Write(s.tmp[:1])
	return b, nil
}

func (s *snapReader) uvarint(what string) (uint64, error) {
	var buf [binary.MaxVarintLen64]byte
	for i := range buf {
		b, err := s.byte(what)
		if err != nil {
			return 0, err
		}
		buf[i] = b
		if b < 0x80 {
			v, n := binary.Uvarint(buf[:i+1])
			if n <= 0 {
				break
			}
			return v, nil
		}
	}
	return 0, corruptf("snapshot stream: bad uvarint in its %s", what)
}

// check reads a crc and compares it with the stream so far.
func (s *snapReader) check(what string) error {
	want := s.crc.Sum32()
	if _, err := io.ReadFull(s.r, s.tmp[:]); err != nil {
		return s.wrap(err, what+" checksum")
	}
	s.crc.Write(s.tmp[:])
	if got := binary.BigEndian.Uint32(s.tmp[:]); got != want {
		return corruptf("snapshot stream: %s: checksum %08x, computed %08x", what, got, want)
	}
	return nil
}

// copyFile creates path with the next size bytes of the stream, synced.
func (s *snapReader) copyFile(fs vfs.FS, path string, size int64) error {
	// The checksum sees each byte before the file does: a file may change
	// the buffer it was handed (Pebble's MemFS does in race builds, to
	// catch callers relying on it).
	err := vfsutil.CopyToFile(fs, path, io.TeeReader(s.r, s.crc), size)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return corruptf("snapshot stream ends inside %s (%d bytes)", fs.PathBase(path), size)
	}
	return err
}
