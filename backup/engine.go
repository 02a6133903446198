package backup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/lockfile"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/internal/vfsutil"
)

// ErrLocked is returned by Open when another Engine, in this process or
// another, holds the backup directory.
var ErrLocked = errors.New("backup: backup directory is locked")

// Directory and file names inside a backup directory.
const (
	sharedDir  = "shared"
	privateDir = "private"
	metaDir    = "meta"
	stagingDir = "staging"
	lockName   = "LOCK"
	tmpSuffix  = ".tmp"
	// checkpointName is the checkpoint's directory inside staging/.
	checkpointName = "checkpoint"
)

// fileChecksumType is the checksum type of the whole-file checksums this
// package records: CRC-64/Jones, which detects every burst of up to 64
// flipped bits.
const fileChecksumType = checksum.CRC64

// Options configure an Engine. The zero value (or nil) means the defaults.
type Options struct {
	// FS is the file system of the backup directory and of restore
	// targets (default vfs.Default). Create takes the DB's checkpoint
	// inside the backup directory, so for Create it must also be the file
	// system the DB was opened with.
	FS vfs.FS
	// Comparer is the Options.Comparer of the DBs backed up (nil: the
	// default): Create and Verify open the tables and the DB, and Restore
	// the restored DB, with it, and refuse a DB of another order.
	Comparer *vigil.Comparer
}

// Engine manages one backup directory. It holds the directory's LOCK from
// Open to Close. Its methods are safe for concurrent use; they run one at a
// time.
type Engine struct {
	fs   vfs.FS
	dir  string
	cmp  *vigil.Comparer
	lock *lockfile.Lock

	mu     sync.Mutex
	closed bool
	buf    []byte
	dig    *checksum.Digest

	// Test hooks.
	afterVerify   func() // Restore: between the verification and the copy
	skipPreVerify bool   // Restore: skip the verification before the copy
}

// CreateStats says what Create copied and what it reused.
type CreateStats struct {
	// SharedCopied and SharedBytesCopied count the tables copied into
	// shared/; SharedReused and SharedBytesReused those already there.
	SharedCopied, SharedReused           int
	SharedBytesCopied, SharedBytesReused uint64
	// PrivateFiles and PrivateBytes count the files copied into
	// private/<id>/ (CURRENT, MANIFEST, WAL, OPTIONS).
	PrivateFiles int
	PrivateBytes uint64
}

// GCStats says what GC removed.
type GCStats struct {
	// Files and Bytes count the unreferenced shared tables and leftover
	// files of interrupted operations removed.
	Files int
	Bytes uint64
}

// Open opens the backup directory dir, creating it (with shared/, private/
// and meta/) if needed, and locks it: until Close, a second Open of dir, in
// this process or another, fails with ErrLocked.
func Open(dir string, opts *Options) (*Engine, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	fs := o.FS
	if dir == "" {
		return nil, fmt.Errorf("%w: backup: empty backup directory name", vigil.ErrInvalidArgument)
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("backup: creating %s: %w", dir, err)
	}
	if err := vfsutil.SyncDir(fs, fs.PathDir(dir)); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	lock, err := lockfile.Acquire(fs, dir, fs.PathJoin(dir, lockName))
	if err != nil {
		if errors.Is(err, lockfile.ErrLocked) {
			return nil, fmt.Errorf("%w: %s: %w", ErrLocked, dir, err)
		}
		return nil, fmt.Errorf("backup: locking %s: %w", dir, err)
	}
	e := &Engine{fs: fs, dir: dir, cmp: o.Comparer, lock: lock, buf: make([]byte, 256<<10), dig: checksum.NewDigest(fileChecksumType)}
	for _, sub := range []string{sharedDir, privateDir, metaDir} {
		if err := fs.MkdirAll(e.path(sub), 0o755); err != nil {
			lock.Close()
			return nil, fmt.Errorf("backup: creating %s: %w", e.path(sub), err)
		}
	}
	if err := vfsutil.SyncDir(fs, dir); err != nil {
		lock.Close()
		return nil, fmt.Errorf("backup: %w", err)
	}
	return e, nil
}

