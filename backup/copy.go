package backup

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/sst"
	"github.com/vigildb/vigil/wal"
)

// copyFile copies src to dst (created or truncated), computing the
// whole-file checksum of what it writes, and syncs dst. tap, if not nil,
// sees every chunk with its offset. On error dst is removed.
func (e *Engine) copyFile(src, dst string, tap func(off uint64, p []byte)) (size, sum uint64, err error) {
	fs := e.fs
	r, err := fs.Open(src)
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	w, err := fs.Create(dst)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if err != nil {
			w.Close()
			_ = fs.Remove(dst)
		}
	}()
	e.dig.Reset(fileChecksumType)
	for {
		n, rerr := r.Read(e.buf)
		if n > 0 {
			p := e.buf[:n]
			e.dig.Write(p)
			if tap != nil {
				tap(size, p)
			}
			if _, err := w.Write(p); err != nil {
				return 0, 0, fmt.Errorf("writing %s: %w", dst, err)
			}
			size += uint64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, 0, fmt.Errorf("reading %s: %w", src, rerr)
		}
	}
	if err := w.Sync(); err != nil {
		return 0, 0, fmt.Errorf("syncing %s: %w", dst, err)
	}
	if err := w.Close(); err != nil {
		return 0, 0, fmt.Errorf("closing %s: %w", dst, err)
	}
	return size, e.dig.Sum64(), nil
}

// copyTable copies the checkpoint's table src to dst and checks the copy
// against the table's MANIFEST entry t: its size, its whole-file checksum
// (which covers the bytes before the properties block) computed over the
// bytes written, and, by re-opening the copy, the checksums of the blocks
// from the properties block on. propsOff is where src's properties block
// starts (tableChecksumEnd, which the caller ran on src). It returns the
// copy's whole-file checksum.
func (e *Engine) copyTable(src, dst string, t *manifest.FileMetadata, propsOff uint64) (uint64, error) {
	var pd *checksum.Digest
	if t.ChecksumType != checksum.None {
		pd = checksum.NewDigest(t.ChecksumType)
	}
	size, sum, err := e.copyFile(src, dst, func(off uint64, p []byte) {
		if pd != nil && off < propsOff {
			pd.Write(p[:min(uint64(len(p)), propsOff-off)])
		}
	})
	if err != nil {
		return 0, err
	}
	fail := func(err error) (uint64, error) {
		_ = e.fs.Remove(dst)
		return 0, err
	}
	if size != t.Size {
		return fail(fmt.Errorf("%w: copying table %s: %d bytes, the MANIFEST says %d", vigil.ErrCorruption, src, size, t.Size))
	}
	if pd != nil && pd.Sum64() != t.FileChecksum {
		return fail(fmt.Errorf("%w: copying table %s: whole-file checksum %#016x, the MANIFEST recorded %#016x", vigil.ErrCorruption, src, pd.Sum64(), t.FileChecksum))
	}
	end, _, err := tableChecksumEnd(e.fs, dst, t, e.cmp)
	if err != nil {
		return fail(fmt.Errorf("re-reading the copy of %s: %w", src, err))
	}
	if end != propsOff {
		return fail(fmt.Errorf("%w: the copy %s of %s has its properties block at %d, not %d", vigil.ErrCorruption, dst, src, end, propsOff))
	}
	return sum, nil
}

// tableChecksumEnd opens table name, which verifies the checksums of its
// footer, index, metaindex, filter, range-del and properties blocks and
// checks its size, identity, checksum type and stored whole-file checksum
// against the MANIFEST's entry t; it returns the offset of its properties
// block (where the range of the whole-file checksum ends) and its footer's
// context value. cmp is the DB's comparer (nil: the default).
func tableChecksumEnd(fs vfs.FS, name string, t *manifest.FileMetadata, cmp *vigil.Comparer) (propsOff uint64, ctx uint32, err error) {
	r, err := sst.OpenFile(fs, name, sst.ReaderOptions{FileNum: t.FileNum, Expect: t.Expected(), Comparer: cmp})
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	for _, b := range r.Layout() {
		if b.Kind == sst.BlockKindProperties {
			return b.Offset, r.BaseContext(), nil
		}
	}
	return 0, 0, fmt.Errorf("%w: table %s has no properties block", vigil.ErrCorruption, name)
}

// readTables returns the tables of the DB in dir from its MANIFEST (read
// as Open reads it, but strictly: a checkpoint's MANIFEST has no torn
// tail), in file-number order.
func readTables(fs vfs.FS, dir string) ([]*manifest.FileMetadata, error) {
	v, err := manifest.ReadVersion(fs, dir, wal.AbsoluteConsistency)
	if err != nil {
		return nil, err
	}
	var out []*manifest.FileMetadata
	for _, files := range v.Levels {
		out = append(out, files...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FileNum < out[j].FileNum })
	return out, nil
}

// dbDigest opens the DB in dir read-only (with the strictest WAL recovery
// mode: a restored or staged DB has no torn tail) and returns its visible
// sequence number and the digest of all its live pairs. cmp is its
// comparer (nil: the default).
func dbDigest(fs vfs.FS, dir string, cmp *vigil.Comparer) (uint64, vigil.RangeDigest, error) {
	db, err := vigil.Open(dir, &vigil.Options{FS: fs, ReadOnly: true, BlockCacheSize: -1, WALRecoveryMode: vigil.WALAbsoluteConsistency, Comparer: cmp})
	if err != nil {
		return 0, vigil.RangeDigest{}, err
	}
	seq := db.Metrics().VisibleSeq
	g, err := db.Digest(nil, nil)
	if cerr := db.Close(); err == nil && cerr != nil && !errors.Is(cerr, vigil.ErrClosed) {
		err = cerr
	}
	return seq, g, err
}
