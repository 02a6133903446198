package raftstore

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/internal/lockfile"
	"github.com/vigildb/vigil/internal/vfsutil"
)

// ReservedPrefix starts the keys the FSM keeps its own state under (the
// index of the last log entry it applied). ApplyCommand refuses puts and
// deletes of such keys and range deletions skip them; a custom ApplyFunc
// must not write them either.
const ReservedPrefix = "\xff\xffraftstore\x00"

var (
	reservedStart = []byte(ReservedPrefix)
	reservedEnd   = []byte("\xff\xffraftstore\x01")
	appliedKey    = []byte(ReservedPrefix + "applied")
)

// ApplyFunc turns one committed command (a raft.LogCommand entry) into
// writes: it adds them to b and returns the response that raft hands to
// the Apply future on the leader. It must be deterministic, must not read
// the DB directly (b is applied together with the other entries of its
// raft batch, so the DB does not reflect earlier entries of the batch yet;
// FSM.GetPending reads what they wrote), and should add nothing for a
// command it rejects (check first, then add).
type ApplyFunc func(l *raft.Log, b *vigil.Batch) any

// FSMOptions configures an FSM.
type FSMOptions struct {
	// Vigil is the options of the FSM's DB (nil: defaults). Its FS is also
	// where checkpoints and restored snapshots are written.
	Vigil *vigil.Options
	// Apply turns a command into writes. Default ApplyCommand.
	Apply ApplyFunc
}

// FSM is a raft.FSM and raft.BatchingFSM whose state is a Vigil DB in a
// directory of its own.
//
// ApplyBatch writes the commands of one raft batch, and the index of the
// last entry, as one Vigil batch (not synced: after a crash raft restores
// the latest snapshot and replays the log after it, as for any FSM).
// Entries at or below the applied index are skipped, so a replay of entries
// the DB already holds changes nothing.
//
// Snapshot makes a Vigil checkpoint (DB.Checkpoint: hard links to the
// tables plus a copy of the WAL tail) in the sibling directory dir +
// ".snapshots", under a name of its own; the FSMSnapshot's Persist streams
// the checkpoint's files to the sink, Release removes the checkpoint.
// Restore writes the received files into a new directory beside dir,
// checks that they open as an FSM's DB, and only then swaps that directory
// for dir and reopens (see Restore for the protocol): a stream that is
// damaged or holds no such DB fails and changes nothing. A crash at any
// point leaves either the old DB or the new one, which OpenFSM picks up.
//
// Beside dir the FSM keeps dir + ".lock", locked while the FSM is open (a
// second OpenFSM of dir fails, in this process or another, before it
// changes anything), and dir + ".snapshots". Temporary names (checkpoints,
// a restore's directories) are unique per call and follow patterns that
// only the FSM creates; OpenFSM removes leftovers of those patterns and
// nothing else, so a directory that happens to be called dir + ".old" or
// dir + ".incoming" is never touched.
//
// If a write to the DB fails, the FSM stops: that and every later Apply
// returns the error, Snapshot refuses (so raft keeps the log it would
// replay), and Err reports it, until a Restore succeeds or the node is
// restarted. It never goes on from a state that lacks a committed entry.
//
// Concurrency: raft calls Apply, ApplyBatch, Snapshot and Restore from one
// goroutine and Persist concurrently with them, which the FSM supports.
// Get, View, Checksum, AppliedIndex and Err may be called from any
// goroutine at any time; they wait while Restore swaps the DB. Close must
// come after raft has shut down.
//
// raft.Config.NoSnapshotRestoreOnStart is not supported: raft can record
// a received snapshot before the FSM has durably installed it, so a crash
// in between would leave the FSM behind raft's applied index.
type FSM struct {
	dir   string
	fs    vfs.FS
	vopts vigil.Options
	apply ApplyFunc

	lock io.Closer // dir + ".lock", held from OpenFSM to Close

	// mu guards db and closed: Restore and Close hold it exclusively while
	// they replace or close the DB, everything else shares it. db is nil
	// after Close, and after a Restore that could not undo a failed swap
	// (which stops the FSM).
	mu     sync.RWMutex
	db     *vigil.DB
	closed bool

	batch     *vigil.Batch // used by the raft FSM goroutine only
	applied   atomic.Uint64
	failed    atomic.Pointer[error]
	snapshots atomic.Int64
	restores  atomic.Int64
}

