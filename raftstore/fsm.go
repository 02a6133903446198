package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
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
// the DB (b is applied together with the other entries of its raft batch,
// so the DB does not reflect earlier entries of the batch yet), and should
// add nothing for a command it rejects (check first, then add).
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
// tables plus a copy of the WAL tail) in a sibling directory, dir +
// ".snapshots"; the FSMSnapshot's Persist streams the checkpoint's files to
// the sink, Release removes the checkpoint. Restore writes the received
// files into dir + ".incoming", syncs them, closes the DB, renames the new
// directory into place and reopens. A crash at any point leaves either the
// old DB or the new one, which OpenFSM picks up.
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

	// mu guards db: Restore and Close hold it exclusively while they
	// replace or close the DB, everything else shares it.
	mu sync.RWMutex
	db *vigil.DB

	batch     *vigil.Batch // used by the raft FSM goroutine only
	applied   atomic.Uint64
	failed    atomic.Pointer[error]
	snapSeq   atomic.Uint64
	snapshots atomic.Int64
	restores  atomic.Int64
}

var _ raft.BatchingFSM = (*FSM)(nil)

// OpenFSM opens (creating it if needed) the FSM's DB in dir. It first
// finishes or undoes a Restore that a crash interrupted, and removes
// leftover checkpoints.
func OpenFSM(dir string, opts *FSMOptions) (*FSM, error) {
	f := &FSM{dir: dir, apply: ApplyCommand}
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
	if err := f.recoverDirs(); err != nil {
		return nil, fmt.Errorf("raftstore: OpenFSM %s: %w", dir, err)
	}
	if err := f.openDB(); err != nil {
		return nil, fmt.Errorf("raftstore: OpenFSM %s: %w", dir, err)
	}
	f.batch = f.db.NewBatch()
	return f, nil
}

func (f *FSM) incomingDir() string  { return f.dir + ".incoming" }
func (f *FSM) oldDir() string       { return f.dir + ".old" }
func (f *FSM) snapshotsDir() string { return f.dir + ".snapshots" }

func (f *FSM) exists(path string) (bool, error) {
	_, err := f.fs.Stat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// recoverDirs settles what an interrupted Restore left. Restore renames dir
// away only once the incoming directory is complete and synced, so a
// missing dir next to an incoming one means: finish the swap.
func (f *FSM) recoverDirs() error {
	haveDir, err := f.exists(f.dir)
	if err != nil {
		return err
	}
	haveIncoming, err := f.exists(f.incomingDir())
	if err != nil {
		return err
	}
	if !haveDir && haveIncoming {
		if err := f.fs.Rename(f.incomingDir(), f.dir); err != nil {
			return fmt.Errorf("finishing an interrupted restore: %w", err)
		}
		if err := f.syncParent(); err != nil {
			return err
		}
	}
	for _, d := range []string{f.incomingDir(), f.oldDir(), f.snapshotsDir()} {
		if err := f.fs.RemoveAll(d); err != nil {
			return fmt.Errorf("removing %s: %w", d, err)
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
	var applied uint64
	v, err := db.Get(appliedKey)
	switch {
	case err == nil && len(v) == 8:
		applied = binary.BigEndian.Uint64(v)
	case err == nil:
		err = corruptf("the FSM's applied index is %d bytes, want 8", len(v))
	case errors.Is(err, vigil.ErrNotFound):
		err = nil
	}
	if err != nil {
		_ = db.Close()
		return fmt.Errorf("reading the applied index: %w", err)
	}
	f.db = db
	f.applied.Store(applied)
	return nil
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
		f.batch = f.db.NewBatch()
	}
	f.applied.Store(last)
	return resps
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
// while Apply goes on.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if err := f.usable(); err != nil {
		return nil, err
	}
	if err := f.db.SyncWAL(); err != nil {
		return nil, fmt.Errorf("raftstore: FSM snapshot: %w", err)
	}
	dir := f.fs.PathJoin(f.snapshotsDir(), fmt.Sprintf("%06d", f.snapSeq.Add(1)))
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
// rc. The stream is checked (a checksum after every file) and written to
// dir + ".incoming" while the old DB stays open; only a complete, synced
// copy replaces it. A damaged stream is an error wrapping
// vigil.ErrCorruption and leaves the old DB in place.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	in := f.incomingDir()
	if err := f.fs.RemoveAll(in); err != nil {
		return fmt.Errorf("raftstore: FSM restore: %w", err)
	}
	if err := f.fs.MkdirAll(in, 0o755); err != nil {
		return fmt.Errorf("raftstore: FSM restore: %w", err)
	}
	if _, err := readSnapshot(rc, f.fs, in); err != nil {
		_ = f.fs.RemoveAll(in)
		return fmt.Errorf("raftstore: FSM restore: %w", err)
	}
	if err := vfsutil.SyncDir(f.fs, in); err != nil {
		_ = f.fs.RemoveAll(in)
		return fmt.Errorf("raftstore: FSM restore: %w", err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.swapIn(); err != nil {
		err = fmt.Errorf("raftstore: FSM stopped: restore: %w", err)
		f.failed.Store(&err)
		return err
	}
	f.failed.Store(nil)
	f.batch = f.db.NewBatch()
	f.restores.Add(1)
	return nil
}

// swapIn replaces the DB directory by the incoming one and opens it. f.mu
// is held exclusively.
func (f *FSM) swapIn() error {
	if f.db != nil {
		// The old state is about to be replaced: an error closing it
		// (say, a background error the DB had) loses nothing the
		// snapshot does not hold.
		_ = f.db.Close()
		f.db = nil
	}
	if err := f.fs.RemoveAll(f.oldDir()); err != nil {
		return err
	}
	if err := f.fs.Rename(f.dir, f.oldDir()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := f.fs.Rename(f.incomingDir(), f.dir); err != nil {
		return err
	}
	if err := f.syncParent(); err != nil {
		return err
	}
	if err := f.fs.RemoveAll(f.oldDir()); err != nil {
		return err
	}
	return f.openDB()
}

// Close closes the FSM's DB. Call it after raft.Raft.Shutdown has
// returned; Get and View fail with vigil.ErrClosed afterwards.
func (f *FSM) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db == nil {
		return nil
	}
	err := f.db.Close()
	f.db = nil
	if err != nil {
		return fmt.Errorf("raftstore: closing FSM: %w", err)
	}
	return nil
}
