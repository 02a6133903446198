package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
)

// bufSink is a raft.SnapshotSink into memory.
type bufSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *bufSink) ID() string    { return "test" }
func (s *bufSink) Cancel() error { s.cancelled = true; return nil }
func (s *bufSink) Close() error  { s.closed = true; return nil }

func openTestFSM(t *testing.T, fs vfs.FS, dir string) *FSM {
	t.Helper()
	f, err := OpenFSM(dir, &FSMOptions{Vigil: memOptions(fs)})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func putCmd(index uint64, kv ...string) *raft.Log {
	var ops []Op
	for i := 0; i+1 < len(kv); i += 2 {
		ops = append(ops, Op{Kind: OpPut, Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: AppendCommand(nil, ops...)}
}

func checkGet(t *testing.T, f *FSM, key, want string) {
	t.Helper()
	v, err := f.Get([]byte(key))
	if want == "" {
		if !errors.Is(err, vigil.ErrNotFound) {
			t.Fatalf("Get(%q) = %q, %v; want not found", key, v, err)
		}
		return
	}
	if err != nil || string(v) != want {
		t.Fatalf("Get(%q) = %q, %v; want %q", key, v, err, want)
	}
}

func persist(t *testing.T, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed=%v cancelled=%v", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

func TestFSMApply(t *testing.T) {
	fs := vfs.NewMem()
	f := openTestFSM(t, fs, "/fsm")
	if r := f.Apply(putCmd(1, "a", "1", "b", "2")); r != nil {
		t.Fatal(r)
	}
	resps := f.ApplyBatch([]*raft.Log{
		putCmd(2, "c", "3"),
		{Index: 3, Type: raft.LogConfiguration, Data: []byte("not a command")},
		{Index: 4, Type: raft.LogCommand, Data: AppendCommand(nil, Op{Kind: OpDelete, Key: []byte("a")})},
		{Index: 5, Type: raft.LogCommand, Data: []byte{0xee}},
	})
	if resps[0] != nil || resps[1] != nil || resps[2] != nil {
		t.Fatalf("responses %v", resps)
	}
	if err, ok := resps[3].(error); !ok || !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("response to a bad command: %v", resps[3])
	}
	checkGet(t, f, "a", "")
	checkGet(t, f, "b", "2")
	checkGet(t, f, "c", "3")
	if got := f.AppliedIndex(); got != 5 {
		t.Fatalf("AppliedIndex = %d", got)
	}
	// A replay of applied entries changes nothing.
	sum, _ := f.Checksum()
	f.ApplyBatch([]*raft.Log{putCmd(2, "c", "replayed"), putCmd(5, "z", "z")})
	checkGet(t, f, "c", "3")
	if sum2, _ := f.Checksum(); sum2 != sum {
		t.Fatal("a replay changed the state")
	}
	// The applied index survives a reopen.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get([]byte("b")); !errors.Is(err, vigil.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	f = openTestFSM(t, fs, "/fsm")
	defer f.Close()
	if got := f.AppliedIndex(); got != 5 {
		t.Fatalf("AppliedIndex after reopen = %d", got)
	}
	checkGet(t, f, "b", "2")
}

func TestFSMSnapshotRestore(t *testing.T) {
	src := openTestFSM(t, vfs.NewMem(), "/fsm")
	defer src.Close()
	for i := uint64(1); i <= 3000; i++ {
		src.Apply(putCmd(i, fmt.Sprintf("key%05d", i), fmt.Sprintf("value-%d", i)))
		if i == 1500 {
			// Some tables, some WAL: the checkpoint has both.
			if err := src.View(func(db *vigil.DB) error { return db.Flush() }); err != nil {
				t.Fatal(err)
			}
		}
	}
	stream := persist(t, src)
	// Writes after the snapshot are not in it.
	src.Apply(putCmd(3001, "late", "x"))

	dstFS := vfs.NewMem()
	dst := openTestFSM(t, dstFS, "/data/fsm")
	dst.Apply(putCmd(1, "old", "state"))
	if err := dst.Restore(io.NopCloser(bytes.NewReader(stream))); err != nil {
		t.Fatal(err)
	}
	checkGet(t, dst, "old", "")
	checkGet(t, dst, "late", "")
	checkGet(t, dst, "key01234", "value-1234")
	if got := dst.AppliedIndex(); got != 3000 {
		t.Fatalf("restored AppliedIndex = %d", got)
	}
	if st := dst.Stats(); st.Restores != 1 {
		t.Fatalf("stats %+v", st)
	}
	// The same entries after the snapshot give the same state.
	dst.Apply(putCmd(3001, "late", "x"))
	a, err1 := src.Checksum()
	b, err2 := dst.Checksum()
	if err1 != nil || err2 != nil || a != b {
		t.Fatalf("checksums %x (%v) and %x (%v)", a, err1, b, err2)
	}
	// No leftovers: the checkpoint was released, the old DB removed.
	checkNoLeftovers(t, dstFS, "/data", "fsm")
	if names, _ := src.fs.List("/fsm.snapshots"); len(names) != 0 {
		t.Errorf("checkpoints left behind: %v", names)
	}
	// The restored DB is the one reopened.
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	dst = openTestFSM(t, dstFS, "/data/fsm")
	defer dst.Close()
	if c, _ := dst.Checksum(); c != a {
		t.Fatal("checksum changed across a reopen")
	}
}

func TestFSMRestoreDamaged(t *testing.T) {
	src := openTestFSM(t, vfs.NewMem(), "/fsm")
	defer src.Close()
	for i := uint64(1); i <= 50; i++ {
		src.Apply(putCmd(i, fmt.Sprintf("k%d", i), "v"))
	}
	stream := persist(t, src)
	dst := openTestFSM(t, vfs.NewMem(), "/fsm")
	defer dst.Close()
	dst.Apply(putCmd(1, "mine", "kept"))
	want, _ := dst.Checksum()
	step := max(1, len(stream)/97)
	for i := 0; i < len(stream); i += step {
		for _, damaged := range [][]byte{
			flipped(stream, i),
			stream[:i], // truncated
		} {
			err := dst.Restore(io.NopCloser(bytes.NewReader(damaged)))
			if !errors.Is(err, vigil.ErrCorruption) {
				t.Fatalf("restore of a stream damaged at byte %d of %d: %v, want ErrCorruption", i, len(stream), err)
			}
		}
	}
	if got, _ := dst.Checksum(); got != want {
		t.Fatal("a failed restore changed the state")
	}
	checkGet(t, dst, "mine", "kept")
	if err := dst.Restore(io.NopCloser(bytes.NewReader(append(bytes.Clone(stream), 0)))); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("trailing byte: %v", err)
	}
}

func flipped(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x10
	return c
}

// failFS fails every file write once armed.
type failFS struct {
	vfs.FS
	armed *atomic.Bool
}

type failFile struct {
	vfs.File
	armed *atomic.Bool
}

func (fs failFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	return failFile{f, fs.armed}, err
}

func (f failFile) Write(p []byte) (int, error) {
	if f.armed.Load() {
		return 0, errors.New("injected write error")
	}
	return f.File.Write(p)
}

func (f failFile) Sync() error {
	if f.armed.Load() {
		return errors.New("injected sync error")
	}
	return f.File.Sync()
}

func (f failFile) SyncData() error { return f.Sync() }

func (f failFile) WriteAt(p []byte, off int64) (int, error) {
	if f.armed.Load() {
		return 0, errors.New("injected write error")
	}
	return f.File.WriteAt(p, off)
}

func TestFSMStopsOnWriteError(t *testing.T) {
	var armed atomic.Bool
	fs := failFS{vfs.NewMem(), &armed}
	f, err := OpenFSM("/fsm", &FSMOptions{Vigil: &vigil.Options{FS: fs, WriteBufferSize: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Apply(putCmd(1, "a", "1"))
	armed.Store(true)
	// Unsynced writes reach the WAL file in the background: keep applying
	// until the DB reports the failure.
	var resp any
	for i := uint64(2); i < 100000 && resp == nil; i++ {
		resp = f.Apply(putCmd(i, fmt.Sprintf("k%d", i), string(make([]byte, 1000))))
	}
	if resp == nil {
		t.Fatal("no write failed")
	}
	if f.Err() == nil {
		t.Fatal("Err() is nil after a failed apply")
	}
	if r := f.Apply(putCmd(1<<40, "b", "2")); r == nil {
		t.Fatal("Apply went on after a failure")
	}
	if _, err := f.Snapshot(); err == nil {
		t.Fatal("Snapshot went on after a failure")
	}
}

// FuzzReadSnapshot: an arbitrary stream never panics and is either
// accepted or refused with ErrCorruption.
func FuzzReadSnapshot(f *testing.F) {
	src, err := OpenFSM("/fsm", &FSMOptions{Vigil: memOptions(vfs.NewMem())})
	if err != nil {
		f.Fatal(err)
	}
	src.Apply(putCmd(1, "k", "v"))
	snap, err := src.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		f.Fatal(err)
	}
	snap.Release()
	src.Close()
	f.Add(sink.Bytes())
	f.Add([]byte(snapMagic + "\x01E\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fs := vfs.NewMem()
		if err := fs.MkdirAll("/in", 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := readSnapshot(bytes.NewReader(b), fs, "/in"); err != nil && !errors.Is(err, vigil.ErrCorruption) {
			t.Fatalf("error not wrapping ErrCorruption: %v", err)
		}
	})
}