var _ raft.BatchingFSM = (*FSM)(nil)

// OpenFSM opens (creating it if needed) the FSM's DB in dir. It first
// locks dir + ".lock" (failing if another FSM holds it), then finishes or
// undoes a Restore that a crash interrupted and removes leftover
// checkpoints (see recoverDirs).
func OpenFSM(dir string, opts *FSMOptions) (_ *FSM, err error) {
	f := &FSM{apply: ApplyCommand}
	if opts != nil {
		if opts.Vigil != nil {
			f.vopts = *opts.Vigil
		}
		if opts.Apply != nil {
			f.apply = opts.Apply
		}
	}
	if f.vopts.FS == nil {
		f.vopts.FS = vfs.Default
	}
	f.fs = f.vopts.FS
	if dir != "" {
		// The FSM's own names are dir plus a suffix: "/x/fsm/" must
		// not put them inside the DB directory.
		dir = filepath.Clean(dir)
	}
	f.dir = dir
	if base := f.fs.PathBase(dir); dir == "" || base == "." || base == ".." || f.fs.PathDir(dir) == dir {
		return nil, fmt.Errorf("raftstore: OpenFSM %q: not the name of a directory with a parent", dir)
	}
	if err := f.takeLock(); err != nil {
		return nil, fmt.Errorf("raftstore: OpenFSM %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			_ = f.lock.Close()
		}
	}()
	if err := f.recoverDirs(); err != nil {
		return nil, fmt.Errorf("raftstore: OpenFSM %s: %w", dir, err)
	}
	if err := f.openDB(); err != nil {
		return nil, fmt.Errorf("raftstore: OpenFSM %s: %w", dir, err)
	}
	f.batch = f.db.NewIndexedBatch()
	return f, nil
}

// The names the FSM creates beside dir. A restore's are dir +
// restoreInfix + token + one of the suffixes; a checkpoint's are
// checkpointPrefix + token inside dir + ".snapshots". A token is
// tokenBytes random bytes in lowercase hex, drawn by the call that creates
// the name.
const (
	restoreInfix     = ".restore-"
	restoreNew       = ".new" // the incoming DB, written and checked
	restoreOld       = ".old" // the previous DB, during the swap
	restoreBad       = ".bad" // the incoming DB, while a failed swap is undone
	checkpointPrefix = "ckpt-"
	tokenBytes       = 16
)

func (f *FSM) lockName() string     { return f.dir + ".lock" }
func (f *FSM) snapshotsDir() string { return f.dir + ".snapshots" }

func (f *FSM) restoreName(token, suffix string) string { return f.dir + restoreInfix + token + suffix }