// Close releases the backup directory's LOCK. Later calls of any method
// return vigil.ErrClosed.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return vigil.ErrClosed
	}
	e.closed = true
	return e.lock.Close()
}

// Dir returns the backup directory.
func (e *Engine) Dir() string { return e.dir }

func (e *Engine) path(elem ...string) string {
	return e.fs.PathJoin(append([]string{e.dir}, elem...)...)
}

// filePath returns the path of a file of backup id.
func (e *Engine) filePath(id uint64, f File) string {
	if f.Shared {
		return e.path(sharedDir, f.Name)
	}
	return e.path(privateDir, strconv.FormatUint(id, 10), f.Name)
}

func (e *Engine) metaPath(id uint64) string { return e.path(metaDir, strconv.FormatUint(id, 10)) }

func (e *Engine) begin() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return vigil.ErrClosed
	}
	return nil
}

// Create backs up db: it takes a checkpoint of db into the backup
// directory's staging/, copies every table the backup directory does not
// hold yet into shared/ (checking each against the whole-file checksum the
// DB's MANIFEST recorded for it as it copies), copies the checkpoint's
// CURRENT, MANIFEST, WAL and OPTIONS into private/<id>/, and then writes
// meta/<id>, the commit point. Writes to db may go on meanwhile; the backup
// holds exactly the writes visible when the checkpoint began. Create first
// removes what an interrupted operation left behind (see GC).
func (e *Engine) Create(db *vigil.DB) (Info, CreateStats, error) {
	if err := e.begin(); err != nil {
		return Info{}, CreateStats{}, err
	}
	defer e.mu.Unlock()
	if db == nil {
		return Info{}, CreateStats{}, fmt.Errorf("%w: backup: Create of a nil DB", vigil.ErrInvalidArgument)
	}
	info, st, err := e.create(db)
	if err != nil {
		return Info{}, st, fmt.Errorf("backup: create: %w", err)
	}
	return info, st, nil
}

func (e *Engine) create(db *vigil.DB) (Info, CreateStats, error) {
	var st CreateStats
	created := time.Now()
	ds, err := e.scan()
	if err != nil {
		return Info{}, st, err
	}
	if _, err := e.collect(ds); err != nil {
		return Info{}, st, err
	}
	id := ds.maxID + 1

	staging := e.path(stagingDir)
	if err := e.fs.MkdirAll(staging, 0o755); err != nil {
		return Info{}, st, err
	}
	defer func() { _ = e.fs.RemoveAll(staging) }()
	ckpt := e.fs.PathJoin(staging, checkpointName)
	if err := db.Checkpoint(ckpt); err != nil {
		return Info{}, st, err
	}
	if _, err := e.fs.Stat(ckpt); err != nil {
		return Info{}, st, fmt.Errorf("the checkpoint %s is not on the backup's file system (Options.FS must be the DB's): %w", ckpt, err)
	}

	// What the checkpoint holds: its sequence number and digest (from a
	// read-only open, which checks its MANIFEST, WAL and every table
	// block), its tables with their MANIFEST checksums, its other files.
	seq, digest, err := dbDigest(e.fs, ckpt, e.cmp)
	if err != nil {
		return Info{}, st, fmt.Errorf("reading the checkpoint: %w", err)
	}
	tables, err := readTables(e.fs, ckpt)
	if err != nil {
		return Info{}, st, fmt.Errorf("reading the checkpoint: %w", err)
	}
	names, err := e.fs.List(ckpt)
	if err != nil {
		return Info{}, st, err
	}
	sort.Strings(names)
	info := Info{ID: id, Created: created, Seq: seq, Digest: digest, ChecksumType: fileChecksumType}

	if err := e.copyShared(ds, ckpt, tables, &info, &st); err != nil {
		return Info{}, st, err
	}
	if err := e.copyPrivate(ckpt, names, &info, &st); err != nil {
		return Info{}, st, err
	}

	// The commit point.
	if err := e.writeMeta(&info); err != nil {
		return Info{}, st, err
	}
	return info, st, nil
}

