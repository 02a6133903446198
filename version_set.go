package vigil

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/internal/vfsutil"
	"github.com/vigildb/vigil/wal"
)

// versionSet owns the current version and the MANIFEST that makes it
// durable. All methods run under DB.mu (or during Open, single-threaded);
// logAndApply releases it while it writes.
type versionSet struct {
	fs      vfs.FS
	dirname string
	dataDir vfs.File
	cksum   checksum.Type
	cmp     *base.Comparer // the DB's, resolved
	log     infoLogger

	current     *manifest.Version
	nextFileNum uint64
	// logNumber: every WAL numbered below it has been flushed.
	logNumber uint64
	// lastSeq: every batch at or below it is in an SST (WAL replay skips
	// them). Ingested tables may hold larger seqnums (see ingest.go).
	lastSeq uint64
	// dbID is the DB's id (see base.TableIdentity), made when the DB was
	// created and kept in the first record of every MANIFEST; set before
	// Open returns and never changed.
	dbID [16]byte
	// formatVersion is the DB's format version (manifest.FormatVersion),
	// recorded in the first record of every MANIFEST; set before Open
	// returns.
	formatVersion uint64
	// merger is the merge operator's name the DB records ("": none), in
	// the first record of every MANIFEST.
	merger string

	manifest     *wal.Writer
	manifestNum  uint64
	manifestSize int64

	onObsolete func([]*manifest.FileMetadata)
	// mu is the DB's mutex, which logAndApply releases during I/O; cond
	// (on mu) and busy serialize edits.
	mu   *sync.Mutex
	cond *sync.Cond
	busy bool
	// obsoleteManifests are MANIFESTs replaced by a newer one, to delete.
	obsoleteManifests []uint64
}

// maxManifestSize is the size at which a new MANIFEST (starting with a
// snapshot of the current version) replaces the old one.
const maxManifestSize = 16 << 20

func (vs *versionSet) allocFileNum() uint64 {
	n := vs.nextFileNum
	vs.nextFileNum++
	return n
}

// load replays the MANIFEST named by CURRENT (manifest.Load, which checks
// CURRENT, the MANIFEST's header, every record and the initial one). A
// torn last record (a crash while appending an edit, which was therefore
// never acted upon) is tolerated; any other damage fails Open, because
// silently dropping an edit could make live files look obsolete.
func (vs *versionSet) load() error {
	st, err := manifest.Load(vs.fs, vs.dirname, wal.TolerateCorruptedTailRecords, vs.cmp, vs.onObsolete)
	if err != nil {
		return err
	}
	if n := st.Stats.TailDroppedBytes; n > 0 {
		// A crash while an edit was appended: the edit was never acted
		// upon, so the files it would have made obsolete are still here.
		// Open checks that (every live table present, the WAL chain
		// intact, see recovery.go) before trusting the shorter history.
		vs.log.Infof("%s: dropped a torn last edit (%d bytes)", st.ManifestName, n)
	}
	// lastSeq stays what the edits say (WAL replay skips the batches at
	// or below it), not the tables' largest seqnum: an ingested table, or
	// a compaction output holding its entries, may be above batches that
	// are only in a WAL. Recovery puts new seqnums above every table
	// (finish).
	vs.logNumber, vs.nextFileNum, vs.lastSeq, vs.dbID = st.LogNumber, st.NextFileNum, st.LastSeq, st.DBID
	if vs.dbID == [16]byte{} {
		// A DB from before DB ids: it gets one now, which the next
		// MANIFEST records. Its older tables keep their zero identity.
		vs.dbID = base.NewRandomID()
	}
	if vs.manifestNum < st.ManifestNum {
		vs.manifestNum = st.ManifestNum
	}
	vs.current = st.Version
	vs.formatVersion, vs.merger = st.FormatVersion, st.Merger
	return nil
}

// snapshotEdit is an edit that recreates the current state from nothing:
// the first record of every new MANIFEST.
func (vs *versionSet) snapshotEdit() *manifest.VersionEdit {
	e := &manifest.VersionEdit{FormatVersion: vs.formatVersion, Comparer: vs.cmp.Name, Merger: vs.merger}
	e.SetDBID(vs.dbID)
	e.SetLogNumber(vs.logNumber)
	e.SetNextFileNum(vs.nextFileNum)
	e.SetLastSeq(vs.lastSeq)
	if vs.current != nil {
		for l, files := range vs.current.Levels {
			for _, f := range files {
				e.Added = append(e.Added, manifest.NewFile{Level: l, Meta: f})
			}
		}
	}
	return e
}

// writeManifest creates MANIFEST-num holding the encoded snapshot rec,
// syncs it, and points CURRENT at it (write temp, fsync, rename, fsync the
// directory). File I/O only: called without d.mu.
func (vs *versionSet) writeManifest(num, tempNum uint64, rec []byte) (*wal.Writer, error) {
	name := makeFilename(vs.fs, vs.dirname, fileTypeManifest, num)
	f, err := vs.fs.Create(name)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", name, err)
	}
	w, err := wal.NewWriter(f, name, num, vs.cksum)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("creating %s: %w", name, err)
	}
	// Flushes and compactions sync the MANIFEST: background fsyncs.
	w.SetBackground()
	if _, err := w.WriteRecord(rec); err != nil {
		w.Close()
		return nil, fmt.Errorf("writing %s: %w", name, err)
	}
	if err := w.Sync(); err != nil {
		w.Close()
		return nil, fmt.Errorf("syncing %s: %w", name, err)
	}
	if err := setCurrentFile(vs.fs, vs.dirname, vs.dataDir, num, tempNum); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// setCurrentFile atomically points CURRENT at MANIFEST-num, through the