// newToken draws a token: two calls never draw the same one.
func newToken() (string, error) {
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("drawing a random name: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func isToken(s string) bool {
	if len(s) != 2*tokenBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// parseRestoreName returns the token and suffix of name, an entry of dir's
// parent, if it is a restore's name for base (dir's base name).
func parseRestoreName(base, name string) (token, suffix string, ok bool) {
	rest, ok := strings.CutPrefix(name, base+restoreInfix)
	if !ok || len(rest) != 2*tokenBytes+len(restoreNew) {
		return "", "", false
	}
	token, suffix = rest[:2*tokenBytes], rest[2*tokenBytes:]
	if !isToken(token) || (suffix != restoreNew && suffix != restoreOld && suffix != restoreBad) {
		return "", "", false
	}
	return token, suffix, true
}

// isCheckpointName reports whether name, an entry of dir + ".snapshots",
// is a checkpoint of Snapshot's or something Checkpoint created beside one
// (its temporary directory: the checkpoint's name, a dot, a suffix).
func isCheckpointName(name string) bool {
	rest, ok := strings.CutPrefix(name, checkpointPrefix)
	if !ok || len(rest) < 2*tokenBytes || !isToken(rest[:2*tokenBytes]) {
		return false
	}
	return len(rest) == 2*tokenBytes || rest[2*tokenBytes] == '.'
}

func (f *FSM) exists(path string) (bool, error) { return exists(f.fs, path) }

func exists(fs vfs.FS, path string) (bool, error) {
	_, err := fs.Stat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// absent fails unless nothing is called path.
func (f *FSM) absent(path string) error {
	ok, err := f.exists(path)
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("%s: %w", path, os.ErrExist)
	}
	return nil
}

// takeLock creates dir's parent if needed (synced) and locks dir + ".lock"
// for this FSM, which keeps it until Close. Recovery runs only under it: a
// restore name that OpenFSM finds then belongs to no live FSM.
func (f *FSM) takeLock() error {
	if err := vfsutil.MkdirAllSynced(f.fs, f.fs.PathDir(f.dir)); err != nil {
		return err
	}
	name := f.lockName()
	// lockfile identifies the file it locks by its inode on disk, so the
	// file must exist first. It is never removed.
	lf, err := f.fs.OpenReadWrite(name)
	if err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	if err := lf.Close(); err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	l, err := lockfile.Acquire(f.fs, name, name)
	if err != nil {
		return fmt.Errorf("locking %s (is the FSM open elsewhere?): %w", name, err)
	}
	f.lock = l
	return nil
}

// recoverDirs settles what an interrupted Restore left, and removes
// leftover checkpoints. f holds dir + ".lock", so no live FSM is using any
// of the names below; and only Restore creates names of the form dir +
// ".restore-" + token + ".new", ".old" or ".bad", so every one found is a
// leftover of Vigil's own (see Restore for the protocol that leaves them).
//
//   - If dir exists, it is the FSM's DB (Restore renames a new DB into
//     place only once it is checked, and puts an old one back only after
//     moving the new one away), and every restore name is a leftover.
//   - If dir is missing, a swap was interrupted after dir was renamed to
//     T.old. If T.new is beside it, the new DB was complete and checked
//     (Restore writes and checks it before it renames dir): it becomes dir,
//     finishing the restore. If T.bad is beside it instead, the new DB had
//     failed to open and the old one was being put back: T.old becomes dir.
//     If neither, T.old is the only DB there is and becomes dir. A T.old
//     without a partner, next to one with a partner, is an older leftover
//     (Restore could not remove it): the one with a partner wins. Any other
//     combination cannot come from Restore, and OpenFSM fails rather than
//     guess, leaving everything in place.
//
// Then every remaining restore name is removed, and so are the entries of
// dir + ".snapshots" that are checkpoints of Snapshot's (isCheckpointName).
// Nothing else is touched.
func (f *FSM) recoverDirs() error {
	parent, base := f.fs.PathDir(f.dir), f.fs.PathBase(f.dir)
	names, err := f.fs.List(parent)
	if err != nil {
		return fmt.Errorf("listing %s: %w", parent, err)
	}
	type parts struct{ new, old, bad bool }
	found := map[string]*parts{}
	var leftovers []string
	for _, name := range names {
		tok, suffix, ok := parseRestoreName(base, name)
		if !ok {
			continue
		}
		p := found[tok]
		if p == nil {
			p = &parts{}
			found[tok] = p
		}
		switch suffix {
		case restoreNew:
			p.new = true
		case restoreOld:
			p.old = true
		case restoreBad:
			p.bad = true
		}
		leftovers = append(leftovers, name)
	}
	haveDir, err := f.exists(f.dir)
	if err != nil {
		return err
	}
	if !haveDir {
		var paired, lone []string
		for tok, p := range found {
			switch {
			case p.old && (p.new || p.bad):
				paired = append(paired, tok)
			case p.old:
				lone = append(lone, tok)
			}
		}
		var tok string
		switch {
		case len(paired) == 1:
			tok = paired[0]
		case len(paired) == 0 && len(lone) == 1:
			tok = lone[0]
		case len(paired)+len(lone) > 1:
			return fmt.Errorf("%s is missing and %d interrupted restores are beside it (%v); not guessing which one holds the FSM's DB", f.dir, len(paired)+len(lone), leftovers)
		}
		if tok != "" {
			p := found[tok]
			from := f.restoreName(tok, restoreOld) // undo
			if p.new && !p.bad {
				from = f.restoreName(tok, restoreNew) // finish
			}
			if err := f.fs.Rename(from, f.dir); err != nil {
				return fmt.Errorf("settling an interrupted restore: %w", err)
			}
			if err := f.syncParent(); err != nil {
				return err
			}
			leftovers = removeString(leftovers, f.fs.PathBase(from))
		}
	}
	for _, name := range leftovers {
		path := f.fs.PathJoin(parent, name)
		if err := f.fs.RemoveAll(path); err != nil {
			return fmt.Errorf("removing %s, left by an interrupted restore: %w", path, err)
		}
	}
	if len(leftovers) > 0 {
		if err := f.syncParent(); err != nil {
			return err
		}
	}
	return f.removeCheckpoints()
}

func removeString(list []string, s string) []string {
	out := list[:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// removeCheckpoints removes the checkpoints a previous run of the FSM left
// in dir + ".snapshots" (raft had persisted or abandoned them). The
// directory itself, and anything else in it, stays.
func (f *FSM) removeCheckpoints() error {
	dir := f.snapshotsDir()
	ok, err := f.exists(dir)
	if err != nil || !ok {
		return err
	}
	names, err := f.fs.List(dir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, name := range names {
		if !isCheckpointName(name) {
			continue
		}
		path := f.fs.PathJoin(dir, name)
		if err := f.fs.RemoveAll(path); err != nil {
			return fmt.Errorf("removing the leftover checkpoint %s: %w", path, err)
		}
	}
	return nil
}

func (f *FSM) syncParent() error { return vfsutil.SyncDir(f.fs, f.fs.PathDir(f.dir)) }

// openDB opens the DB in f.dir and reads its applied index. f.mu must be
// held exclusively, or f not yet shared.
func (f *FSM) openDB() error {
	o := f.vopts
	db, err := vigil.Open(f.dir, &o)
	if err != nil {
		return err
	}
	applied, _, err := readApplied(db)
	if err != nil {
		_ = db.Close()
		return fmt.Errorf("reading the applied index: %w", err)
	}
	f.db = db
	f.applied.Store(applied)
	return nil
}

// readApplied returns the applied index recorded in db, and whether there
// is a record (a DB that never applied an entry has none: 0).
func readApplied(db *vigil.DB) (uint64, bool, error) {
	v, err := db.Get(appliedKey)
	switch {
	case err == nil && len(v) == 8:
		return binary.BigEndian.Uint64(v), true, nil
	case err == nil:
		return 0, false, corruptf("the FSM's applied index is %d bytes, want 8", len(v))
	case errors.Is(err, vigil.ErrNotFound):
		return 0, false, nil
	}
	return 0, false, err
}

// Apply applies one entry; see ApplyBatch.
func (f *FSM) Apply(l *raft.Log) any {
	one := [1]*raft.Log{l}
	return f.ApplyBatch(one[:])[0]
}

// ApplyBatch applies the commands among logs (raft passes command and
// configuration entries, in log order) as one Vigil batch together with the
// new applied index, and returns one response per entry: the ApplyFunc's
// for a command, nil for anything else or an entry already applied, and the
// FSM's failure for every entry if the write fails.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	resps := make([]any, len(logs))
	f.mu.RLock()
	defer f.mu.RUnlock()
	if err := f.usable(); err != nil {
		for i := range resps {
			resps[i] = err
		}
		return resps
	}
	b := f.batch
	b.Reset()
	applied := f.applied.Load()
	last := applied
	for i, l := range logs {
		if l.Index <= applied {
			continue // replayed: the DB has it already
		}
		if l.Type == raft.LogCommand {
			resps[i] = f.apply(l, b)
		}
		last = max(last, l.Index)
	}
	if last == applied {
		return resps
	}
	var idx [8]byte
	binary.BigEndian.PutUint64(idx[:], last)
	b.Put(appliedKey, idx[:])
	if err := f.db.Apply(b, nil); err != nil {
		err = fmt.Errorf("raftstore: FSM stopped: applying entries %d..%d: %w", logs[0].Index, logs[len(logs)-1].Index, err)
		f.failed.Store(&err)
		for i := range resps {
			resps[i] = err
		}
		return resps
	}
	if b.Len() > maxRetainedBatch {
		f.batch = f.db.NewIndexedBatch()
	}
	f.applied.Store(last)
	return resps
}

// GetPending returns a copy of key's value as the entries applied before
// the current one left it: the writes that earlier entries of the same raft
// batch added to b, over the DB. It is for an ApplyFunc that reads before it
// writes (a compare-and-set, a counter), and may be called only from the
// ApplyFunc, with the batch it was handed (the FSM's lock is held by the
// ApplyBatch that called it). A key that is absent gives an error wrapping
// vigil.ErrNotFound. The FSM's batches are indexed (DB.NewIndexedBatch):
// a read costs a search of b's index and, when b does not decide, one DB
// read. A batch that is not indexed costs one pass over its records.
func (f *FSM) GetPending(b *vigil.Batch, key []byte) ([]byte, error) {
	if b.Indexed() {
		if f.db == nil {
			return nil, fmt.Errorf("raftstore: FSM: %w", vigil.ErrClosed)
		}
		v, err := b.Get(key)
		if err != nil {
			return nil, fmt.Errorf("raftstore: FSM: key %q: %w", key, err)
		}
		return v, nil
	}
	var (
		val     []byte
		decided bool
	)
	r := b.Reader()
	for {
		kind, k, v, ok := r.Next()
		if !ok {
			break
		}
		switch kind {
		case vigil.BatchPut:
			if bytes.Equal(k, key) {
				val, decided = v, true
			}
		case vigil.BatchDelete:
			if bytes.Equal(k, key) {
				val, decided = nil, true
			}
		case vigil.BatchDeleteRange:
			if bytes.Compare(k, key) <= 0 && bytes.Compare(key, v) < 0 {
				val, decided = nil, true
			}
		}
	}
	if err := r.Error(); err != nil {
		return nil, err
	}
	switch {
	case !decided:
		if f.db == nil {
			return nil, fmt.Errorf("raftstore: FSM: %w", vigil.ErrClosed)
		}
		return f.db.Get(key)
	case val == nil:
		return nil, fmt.Errorf("raftstore: FSM: key %q: %w", key, vigil.ErrNotFound)
	}
	return bytes.Clone(val), nil
}

// Err returns the failure that stopped the FSM, or nil.
func (f *FSM) Err() error {
	if p := f.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// usable returns why the FSM cannot apply or snapshot. f.mu is held.
func (f *FSM) usable() error {
	if err := f.Err(); err != nil {
		return err
	}
	if f.db == nil {
		return fmt.Errorf("raftstore: FSM: %w", vigil.ErrClosed)
	}
	return nil
}

// AppliedIndex returns the index of the last entry applied (0 for none).
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// Get returns a copy of key's value in the FSM's DB, or an error wrapping
// vigil.ErrNotFound.
func (f *FSM) Get(key []byte) ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return nil, fmt.Errorf("raftstore: FSM: %w", vigil.ErrClosed)
	}
	return f.db.Get(key)
}

// View calls fn with the FSM's DB and keeps the DB from being replaced or
// closed until fn returns. fn may read (Get, NewIter, NewSnapshot,
// Checksum) but must not write: the DB's state belongs to raft. Nothing fn
// keeps may outlive the call (a Restore closes the DB after it).
func (f *FSM) View(fn func(db *vigil.DB) error) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return fmt.Errorf("raftstore: FSM: %w", vigil.ErrClosed)
	}
	return fn(f.db)
}

// Checksum returns vigil.DB.Checksum of the FSM's whole key space, its own
// applied index included: replicas that applied the same entries have the
// same checksum.
func (f *FSM) Checksum() (uint64, error) {
	var sum uint64
	err := f.View(func(db *vigil.DB) (err error) {
		sum, err = db.Checksum(nil, nil)
		return err
	})
	return sum, err
}

// FSMStats counts the FSM's snapshots and restores.
type FSMStats struct {
	// Snapshots is the number of snapshots persisted to a sink.
	Snapshots int64
	// Restores is the number of snapshots restored.
	Restores int64
}

// Stats returns the FSM's counters.
func (f *FSM) Stats() FSMStats {
	return FSMStats{Snapshots: f.snapshots.Load(), Restores: f.restores.Load()}
}

// Snapshot checkpoints the DB (DB.Checkpoint) after syncing its WAL, so
// that the DB on disk is at least as new as the snapshot. It takes about as
// long as hard-linking the tables and copying the WAL tail (at most the
// memtable's worth of writes); the files are streamed later, by Persist,
// while Apply goes on. An FSM that has applied nothing has no snapshot to
// give (Restore would refuse it: it holds no applied index).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if err := f.usable(); err != nil {
		return nil, err
	}
	if f.applied.Load() == 0 {
		return nil, errors.New("raftstore: FSM snapshot: nothing applied yet")
	}
	if err := f.db.SyncWAL(); err != nil {
		return nil, fmt.Errorf("raftstore: FSM snapshot: %w", err)
	}
	tok, err := newToken()
	if err != nil {
		return nil, fmt.Errorf("raftstore: FSM snapshot: %w", err)
	}
	// A name no one else holds: Checkpoint refuses one that exists, and
	// Release removes exactly what Checkpoint created.
	dir := f.fs.PathJoin(f.snapshotsDir(), checkpointPrefix+tok)
	if err := f.db.Checkpoint(dir); err != nil {
		return nil, fmt.Errorf("raftstore: FSM snapshot: %w", err)
	}
	return &fsmSnapshot{f: f, dir: dir}, nil
}