// copyShared copies the checkpoint's tables into shared/, or reuses the
// copy another backup made (the same name: number, size, whole-file
// checksum, footer context), adding each to info.
func (e *Engine) copyShared(ds *dirState, ckpt string, tables []*manifest.FileMetadata, info *Info, st *CreateStats) error {
	copied := 0
	for _, t := range tables {
		src := e.fs.PathJoin(ckpt, fmt.Sprintf("%06d.sst", t.FileNum))
		propsOff, ctx, err := tableChecksumEnd(e.fs, src, t, e.cmp)
		if err != nil {
			return err
		}
		name := sharedName(t.FileNum, t.Size, t.FileChecksum, ctx)
		if known, ok := ds.shared[name]; ok {
			fi, err := e.fs.Stat(e.path(sharedDir, name))
			if err != nil {
				return fmt.Errorf("%w: shared table %s, listed by backup %d: %w", vigil.ErrCorruption, e.path(sharedDir, name), known.by, err)
			}
			if uint64(fi.Size()) != known.f.Size {
				return fmt.Errorf("%w: shared table %s, listed by backup %d, is %d bytes, its meta says %d", vigil.ErrCorruption, e.path(sharedDir, name), known.by, fi.Size(), known.f.Size)
			}
			info.Files = append(info.Files, known.f)
			st.SharedReused++
			st.SharedBytesReused += known.f.Size
			continue
		}
		dst := e.path(sharedDir, name)
		sum, err := e.copyTable(src, dst+tmpSuffix, t, propsOff)
		if err != nil {
			return err
		}
		if err := e.fs.Rename(dst+tmpSuffix, dst); err != nil {
			return err
		}
		info.Files = append(info.Files, File{Shared: true, Name: name, Size: t.Size, Checksum: sum})
		st.SharedCopied++
		st.SharedBytesCopied += t.Size
		copied++
	}
	if copied > 0 {
		if err := vfsutil.SyncDir(e.fs, e.path(sharedDir)); err != nil {
			return err
		}
	}
	return nil
}

// copyPrivate copies the checkpoint's other files (CURRENT, MANIFEST, WAL,
// OPTIONS) into private/<id>/, adding each to info.
func (e *Engine) copyPrivate(ckpt string, names []string, info *Info, st *CreateStats) error {
	pdir := e.path(privateDir, strconv.FormatUint(info.ID, 10))
	if err := e.fs.RemoveAll(pdir); err != nil {
		return err
	}
	if err := e.fs.MkdirAll(pdir, 0o755); err != nil {
		return err
	}
	if err := vfsutil.SyncDir(e.fs, e.path(privateDir)); err != nil {
		return err
	}
	for _, n := range names {
		if !validPrivateName(n) {
			continue // tables (copyShared), and the LOCK of the read-only open
		}
		size, sum, err := e.copyFile(e.fs.PathJoin(ckpt, n), e.fs.PathJoin(pdir, n), nil)
		if err != nil {
			return err
		}
		info.Files = append(info.Files, File{Name: n, Size: size, Checksum: sum})
		st.PrivateFiles++
		st.PrivateBytes += size
	}
	return vfsutil.SyncDir(e.fs, pdir)
}

// writeMeta writes meta/<id> atomically: a temporary file, synced, renamed,
// and the directory synced.
func (e *Engine) writeMeta(info *Info) error {
	name := e.metaPath(info.ID)
	return vfsutil.ReplaceFile(e.fs, name+tmpSuffix, name, encodeMeta(info), nil)
}

// readMeta reads and decodes meta/<id>.
func (e *Engine) readMeta(id uint64) (*Info, error) {
	name := e.metaPath(id)
	f, err := e.fs.Open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: backup %d does not exist (no %s)", vigil.ErrNotFound, id, name)
		}
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxMetaSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(data) > maxMetaSize {
		return nil, fmt.Errorf("%w: backup meta %s is over %d bytes", vigil.ErrCorruption, name, maxMetaSize)
	}
	info, err := decodeMeta(data, name)
	if err != nil {
		return nil, err
	}
	if info.ID != id {
		return nil, fmt.Errorf("%w: backup meta %s records backup id %d", vigil.ErrCorruption, name, info.ID)
	}
	return info, nil
}