// temporary file tempNum (a number the version set allocated: no one else
// holds it).
func setCurrentFile(fs vfs.FS, dirname string, dataDir vfs.File, manifestNum, tempNum uint64) error {
	tmp := makeFilename(fs, dirname, fileTypeTemp, tempNum)
	content := fmt.Sprintf("MANIFEST-%06d\n", manifestNum)
	if err := vfsutil.ReplaceFile(fs, tmp, makeFilename(fs, dirname, fileTypeCurrent, 0), []byte(content), dataDir); err != nil {
		return fmt.Errorf("updating CURRENT: %w", err)
	}
	return nil
}

// logAndApply makes e durable in the MANIFEST and installs the resulting
// version. On error nothing changes in memory; the caller decides whether
// the error is fatal (it is for flushes and compactions: the DB goes
// read-only rather than risk a MANIFEST that disagrees with the files).
//
// It is called with d.mu held and returns with it held, but releases it
// while it writes and syncs: no file I/O under the DB mutex. Edits are
// serialized (busy, waited for on cond, which is on d.mu), so the version e
// is built on is still current when it is installed; readers and writers
// meanwhile see the previous version, which is consistent.
func (vs *versionSet) logAndApply(e *manifest.VersionEdit) error {
	return vs.logAndApplyFunc(func(*manifest.Version) (*manifest.VersionEdit, error) { return e, nil })
}

// logAndApplyFunc is logAndApply of the edit build returns. build runs
// under d.mu once no other edit is in flight, with the version the edit
// will apply to, so an edit that depends on the LSM's shape (an
// ingestion's level placement) is computed on exactly that shape.
func (vs *versionSet) logAndApplyFunc(build func(base *manifest.Version) (*manifest.VersionEdit, error)) error {
	for vs.busy {
		vs.cond.Wait()
	}
	vs.busy = true
	defer func() {
		vs.busy = false
		vs.cond.Broadcast()
	}()
	e, err := build(vs.current)
	if err != nil {
		return err
	}
	if e.HasLogNumber && e.LogNumber < vs.logNumber {
		return fmt.Errorf("vigil: internal error: log number moving back from %d to %d", vs.logNumber, e.LogNumber)
	}
	b := manifest.NewBuilder(vs.cmp, vs.current)
	if err := b.Apply(e); err != nil {
		return err
	}
	nv, err := b.Build(vs.onObsolete)
	if err != nil {
		return err
	}
	lastSeq := vs.lastSeq
	if e.HasLastSeq && e.LastSeq > lastSeq {
		lastSeq = e.LastSeq
	}
	e.SetLastSeq(lastSeq)
	// A new MANIFEST starts with a snapshot of the state before e.
	var newNum, tempNum uint64
	var snapshot []byte
	if vs.manifest == nil || vs.manifestSize >= maxManifestSize {
		newNum, tempNum = vs.allocFileNum(), vs.allocFileNum()
		snapshot = vs.snapshotEdit().Encode(nil)
	}
	e.SetNextFileNum(vs.nextFileNum)
	rec := e.Encode(nil)
	w, oldNum := vs.manifest, vs.manifestNum

	vs.mu.Unlock()
	var oldW *wal.Writer
	if snapshot != nil {
		nw, err := vs.writeManifest(newNum, tempNum, snapshot)
		if err != nil {
			vs.mu.Lock()
			nv.Release()
			return err
		}
		oldW, w = w, nw
	}
	_, err = w.WriteRecord(rec)
	if err == nil {
		err = w.Sync()
	}
	if oldW != nil {
		if cerr := oldW.Close(); cerr != nil {
			vs.log.Errorf("closing old MANIFEST-%06d: %v", oldNum, cerr)
		}
	}
	vs.mu.Lock()

	if snapshot != nil {
		vs.manifest, vs.manifestNum, vs.manifestSize = w, newNum, int64(len(snapshot))
		if oldW != nil || oldNum > 0 {
			vs.obsoleteManifests = append(vs.obsoleteManifests, oldNum)
		}
		vs.log.Infof("new MANIFEST-%06d (%d files, next file %d, last seq %d, log %d)",
			newNum, vs.current.NumFiles(), vs.nextFileNum, vs.lastSeq, vs.logNumber)
	}
	if err != nil {
		nv.Release()
		return fmt.Errorf("writing MANIFEST-%06d: %w", vs.manifestNum, err)
	}
	vs.manifestSize += int64(len(rec))
	if e.HasLogNumber {
		vs.logNumber = e.LogNumber
	}
	vs.lastSeq = lastSeq
	nv.Ref()
	old := vs.current
	vs.current = nv
	if old != nil {
		old.Unref()
	}
	return nil
}

// close closes the MANIFEST writer.
func (vs *versionSet) close() error {
	if vs.manifest == nil {
		return nil
	}
	err := vs.manifest.Close()
	vs.manifest = nil
	if err != nil {
		return fmt.Errorf("closing MANIFEST-%06d: %w", vs.manifestNum, err)
	}
	return nil
}

// dbExists reports whether a DB exists in dirname (CURRENT is present).
func dbExists(fs vfs.FS, dirname string) (bool, error) {
	_, err := fs.Stat(makeFilename(fs, dirname, fileTypeCurrent, 0))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return false, err
}