type fsmSnapshot struct {
	f   *FSM
	dir string
}

// Persist streams the checkpoint's files to sink and closes it (or cancels
// it on error).
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := writeSnapshot(sink, s.f.fs, s.dir); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("raftstore: persisting FSM snapshot %s: %w", s.dir, err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("raftstore: persisting FSM snapshot %s: %w", s.dir, err)
	}
	s.f.snapshots.Add(1)
	return nil
}

// Release removes the checkpoint.
func (s *fsmSnapshot) Release() {
	_ = s.f.fs.RemoveAll(s.dir)
}

// Restore replaces the FSM's DB by the snapshot read from rc, and closes
// rc. It is all or nothing: it returns nil and the FSM holds the
// snapshot's state, or it returns an error and the FSM is as it was (its
// directory, applied index and reads), with one exception: if a step of
// the swap fails and so does undoing it, the FSM stops (Err reports it,
// and Restore refuses if no DB could be reopened) until the node restarts,
// when OpenFSM settles what is on disk.
//
// The protocol. T is a token drawn by this call (32 random hex digits);
// new, old and bad stand for dir + ".restore-" + T + ".new", ".old" and
// ".bad", names that only this call creates, each checked not to exist
// first. Reads and Apply go on against the old DB until step 3.
//
//  1. Create new and write the stream's files into it, each synced. The
//     stream is checked as it is read (a checksum after every file): a
//     damaged one fails with an error wrapping vigil.ErrCorruption.
//  2. Check that new holds an FSM's DB: it has a CURRENT file, opens as a
//     Vigil DB, holds the applied-index record, and passes DB.Verify
//     (every table's block and whole-file checksums: a table damaged
//     before it was streamed passes the stream's checksums but not this).
//     Close it and sync new. A stream that fails is an error, wrapping
//     vigil.ErrCorruption where the stream is to blame.
//  3. Take f.mu exclusively, close the old DB, rename dir to old and sync
//     the parent, rename new to dir and sync the parent.
//  4. Open dir; its applied index must be the one step 2 read.
//  5. Remove old and sync the parent. Only now, with the new DB open, is
//     the old state gone. (If the removal fails, the restore has still
//     succeeded; OpenFSM removes old later.)
//
// A failure in steps 1 and 2 removes new and changes nothing else. A
// failure in steps 3 and 4 undoes the swap: dir (the new DB, if it got
// there) is renamed to bad, old back to dir, each synced, and the old DB
// reopened; its applied index must be what it was. Then bad and new are
// removed.
//
// Invariants, which OpenFSM's recovery (recoverDirs) relies on after a
// crash: dir is renamed to old only when new is complete, synced and
// checked, so a missing dir with old and new beside it means "finish the
// swap"; dir becomes bad only while old is being put back, so a missing
// dir with old and bad beside it means "undo it"; and whenever dir exists
// it is a complete DB (the old one or the checked new one), so every
// restore name beside it is a leftover. A crash therefore leaves the old
// state or the new one, never neither, and never a DB that was not checked.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.mu.RLock()
	err := f.restorable()
	f.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("raftstore: FSM restore: %w", err)
	}
	tok, err := newToken()
	if err != nil {
		return fmt.Errorf("raftstore: FSM restore: %w", err)
	}
	newDir, oldDir, badDir := f.restoreName(tok, restoreNew), f.restoreName(tok, restoreOld), f.restoreName(tok, restoreBad)
	if err := vfsutil.MkdirExclusive(f.fs, newDir); err != nil {
		return fmt.Errorf("raftstore: FSM restore: %w", err)
	}
	// From here on newDir is this call's, and so is badDir once made: on
	// failure they are removed, unless the FSM stopped and OpenFSM must
	// see them.
	keep := false
	defer func() {
		if !keep {
			_ = f.fs.RemoveAll(newDir)
			_ = f.fs.RemoveAll(badDir)
			_ = f.syncParent()
		}
	}()
	if _, err := readSnapshot(rc, f.fs, newDir); err != nil {
		return fmt.Errorf("raftstore: FSM restore: %w", err)
	}
	applied, err := f.checkRestored(newDir)
	if err != nil {
		return fmt.Errorf("raftstore: FSM restore: %w", err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.restorable(); err != nil {
		return fmt.Errorf("raftstore: FSM restore: %w", err)
	}
	for _, p := range []string{oldDir, badDir} {
		if err := f.absent(p); err != nil {
			return fmt.Errorf("raftstore: FSM restore: %w", err)
		}
	}
	prevApplied := f.applied.Load()
	// Closing may report an error the DB had (a failed background
	// write); what the DB holds is still on disk, and an undo checks that
	// the reopened DB has everything applied.
	_ = f.db.Close()
	f.db = nil
	moved := 0 // 1: dir is at oldDir; 2: and newDir is at dir
	fail := func(err error) error {
		if uerr := f.undoSwap(moved, oldDir, badDir, prevApplied); uerr != nil {
			keep = true
			err = fmt.Errorf("raftstore: FSM stopped: restore: %w; undoing the swap: %w", err, uerr)
			f.failed.Store(&err)
			return err
		}
		return fmt.Errorf("raftstore: FSM restore (undone, the previous DB is back): %w", err)
	}
	if err := f.fs.Rename(f.dir, oldDir); err != nil {
		return fail(err)
	}
	moved = 1
	if err := f.syncParent(); err != nil {
		return fail(err)
	}
	if err := f.fs.Rename(newDir, f.dir); err != nil {
		return fail(err)
	}
	moved = 2
	if err := f.syncParent(); err != nil {
		return fail(err)
	}
	if err := f.openDB(); err != nil {
		return fail(err)
	}
	if got := f.applied.Load(); got != applied {
		return fail(fmt.Errorf("the restored DB opened with applied index %d, not the %d it was checked with", got, applied))
	}
	keep = true // newDir is dir now
	f.failed.Store(nil)
	f.batch = f.db.NewIndexedBatch()
	f.restores.Add(1)
	if err := f.fs.RemoveAll(oldDir); err == nil {
		_ = f.syncParent()
	}
	return nil
}

// restorable returns why Restore cannot run. f.mu is held.
func (f *FSM) restorable() error {
	if f.closed {
		return vigil.ErrClosed
	}
	if f.db == nil {
		// A swap that could not be undone: what is on disk is for
		// OpenFSM to settle.
		if err := f.Err(); err != nil {
			return err
		}
		return vigil.ErrClosed
	}
	return nil
}

// checkRestored checks that dir, which readSnapshot filled, holds an FSM's
// DB, and returns its applied index. It opens the DB (which replays its
// WAL into a table), reads the applied-index record, verifies every table,
// closes the DB and syncs dir.
func (f *FSM) checkRestored(dir string) (uint64, error) {
	current := f.fs.PathJoin(dir, "CURRENT")
	if ok, err := f.exists(current); err != nil {
		return 0, err
	} else if !ok {
		// vigil.Open would create an empty DB.
		return 0, corruptf("the snapshot holds no DB: it has no CURRENT file")
	}
	o := f.vopts
	o.DisableAutomaticCompactions = true // it is open only to be checked
	db, err := vigil.Open(dir, &o)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !errors.Is(err, vigil.ErrCorruption) {
			err = fmt.Errorf("%w: %w", vigil.ErrCorruption, err)
		}
		return 0, fmt.Errorf("the snapshot does not open as a DB: %w", err)
	}
	applied, found, err := readApplied(db)
	switch {
	case err != nil:
		err = fmt.Errorf("the snapshot's applied index: %w", err)
	case !found:
		err = corruptf("the snapshot's DB holds no applied index (key %q): it is not an FSM's", appliedKey)
	default:
		if verr := db.Verify(); verr != nil {
			err = fmt.Errorf("verifying the snapshot's DB: %w", verr)
		}
	}
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing the snapshot's DB: %w", cerr)
	}
	if err != nil {
		return 0, err
	}
	if err := vfsutil.SyncDir(f.fs, dir); err != nil {
		return 0, err
	}
	return applied, nil
}