// sharedRef is a shared table some backup lists.
type sharedRef struct {
	f  File
	by uint64 // the first backup listing it
}

// dirState is what the backup directory holds.
type dirState struct {
	metas  map[uint64]*Info // decoded
	bad    map[uint64]error // meta files that did not decode
	maxID  uint64
	shared map[string]sharedRef // shared tables the decoded metas list
}

// scan reads every meta file.
func (e *Engine) scan() (*dirState, error) {
	ds := &dirState{metas: map[uint64]*Info{}, bad: map[uint64]error{}, shared: map[string]sharedRef{}}
	names, err := e.fs.List(e.path(metaDir))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for _, n := range names {
		id, ok := parseID(n)
		if !ok {
			continue
		}
		ds.maxID = max(ds.maxID, id)
		info, err := e.readMeta(id)
		if err != nil {
			if !errors.Is(err, vigil.ErrCorruption) {
				return nil, err
			}
			ds.bad[id] = err
			continue
		}
		ds.metas[id] = info
	}
	ids := make([]uint64, 0, len(ds.metas))
	for id := range ds.metas {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		for _, f := range ds.metas[id].Files {
			if _, ok := ds.shared[f.Name]; f.Shared && !ok {
				ds.shared[f.Name] = sharedRef{f: f, by: id}
			}
		}
	}
	// A private directory above every meta (a crashed Create) still
	// must not get its number reused while it is there.
	if pnames, err := e.fs.List(e.path(privateDir)); err == nil {
		for _, n := range pnames {
			if id, ok := parseID(n); ok {
				ds.maxID = max(ds.maxID, id)
			}
		}
	}
	return ds, nil
}

// parseID parses a canonical decimal backup id.
func parseID(s string) (uint64, bool) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 || strconv.FormatUint(id, 10) != s {
		return 0, false
	}
	return id, true
}

// collect removes what no backup needs: staging/, temporary files, private
// directories without a meta file, and shared tables no decoded meta
// lists. While some meta file does not decode, shared tables are kept (they
// may be that backup's). Its errors are the file system's.
func (e *Engine) collect(ds *dirState) (GCStats, error) {
	var gs GCStats
	fs := e.fs
	remove := func(name string) error {
		var size uint64
		if fi, err := fs.Stat(name); err == nil {
			size = uint64(fi.Size())
		}
		if err := fs.RemoveAll(name); err != nil {
			return err
		}
		gs.Files++
		gs.Bytes += size
		return nil
	}
	if _, err := fs.Stat(e.path(stagingDir)); err == nil {
		if err := fs.RemoveAll(e.path(stagingDir)); err != nil {
			return gs, err
		}
	}
	names, err := fs.List(e.path(metaDir))
	if err != nil {
		return gs, err
	}
	for _, n := range names {
		if strings.HasSuffix(n, tmpSuffix) {
			if err := remove(e.path(metaDir, n)); err != nil {
				return gs, err
			}
		}
	}
	names, err = fs.List(e.path(privateDir))
	if err != nil {
		return gs, err
	}
	for _, n := range names {
		id, ok := parseID(n)
		if !ok {
			continue
		}
		if _, ok := ds.metas[id]; ok {
			continue
		}
		if _, ok := ds.bad[id]; ok {
			continue
		}
		if err := fs.RemoveAll(e.path(privateDir, n)); err != nil {
			return gs, err
		}
		gs.Files++
	}
	names, err = fs.List(e.path(sharedDir))
	if err != nil {
		return gs, err
	}
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, tmpSuffix):
		case len(ds.bad) > 0:
			continue
		default:
			if _, _, ok := parseSharedName(n); !ok {
				continue // not ours
			}
			if _, ok := ds.shared[n]; ok {
				continue
			}
		}
		if err := remove(e.path(sharedDir, n)); err != nil {
			return gs, err
		}
	}
	return gs, nil
}

