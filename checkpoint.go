package vigil

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/internal/vfsutil"
	"github.com/vigildb/vigil/wal"
)

// Checkpoint writes a consistent point-in-time copy of the DB into dir,
// which must not exist yet, and which then opens as a DB of its own. It
// works while writes go on: the copy holds exactly the writes visible when
// Checkpoint began.
//
// Tables are hard-linked where the file system allows it (they are never
// modified), copied otherwise. The writes not yet in tables come from the
// live WALs: their batches up to the checkpoint's sequence number are
// copied into one new WAL. A fresh MANIFEST names the tables and that WAL.
// Everything is written into a directory of its own beside dir (dir plus
// ".tmp-" and 16 random hex digits, created by this call), synced, and
// renamed to dir at the end unless dir exists by then: a crash leaves
// either no checkpoint or a whole one, perhaps with that temporary
// directory beside it, which nothing else removes (Checkpoint never
// removes what it did not create). Of concurrent Checkpoints to one dir,
// exactly one succeeds; the others return ErrInvalidArgument. With
// DisableWAL the memtables are flushed first.
func (d *DB) Checkpoint(dir string) error {
	if d.closed.Load() {
		return ErrClosed
	}
	if d.opts.ReadOnly {
		return fmt.Errorf("%w: Checkpoint of a DB opened ReadOnly is not supported", ErrReadOnly)
	}
	fs := d.fs
	if _, err := fs.Stat(dir); err == nil {
		return base.InvalidArgumentErrorf("Checkpoint: %s already exists", dir)
	}
	if d.opts.DisableWAL {
		if err := d.flushAndWait(false); err != nil {
			return fmt.Errorf("Checkpoint: flush: %w", err)
		}
	}
	p, err := d.checkpointPoint()
	if err != nil {
		return err
	}
	defer p.release(d)
	snap, v := p.snap, p.v

	tmp, err := vfsutil.MkdirTemp(fs, dir)
	if err != nil {
		return fmt.Errorf("Checkpoint: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = fs.RemoveAll(tmp)
		}
	}()
	// An ingestion installs its tables before it publishes their seqnum:
	// one not visible at snap is not part of the checkpoint.
	visible := func(f *manifest.FileMetadata) bool { return f.GlobalSeqNum <= snap }
	for _, files := range v.Levels {
		for _, f := range files {
			if !visible(f) {
				continue
			}
			src := makeFilename(fs, d.dirname, fileTypeTable, f.FileNum)
			dst := makeFilename(fs, tmp, fileTypeTable, f.FileNum)
			if err := vfs.LinkOrCopy(fs, src, dst); err != nil {
				return fmt.Errorf("Checkpoint: %s: %w", src, err)
			}
		}
	}
	walNum, manifestNum, tempNum := p.nextFile, p.nextFile+1, p.nextFile+2
	if err := d.checkpointWAL(tmp, walNum, p.wals, p.liveWAL, p.liveEnd, p.lastSeq, snap); err != nil {
		return fmt.Errorf("Checkpoint: %w", err)
	}
	if err := d.checkpointManifest(tmp, v, visible, walNum, manifestNum, tempNum, p.lastSeq); err != nil {
		return fmt.Errorf("Checkpoint: %w", err)
	}
	if err := vfsutil.RenameNoReplace(fs, tmp, dir); err != nil {
		if errors.Is(err, vfsutil.ErrExists) {
			return base.InvalidArgumentErrorf("Checkpoint: %s already exists", dir)
		}
		return fmt.Errorf("Checkpoint: %w", err)
	}
	ok = true
	d.log.Infof("checkpoint %s: %d tables, seq %d", dir, v.NumFiles(), snap)
	return nil
}

// checkpointAt is a checkpoint's consistent point: the visible seqnum, the
// current version (its tables stay while it is referenced), the version
// set's numbers, and the WALs from the log number up to the live one,
// which deleteObsoleteFiles keeps while they are copied (walSet.keep).
type checkpointAt struct {
	snap              uint64
	v                 *manifest.Version
	lastSeq, nextFile uint64
	wals              []uint64
	liveWAL           uint64 // the WAL being written, read up to liveEnd
	liveEnd           int64
}

// checkpointPoint takes the consistent point under commitMu (no commit in
// flight) and d.mu, and hands every batch at or below it to the WAL file so
// that reading the WALs sees them. The caller releases it.
func (d *DB) checkpointPoint() (*checkpointAt, error) {
	d.commitMu.Lock()
	if d.closed.Load() {
		d.commitMu.Unlock()
		return nil, ErrClosed
	}
	walW := d.wal.live
	p := &checkpointAt{}
	// Every batch at or below snap is in the WALs up to walW's current
	// end. Past it walW is being written while it is read (and, being
	// written over its zero reserve, can show data after bytes not yet
	// written), so the copy reads it only up to here.
	if walW != nil {
		p.liveWAL, p.liveEnd = walW.LogNumber(), walW.Size()
	}
	d.mu.Lock()
	p.snap = d.visibleSeq.Load()
	p.v = d.vs.current
	p.v.Ref()
	p.lastSeq, p.nextFile = d.vs.lastSeq, d.vs.nextFileNum
	// The WALs from the log number up to the live one. Not a newer one: the
	// spare being prepared holds no batch at or below snap, and once a
	// rotation makes it live it is written while the copy would read it
	// without a limit, over its zero reserve ("zeroed bytes followed by
	// data", vigil stress --crash=inprocess with 64 KiB write buffers).
	for _, n := range d.wal.all {
		if n >= d.vs.logNumber && (walW == nil || n <= p.liveWAL) {
			p.wals = append(p.wals, n)
		}
	}
	d.wal.keep++
	d.mu.Unlock()
	d.commitMu.Unlock()
	// Every batch at or below snap was appended to the WAL before it became
	// visible: hand the appended bytes to the file so that reading it sees
	// them.
	if walW != nil {
		if err := walW.Flush(); err != nil && !errors.Is(err, base.ErrClosed) {
			p.release(d)
			return nil, fmt.Errorf("Checkpoint: %w", err)
		}
	}
	return p, nil
}

