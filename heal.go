package vigil

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/sst"
	"github.com/vigildb/vigil/wal"
)

// Healing from a backup. Tables are immutable and a backup (package
// backup) keeps each table it holds under shared/ with the table's file
// number, size and whole-file checksum in its name: a live table that is
// damaged or missing can be replaced by the identical copy, losing nothing.
// A copy is used only if it is that table: it opens with the MANIFEST's
// record of the table (size, identity, whole-file checksum; sst.Expected)
// and every block and the whole-file checksum verify. It is copied into the
// DB directory under a temporary name, synced, renamed over the table's
// name and the directory synced; the table cache then drops its reader, so
// reads from then on open the healed file.
//
// The backup directory is read without its lock: a backup GC removing the
// copy meanwhile makes the heal fail (the copy is checked after it is
// copied), never succeed with something else.

// ErrNoBackupCopy is returned (wrapped) when the backup directory holds no
// copy of a table that verifies.
var ErrNoBackupCopy = errors.New("vigil: no verified copy of the table in the backup")

// backupCandidates lists the files of backupDir/shared that may be table
// f: the same number, size and whole-file checksum (backup's sharedName).
func backupCandidates(fs vfs.FS, backupDir string, f *manifest.FileMetadata) ([]string, error) {
	names, err := fs.List(fs.PathJoin(backupDir, "shared"))
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("%06d_%d_%016x_", f.FileNum, f.Size, f.FileChecksum)
	var out []string
	for _, n := range names {
		if len(n) > len(prefix) && n[:len(prefix)] == prefix && filepath.Ext(n) == ".sst" {
			out = append(out, fs.PathJoin(backupDir, "shared", n))
		}
	}
	return out, nil
}

// healTable replaces table f of the DB in dir on fs by a verified copy
// from backupDir. It does not touch a table cache; the caller evicts.
func healTable(fs vfs.FS, dir string, dataDir vfs.File, backupDir string, f *manifest.FileMetadata, cmp *base.Comparer) error {
	cands, err := backupCandidates(fs, backupDir, f)
	if err != nil {
		return fmt.Errorf("healing table %06d from %s: %w", f.FileNum, backupDir, err)
	}
	name := makeFilename(fs, dir, fileTypeTable, f.FileNum)
	tmp := name + ".heal"
	var errs []error
	for _, c := range cands {
		err := copyVerified(fs, c, tmp, f, cmp)
		if err == nil {
			if err = fs.Rename(tmp, name); err == nil {
				err = dataDir.Sync()
			}
			if err == nil {
				return nil
			}
		}
		_ = fs.Remove(tmp)
		errs = append(errs, fmt.Errorf("%s: %w", c, err))
	}
	return fmt.Errorf("healing table %06d from %s: %w", f.FileNum, backupDir, errors.Join(append([]error{ErrNoBackupCopy}, errs...)...))
}

// copyVerified copies src to dst, syncs it, and checks that dst is table f
// and verifies whole.
func copyVerified(fs vfs.FS, src, dst string, f *manifest.FileMetadata, cmp *base.Comparer) error {
	in, err := fs.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := fs.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.LimitReader(in, int64(f.Size)+1)); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	r, err := sst.OpenFile(fs, dst, sst.ReaderOptions{FileNum: f.FileNum, GlobalSeqNum: f.GlobalSeqNum, Expect: f.Expected(), Comparer: cmp})
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.Verify(); err != nil {
		return err
	}
	if got := r.Properties().FileChecksum; got != f.FileChecksum {
		return base.CorruptionErrorf("whole-file checksum %#016x, the MANIFEST recorded %#016x", got, f.FileChecksum)
	}
	return nil
}

// heal replaces the open DB's damaged table f from Options.HealFrom (or
// backupDir) and drops the table cache's reader of it.
func (d *DB) heal(backupDir string, f *manifest.FileMetadata) error {
	if err := healTable(d.fs, d.dirname, d.dataDir, backupDir, f, d.cmp); err != nil {
		return err
	}
	d.tableCache.evict(f.FileNum)
	f.ClearDamaged()
	d.stats.scrubHealed.Add(1)
	d.healed = append(d.healed, f.FileNum)
	d.log.Infof("healed table %06d from the backup in %s", f.FileNum, backupDir)
	return nil
}

// HealReport is what HealFromBackup did.
type HealReport struct {
	// Missing are the tables that were absent or of the wrong size and
	// were restored before Open; Damaged those that a scrub pass found
	// damaged and that were replaced.
	Missing, Damaged []uint64
	// Failed are the problems left: tables without a verified copy, and
	// any other damage the pass found.
	Failed error
}

// HealFromBackup heals the DB in dir (which must not be open) from the
// backup directory backupDir: each live table that is missing, of the
// wrong size, or damaged anywhere is replaced by the identical copy the
// backup holds, after verifying it; nothing else is changed and no key is
// lost. Missing tables are restored before the DB is opened (Open needs
// them); then one scrubber pass, unpaced, finds and heals the damaged ones.
// The report lists what was healed and what could not be.
func HealFromBackup(dir, backupDir string, opts *Options) (*HealReport, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	rep := &HealReport{}
	if err := healMissing(o.FS, dir, backupDir, rep, o.Comparer.Resolve()); err != nil {
		return rep, err
	}
	o.HealFrom, o.ScrubInterval, o.ScrubBytesPerSec, o.ReadOnly = backupDir, 0, -1, false
	db, err := Open(dir, &o)
	if err != nil {
		return rep, err
	}
	rep.Failed = db.scrubPass()
	rep.Damaged = db.healedFiles()
	return rep, db.Close()
}

// healMissing restores, before Open, the live tables that are absent or of
// the wrong size.
func healMissing(fs vfs.FS, dir, backupDir string, rep *HealReport, cmp *base.Comparer) error {
	st, err := manifest.Load(fs, dir, wal.TolerateCorruptedTailRecords, cmp, nil)
	if err != nil {
		return fmt.Errorf("vigil: heal %s: %w", dir, err)
	}
	defer st.Version.Unref()
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	var errs []error
	for _, files := range st.Version.Levels {
		for _, f := range files {
			fi, err := fs.Stat(makeFilename(fs, dir, fileTypeTable, f.FileNum))
			if err == nil && uint64(fi.Size()) == f.Size {
				continue
			}
			if err := healTable(fs, dir, d, backupDir, f, cmp); err != nil {
				errs = append(errs, err)
				continue
			}
			rep.Missing = append(rep.Missing, f.FileNum)
		}
	}
	return errors.Join(errs...) // each heal synced the directory
}

// healedFiles returns the tables healed since Open.
func (d *DB) healedFiles() []uint64 {
	d.scrubMu.Lock()
	defer d.scrubMu.Unlock()
	return append([]uint64(nil), d.healed...)
}