// undoSwap puts the previous DB back after step moved of Restore's swap
// (see Restore) and reopens it, checking that it has applied what it had.
// f.mu is held exclusively.
func (f *FSM) undoSwap(moved int, oldDir, badDir string, prevApplied uint64) error {
	if f.db != nil {
		_ = f.db.Close()
		f.db = nil
	}
	if moved >= 2 {
		if err := f.fs.Rename(f.dir, badDir); err != nil {
			return err
		}
		if err := f.syncParent(); err != nil {
			return err
		}
	}
	if moved >= 1 {
		if err := f.fs.Rename(oldDir, f.dir); err != nil {
			return err
		}
		if err := f.syncParent(); err != nil {
			return err
		}
	}
	if err := f.openDB(); err != nil {
		return err
	}
	f.batch = f.db.NewIndexedBatch()
	if got := f.applied.Load(); got != prevApplied {
		// Raft would not replay what the DB lost: stop instead.
		return fmt.Errorf("the previous DB reopened with applied index %d, not %d", got, prevApplied)
	}
	return nil
}

// Close closes the FSM's DB and releases dir + ".lock". Call it after
// raft.Raft.Shutdown has returned; Get, View and Restore fail with
// vigil.ErrClosed afterwards.
func (f *FSM) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	var err error
	if f.db != nil {
		err = f.db.Close()
		f.db = nil
	}
	if lerr := f.lock.Close(); err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("raftstore: closing FSM: %w", err)
	}
	return nil
}