// release gives back the point's version and WALs.
func (p *checkpointAt) release(d *DB) {
	p.v.Unref()
	d.mu.Lock()
	d.wal.keep--
	d.mu.Unlock()
}

// checkpointManifest writes the checkpoint's MANIFEST (the visible tables of
// v, WAL walNum, the next file number above tempNum) with its CURRENT and an
// OPTIONS file into tmp, and syncs tmp.
func (d *DB) checkpointManifest(tmp string, v *manifest.Version, visible func(*manifest.FileMetadata) bool, walNum, manifestNum, tempNum, lastSeq uint64) error {
	fs := d.fs
	// A new DB, with an id of its own; its tables keep the identities
	// they were written with.
	e := &manifest.VersionEdit{FormatVersion: d.vs.formatVersion, Comparer: d.cmp.Name, Merger: d.vs.merger}
	e.SetDBID(base.NewRandomID())
	e.SetLogNumber(walNum)
	e.SetNextFileNum(tempNum + 1)
	e.SetLastSeq(lastSeq)
	for l, files := range v.Levels {
		for _, f := range files {
			if visible(f) {
				e.Added = append(e.Added, manifest.NewFile{Level: l, Meta: f})
			}
		}
	}
	tmpDir, err := fs.OpenDir(tmp)
	if err != nil {
		return err
	}
	defer tmpDir.Close()
	vs := versionSet{fs: fs, dirname: tmp, dataDir: tmpDir, cksum: d.cksum}
	w, err := vs.writeManifest(manifestNum, tempNum, e.Encode(nil))
	if err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := vfsutil.WriteFile(fs, makeFilename(fs, tmp, fileTypeOptions, tempNum+1),
		[]byte("# Vigil options, written by Checkpoint\n"+d.opts.String())); err != nil {
		return err
	}
	if err := tmpDir.Sync(); err != nil {
		return err
	}
	return nil
}

// checkpointWAL writes WAL num in dir holding the batches of the live WALs
// (oldest first) with seqnums in (lastSeq, snap]: those not in the tables
// yet, and no later one. WAL liveWAL, the one being written, is read only
// up to liveEnd.
func (d *DB) checkpointWAL(dir string, num uint64, wals []uint64, liveWAL uint64, liveEnd int64, lastSeq, snap uint64) error {
	fs := d.fs
	name := makeFilename(fs, dir, fileTypeLog, num)
	f, err := fs.Create(name)
	if err != nil {
		return err
	}
	w, err := wal.NewWriter(f, name, num, d.cksum)
	if err != nil {
		f.Close()
		return err
	}
	if _, err := w.WriteRecord(walPreamble{lastSeq: lastSeq}.encode()); err != nil {
		w.Close()
		return err
	}
	for _, n := range wals {
		src := makeFilename(fs, d.dirname, fileTypeLog, n)
		limit := int64(-1)
		if n == liveWAL {
			limit = liveEnd
		}
		if err := copyBatches(fs, src, limit, w, lastSeq, snap); err != nil {
			w.Close()
			return fmt.Errorf("copying WAL %s: %w", src, err)
		}
	}
	return w.Close() // syncs
}

// copyBatches appends to w the batch records of WAL src whose seqnums lie
// in (lo, hi]. The live WAL may be appended to while it is read: limit
// (-1: none) is an end of it that its records up to hi lie before, and
// that it had been handed to the file up to when the copy began.
func copyBatches(fs vfs.FS, src string, limit int64, w *wal.Writer, lo, hi uint64) error {
	f, err := fs.Open(src)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	defer f.Close()
	var in io.Reader = f
	if limit >= 0 {
		in = io.NewSectionReader(f, 0, limit)
	}
	r, err := wal.NewReader(in, src, wal.TolerateCorruptedTailRecords)
	if err != nil {
		return err
	}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if isWALMeta(rec) {
			// An ingestion's seqnums in (lo, hi] keep the copy's seqnums
			// continuous, as its batches do; other meta records belong to
			// the source's WAL chain.
			if m, err := decodeWALMeta(rec, src); err == nil && m.kind == walMetaIngest && m.firstSeq <= hi && m.lastSeq > lo {
				if _, err := w.WriteRecord(rec); err != nil {
					return err
				}
			}
			continue
		}
		br, err := newBatchReader(rec, src)
		if err != nil {
			return err
		}
		if br.count == 0 || br.seq > hi {
			continue
		}
		if br.seq+uint64(br.count)-1 <= lo {
			continue
		}
		if _, err := w.WriteRecord(rec); err != nil {
			return err
		}
	}
}