// badErr joins the errors of the meta files that did not decode, in id
// order; nil if there are none.
func (ds *dirState) badErr() error {
	ids := make([]uint64, 0, len(ds.bad))
	for id := range ds.bad {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	errs := make([]error, 0, len(ids))
	for _, id := range ids {
		errs = append(errs, ds.bad[id])
	}
	return errors.Join(errs...)
}

// List returns the backups in id order. A meta file that does not decode
// is left out of the list and reported in the error (wrapping
// vigil.ErrCorruption, naming the file); the list still holds the others.
func (e *Engine) List() ([]Info, error) {
	if err := e.begin(); err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	ds, err := e.scan()
	if err != nil {
		return nil, fmt.Errorf("backup: list: %w", err)
	}
	out := make([]Info, 0, len(ds.metas))
	for _, info := range ds.metas {
		out = append(out, *info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, ds.badErr()
}

// Verify re-reads every file of backup id and checks its size and
// whole-file checksum against the backup's meta file. Each bad, missing or
// resized file is reported by name in an error wrapping vigil.ErrCorruption
// (all of them, joined); so is a meta file that does not decode. A backup
// that does not exist is vigil.ErrNotFound.
func (e *Engine) Verify(id uint64) error {
	if err := e.begin(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	info, err := e.readMeta(id)
	if err != nil {
		return fmt.Errorf("backup: verify: %w", err)
	}
	if err := e.verify(info); err != nil {
		return fmt.Errorf("backup: verify backup %d: %w", id, err)
	}
	return nil
}

func (e *Engine) verify(info *Info) error {
	var errs []error
	for _, f := range info.Files {
		if err := e.verifyFile(info.ID, f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (e *Engine) verifyFile(id uint64, f File) error {
	name := e.filePath(id, f)
	r, err := e.fs.Open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: %s is missing: %w", vigil.ErrCorruption, name, err)
		}
		return err
	}
	defer r.Close()
	e.dig.Reset(fileChecksumType)
	var size uint64
	for {
		n, err := r.Read(e.buf)
		e.dig.Write(e.buf[:n])
		size += uint64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
	}
	return checkFile(name, f, size, e.dig.Sum64())
}

// checkFile compares a file's size and checksum with its meta entry.
func checkFile(name string, f File, size, sum uint64) error {
	if size != f.Size {
		return fmt.Errorf("%w: %s is %d bytes, the backup's meta says %d", vigil.ErrCorruption, name, size, f.Size)
	}
	if sum != f.Checksum {
		return fmt.Errorf("%w: %s: whole-file checksum %#016x, the backup's meta recorded %#016x", vigil.ErrCorruption, name, sum, f.Checksum)
	}
	return nil
}

// Restore writes backup id as a DB in target, which must not exist. It
// verifies every file first (as Verify does), copies them into target
// a directory of its own beside target (target plus ".tmp-" and 16 random
// hex digits, which only this call creates and removes), checking each
// file's size and checksum again as it copies,
// syncs them, opens the copy read-only and checks that its range digest
// and sequence number are the ones recorded at backup time, and only then
// renames it to target. Any difference is an error wrapping
// vigil.ErrCorruption that names the file, and leaves no target: Restore
// never produces a DB that differs from the one backed up.
func (e *Engine) Restore(id uint64, target string) error {
	if err := e.begin(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	if err := e.restore(id, target); err != nil {
		return fmt.Errorf("backup: restore backup %d to %s: %w", id, target, err)
	}
	return nil
}

func (e *Engine) restore(id uint64, target string) error {
	fs := e.fs
	if target == "" {
		return fmt.Errorf("%w: empty target", vigil.ErrInvalidArgument)
	}
	if _, err := fs.Stat(target); err == nil {
		return fmt.Errorf("%w: %s already exists", vigil.ErrInvalidArgument, target)
	}
	info, err := e.readMeta(id)
	if err != nil {
		return err
	}
	if !e.skipPreVerify {
		if err := e.verify(info); err != nil {
			return err
		}
	}
	if e.afterVerify != nil {
		e.afterVerify()
	}
	tmp, err := vfsutil.MkdirTemp(fs, target)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			_ = fs.RemoveAll(tmp)
		}
	}()
	for _, f := range info.Files {
		src := e.filePath(id, f)
		size, sum, err := e.copyFile(src, fs.PathJoin(tmp, f.DBName()), nil)
		if err != nil {
			return err
		}
		if err := checkFile(src, f, size, sum); err != nil {
			return err
		}
	}
	if err := vfsutil.SyncDir(fs, tmp); err != nil {
		return err
	}
	seq, digest, err := dbDigest(fs, tmp, e.cmp)
	if err != nil {
		return fmt.Errorf("opening the restored DB: %w", err)
	}
	if digest != info.Digest || seq != info.Seq {
		return fmt.Errorf("%w: the restored DB has seq %d and digest %#016x (%d keys, %d bytes); backup %d recorded seq %d and digest %#016x (%d keys, %d bytes) in %s",
			vigil.ErrCorruption, seq, digest.CRC64, digest.Keys, digest.Bytes, id, info.Seq, info.Digest.CRC64, info.Digest.Keys, info.Digest.Bytes, e.metaPath(id))
	}
	if err := vfsutil.RenameNoReplace(fs, tmp, target); err != nil {
		if errors.Is(err, vfsutil.ErrExists) {
			return fmt.Errorf("%w: %s already exists", vigil.ErrInvalidArgument, target)
		}
		return err
	}
	ok = true
	return nil
}

// Delete removes backup id: its meta file first (so that a crash leaves
// either the whole backup or none), then its private files, then the
// shared tables no other backup lists. A backup that does not exist is
// vigil.ErrNotFound. Delete also removes a backup whose meta file does not
// decode.
func (e *Engine) Delete(id uint64) error {
	if err := e.begin(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	name := e.metaPath(id)
	if _, err := e.fs.Stat(name); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("backup: delete: %w: backup %d does not exist (no %s)", vigil.ErrNotFound, id, name)
		}
		return fmt.Errorf("backup: delete: %w", err)
	}
	if err := e.fs.Remove(name); err != nil {
		return fmt.Errorf("backup: delete: %w", err)
	}
	if err := vfsutil.SyncDir(e.fs, e.path(metaDir)); err != nil {
		return fmt.Errorf("backup: delete: %w", err)
	}
	if err := e.fs.RemoveAll(e.path(privateDir, strconv.FormatUint(id, 10))); err != nil {
		return fmt.Errorf("backup: delete: %w", err)
	}
	ds, err := e.scan()
	if err != nil {
		return fmt.Errorf("backup: delete: %w", err)
	}
	if _, err := e.collect(ds); err != nil {
		return fmt.Errorf("backup: delete: backup %d is deleted, but: %w", id, err)
	}
	return nil
}

// GC removes what no backup needs: shared tables no backup lists, private
// directories without a meta file, staging/ and temporary files, all of
// which an interrupted Create or Delete may leave. If a meta file does not
// decode, GC keeps every shared table (they may be that backup's), does the
// rest, and reports the unreadable meta files in an error wrapping
// vigil.ErrCorruption.
func (e *Engine) GC() (GCStats, error) {
	if err := e.begin(); err != nil {
		return GCStats{}, err
	}
	defer e.mu.Unlock()
	ds, err := e.scan()
	if err != nil {
		return GCStats{}, fmt.Errorf("backup: gc: %w", err)
	}
	gs, err := e.collect(ds)
	if err != nil {
		return gs, fmt.Errorf("backup: gc: %w", err)
	}
	if err := ds.badErr(); err != nil {
		return gs, fmt.Errorf("backup: gc: kept every shared table, since %d meta file(s) cannot be read: %w", len(ds.bad), err)
	}
	return gs, nil
}
