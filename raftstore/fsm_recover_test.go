package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/internal/vfsutil"
)

// fsmStream is the snapshot stream of an FSM that applied one put, key =
// value, at index.
func fsmStream(t *testing.T, index uint64, key, value string) []byte {
	t.Helper()
	f := openTestFSM(t, vfs.NewMem(), "/fsm")
	defer f.Close()
	f.Apply(putCmd(index, key, value))
	return persist(t, f)
}

// materialize writes the DB of stream into directory dir of fs.
func materialize(t *testing.T, fs vfs.FS, dir string, stream []byte) {
	t.Helper()
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := readSnapshot(bytes.NewReader(stream), fs, dir); err != nil {
		t.Fatal(err)
	}
}

func token(i int) string { return fmt.Sprintf("%032x", i+0xabc) }

// OpenFSM settles every state a Restore can be interrupted in, from the
// names beside the DB directory alone, and touches nothing else.
func TestFSMRecoversInterruptedRestore(t *testing.T) {
	oldStream := fsmStream(t, 1, "old", "x")
	newStream := fsmStream(t, 7, "restored", "yes")
	staleStream := fsmStream(t, 3, "stale", "z")
	t1, t2 := token(1), token(2)
	name := func(tok, suffix string) string { return "/fsm" + restoreInfix + tok + suffix }
	// Names that look like the FSM's but are not: OpenFSM must leave them.
	foreign := []string{
		"fsm.incoming", "fsm.old", "fsm.restore-xyz.new",
		"fsm.restore-" + t1 + ".tmp", "fsm.restore-" + strings.ToUpper(t1) + ".new",
	}
	foreignSnaps := []string{"mine", "ckpt-nothex", "000001", "ckpt-" + t1 + "x"}
	cases := []struct {
		name  string
		dirs  map[string][]byte // path -> DB stream
		want  string            // "old", "new", "stale" or "error"
		apply uint64
	}{
		{"restore writing: new beside the DB", map[string][]byte{"/fsm": oldStream, name(t1, restoreNew): newStream}, "old", 1},
		{"mid-swap: old and new, no DB", map[string][]byte{name(t1, restoreOld): oldStream, name(t1, restoreNew): newStream}, "new", 7},
		{"swapped: new DB, old beside it", map[string][]byte{"/fsm": newStream, name(t1, restoreOld): oldStream}, "new", 7},
		{"undoing: old and bad, no DB", map[string][]byte{name(t1, restoreOld): oldStream, name(t1, restoreBad): newStream}, "old", 1},
		{"undone: DB back, bad beside it", map[string][]byte{"/fsm": oldStream, name(t1, restoreBad): newStream}, "old", 1},
		{"only old, no DB", map[string][]byte{name(t1, restoreOld): oldStream}, "old", 1},
		{"stale lone old and a swap", map[string][]byte{
			name(t1, restoreOld): staleStream,
			name(t2, restoreOld): oldStream, name(t2, restoreNew): newStream,
		}, "new", 7},
		{"two swaps: ambiguous", map[string][]byte{
			name(t1, restoreOld): staleStream, name(t1, restoreNew): oldStream,
			name(t2, restoreOld): oldStream, name(t2, restoreNew): newStream,
		}, "error", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			for path, stream := range tc.dirs {
				materialize(t, fs, path, stream)
			}
			for _, n := range foreign {
				if err := fs.MkdirAll("/"+n, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, n := range append(slices.Clone(foreignSnaps), "ckpt-"+t1, "ckpt-"+t2+".tmp-0123456789abcdef", "ckpt-"+t2+".tmp") {
				if err := fs.MkdirAll("/fsm.snapshots/"+n, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := fs.List("/")
			f, err := OpenFSM("/fsm", &FSMOptions{Vigil: memOptions(fs)})
			if tc.want == "error" {
				if err == nil {
					f.Close()
					t.Fatal("OpenFSM guessed")
				}
				t.Logf("OpenFSM: %v", err)
				after, _ := fs.List("/")
				slices.Sort(before)
				slices.Sort(after)
				after = slices.DeleteFunc(after, func(n string) bool { return n == "fsm.lock" })
				if !slices.Equal(before, after) {
					t.Fatalf("a failed OpenFSM changed / from %v to %v", before, after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got := f.AppliedIndex(); got != tc.apply {
				t.Fatalf("AppliedIndex %d, want %d", got, tc.apply)
			}
			switch tc.want {
			case "old":
				checkGet(t, f, "old", "x")
				checkGet(t, f, "restored", "")
			case "new":
				checkGet(t, f, "restored", "yes")
				checkGet(t, f, "old", "")
			}
			checkGet(t, f, "stale", "")
			checkNoLeftovers(t, fs, "/", "fsm", append(slices.Clone(foreign), "fsm.snapshots")...)
			for _, n := range foreign {
				if _, err := fs.Stat("/" + n); err != nil {
					t.Errorf("%s: %v", n, err)
				}
			}
			snaps, _ := fs.List("/fsm.snapshots")
			slices.Sort(snaps)
			want := slices.Clone(foreignSnaps)
			slices.Sort(want)
			if !slices.Equal(snaps, want) {
				t.Errorf("/fsm.snapshots holds %v, want %v", snaps, want)
			}
		})
	}
}

// A second OpenFSM of a directory in use fails before it changes anything:
// a restore in flight is not a leftover.
func TestFSMOpenTwice(t *testing.T) {
	fs := vfs.NewMem()
	f := openTestFSM(t, fs, "/data/fsm")
	defer f.Close()
	f.Apply(putCmd(1, "a", "1"))
	inFlight := "/data/fsm" + restoreInfix + token(1) + restoreNew
	if err := fs.MkdirAll(inFlight, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"/data/fsm", "/data/fsm/", "/data/../data/fsm"} {
		if g, err := OpenFSM(dir, &FSMOptions{Vigil: memOptions(fs)}); err == nil {
			g.Close()
			t.Fatalf("a second OpenFSM(%q) succeeded", dir)
		}
	}
	if _, err := fs.Stat(inFlight); err != nil {
		t.Fatalf("the second OpenFSM removed what it did not own: %v", err)
	}
	checkGet(t, f, "a", "1")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(io.NopCloser(bytes.NewReader(fsmStream(t, 2, "b", "2")))); !errors.Is(err, vigil.ErrClosed) {
		t.Fatalf("Restore after Close: %v", err)
	}
	// Closed, the directory is free, and its leftovers are leftovers.
	g := openTestFSM(t, fs, "/data/fsm")
	defer g.Close()
	checkGet(t, g, "a", "1")
	checkNoLeftovers(t, fs, "/data", "fsm")
}

// crashFS is a strict MemFS that, once armed, counts syncs and ignores
// every one from the at-th on: what it keeps after ResetToSyncedState is
// what a crash just before that sync would leave. It logs the renames and
// directory syncs before the crash point.
type crashFS struct {
	*vfs.MemFS
	mu      sync.Mutex
	armed   bool
	n, at   int
	crashed bool
	log     []string
}

func (fs *crashFS) arm(at int) {
	fs.mu.Lock()
	fs.armed, fs.n, fs.at, fs.crashed, fs.log = true, 0, at, false, nil
	fs.mu.Unlock()
}

// disarm returns whether the crash point was reached, the syncs seen and
// the log up to the crash point.
func (fs *crashFS) disarm() (bool, int, []string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.armed = false
	return fs.crashed, fs.n, fs.log
}

func (fs *crashFS) sync(name string, dir bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.armed || fs.crashed {
		return
	}
	fs.n++
	if fs.n == fs.at {
		fs.crashed = true
		fs.MemFS.SetIgnoreSyncs(true)
		return
	}
	if dir {
		fs.log = append(fs.log, "sync "+name)
	}
}

func (fs *crashFS) Rename(from, to string) error {
	fs.mu.Lock()
	if fs.armed && !fs.crashed {
		fs.log = append(fs.log, "rename "+from+" "+to)
	}
	fs.mu.Unlock()
	return fs.MemFS.Rename(from, to)
}

type crashFile struct {
	vfs.File
	fs   *crashFS
	name string
	dir  bool
}

func (f crashFile) Sync() error                  { f.fs.sync(f.name, f.dir); return f.File.Sync() }
func (f crashFile) SyncData() error              { f.fs.sync(f.name, f.dir); return f.File.SyncData() }
func (f crashFile) SyncTo(n int64) (bool, error) { f.fs.sync(f.name, f.dir); return f.File.SyncTo(n) }

func (fs *crashFS) wrap(name string, dir bool) func(vfs.File, error) (vfs.File, error) {
	return func(f vfs.File, err error) (vfs.File, error) {
		if err != nil {
			return nil, err
		}
		return crashFile{f, fs, name, dir}, nil
	}
}

func (fs *crashFS) Create(name string) (vfs.File, error) {
	return fs.wrap(name, false)(fs.MemFS.Create(name))
}

func (fs *crashFS) Open(name string, o ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(name, false)(fs.MemFS.Open(name, o...))
}

func (fs *crashFS) OpenReadWrite(name string, o ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(name, false)(fs.MemFS.OpenReadWrite(name, o...))
}

func (fs *crashFS) OpenDir(name string) (vfs.File, error) {
	return fs.wrap(name, true)(fs.MemFS.OpenDir(name))
}

func (fs *crashFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	return fs.wrap(newname, false)(fs.MemFS.ReuseForWrite(oldname, newname))
}

// swapProgress reads a crashFS log of a Restore of /data/fsm: whether the
// DB directory had been renamed away, and whether the new one had been
// renamed into place and that rename synced.
func swapProgress(log []string) (started, done bool) {
	renamedIn := false
	for _, e := range log {
		switch {
		case strings.HasPrefix(e, "rename /data/fsm "):
			started = true
		case strings.HasPrefix(e, "rename ") && strings.HasSuffix(e, restoreNew+" /data/fsm"):
			renamedIn = true
		case renamedIn && e == "sync /data":
			done = true
		}
	}
	return started, done
}

// A crash at any point of a Restore leaves the old state or the new one
// once OpenFSM has run, never neither and never leftovers: the old one if
// the crash came before the DB directory was renamed away, the new one if
// it came after the new directory was renamed into place and synced.
func TestFSMRestoreCrash(t *testing.T) {
	src := srcFSM(t)
	good := checkpointStream(t, src, func(vfs.FS, string, []string) {})
	src.Close()
	outcomes := map[string]int{}
	for at := 1; ; at++ {
		if at > 5000 {
			t.Fatal("Restore never finished")
		}
		mem := vfs.NewStrictMem()
		fs := &crashFS{MemFS: mem}
		if err := fs.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := vfsutil.SyncDir(fs, "/"); err != nil {
			t.Fatal(err)
		}
		f := dstFSM(t, fs)
		// The old state is durable before the restore starts.
		if err := f.View(func(db *vigil.DB) error { return db.Flush() }); err != nil {
			t.Fatal(err)
		}
		fs.arm(at)
		err := f.Restore(io.NopCloser(bytes.NewReader(good)))
		crashed, syncs, log := fs.disarm()
		if !crashed && err != nil {
			t.Fatalf("Restore without a crash: %v", err)
		}
		f.Close() // after the crash point: none of it is durable
		if crashed {
			mem.ResetToSyncedState()
			mem.SetIgnoreSyncs(false)
		}
		started, done := swapProgress(log)
		f = openTestFSM(t, fs, "/data/fsm")
		switch got := f.AppliedIndex(); {
		case got == 10 && !done:
			outcomes[fmt.Sprintf("old (swap started %v)", started)]++
			checkOldState(t, f, fs, 0)
			if r := f.Apply(putCmd(11, "k11", "new11")); r != nil {
				t.Fatal(r)
			}
			checkOldState(t, f, fs, 11)
		case got == 50 && started:
			outcomes[fmt.Sprintf("new (swap done %v)", done)]++
			checkSource(t, f, 50)
			checkGet(t, f, "k1", "")
			checkNoLeftovers(t, fs, "/data", "fsm")
			if r := f.Apply(putCmd(51, "s51", "v51")); r != nil {
				t.Fatal(r)
			}
		default:
			t.Fatalf("crash before sync %d (swap started %v, done %v; %q): AppliedIndex %d", at, started, done, log, got)
		}
		f.Close()
		if !crashed {
			if !done || outcomes["new (swap done true)"] == 0 || outcomes["old (swap started false)"] == 0 {
				t.Fatalf("crash points missed a phase: %v", outcomes)
			}
			t.Logf("%d syncs in a Restore; outcomes %v", syncs, outcomes)
			return
		}
	}
}

// errFS fails the at-th file system change once armed (a create, rename,
// removal, directory creation, link, write or sync), and nothing else.
type errFS struct {
	vfs.FS
	mu     sync.Mutex
	armed  bool
	n, at  int
	failed string
	// match, if set, picks the op to fail instead of at: the first one it
	// accepts.
	match func(what string) bool
}

var errInjected = errors.New("injected error")

func (fs *errFS) op(what string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.armed {
		return nil
	}
	fs.n++
	if fs.match != nil {
		if fs.failed == "" && fs.match(what) {
			fs.failed = what
			return fmt.Errorf("%s: %w", what, errInjected)
		}
		return nil
	}
	if fs.n == fs.at {
		fs.failed = what
		return fmt.Errorf("%s: %w", what, errInjected)
	}
	return nil
}

// armMatch arms fs to fail the first op match accepts.
func (fs *errFS) armMatch(match func(what string) bool) {
	fs.mu.Lock()
	fs.armed, fs.n, fs.at, fs.failed, fs.match = true, 0, 0, "", match
	fs.mu.Unlock()
}

func (fs *errFS) arm(at int) {
	fs.mu.Lock()
	fs.armed, fs.n, fs.at, fs.failed = true, 0, at, ""
	fs.mu.Unlock()
}

func (fs *errFS) disarm() string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.armed = false
	return fs.failed
}

type errFile struct {
	vfs.File
	fs *errFS
}

func (f errFile) Write(p []byte) (int, error) {
	if err := f.fs.op("write"); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f errFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.op("write"); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f errFile) Sync() error {
	if err := f.fs.op("sync"); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f errFile) SyncData() error {
	if err := f.fs.op("sync"); err != nil {
		return err
	}
	return f.File.SyncData()
}

func (f errFile) SyncTo(n int64) (bool, error) {
	if err := f.fs.op("sync"); err != nil {
		return false, err
	}
	return f.File.SyncTo(n)
}

func (fs *errFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return errFile{f, fs}, nil
}

func (fs *errFS) Create(name string) (vfs.File, error) {
	if err := fs.op("create " + name); err != nil {
		return nil, err
	}
	return fs.wrap(fs.FS.Create(name))
}

func (fs *errFS) Open(name string, o ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.Open(name, o...))
}

func (fs *errFS) OpenReadWrite(name string, o ...vfs.OpenOption) (vfs.File, error) {
	if err := fs.op("open for writing " + name); err != nil {
		return nil, err
	}
	return fs.wrap(fs.FS.OpenReadWrite(name, o...))
}

func (fs *errFS) OpenDir(name string) (vfs.File, error) { return fs.wrap(fs.FS.OpenDir(name)) }

func (fs *errFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	if err := fs.op("reuse " + oldname); err != nil {
		return nil, err
	}
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname))
}

func (fs *errFS) Rename(from, to string) error {
	if err := fs.op("rename " + from + " to " + to); err != nil {
		return err
	}
	return fs.FS.Rename(from, to)
}

func (fs *errFS) Remove(name string) error {
	if err := fs.op("remove " + name); err != nil {
		return err
	}
	return fs.FS.Remove(name)
}

func (fs *errFS) RemoveAll(name string) error {
	if err := fs.op("remove all " + name); err != nil {
		return err
	}
	return fs.FS.RemoveAll(name)
}

func (fs *errFS) MkdirAll(name string, perm os.FileMode) error {
	if err := fs.op("mkdir " + name); err != nil {
		return err
	}
	return fs.FS.MkdirAll(name, perm)
}

func (fs *errFS) Link(from, to string) error {
	if err := fs.op("link " + from); err != nil {
		return err
	}
	return fs.FS.Link(from, to)
}

// An I/O error at any step of a Restore leaves the old state (the swap is
// undone) or, if the restore went through, the new one; the FSM never
// stops, and OpenFSM finds no more than a removal that failed left.
func TestFSMRestoreIOError(t *testing.T) {
	src := srcFSM(t)
	good := checkpointStream(t, src, func(vfs.FS, string, []string) {})
	src.Close()
	for at := 1; ; at++ {
		if at > 5000 {
			t.Fatal("Restore never finished")
		}
		fs := &errFS{FS: vfs.NewMem()}
		f := dstFSM(t, fs)
		fs.arm(at)
		err := f.Restore(io.NopCloser(bytes.NewReader(good)))
		failed := fs.disarm()
		if failed == "" {
			if err != nil {
				t.Fatalf("Restore without a fault: %v", err)
			}
			t.Logf("%d file system changes in a Restore", at-1)
			f.Close()
			break
		}
		if err := f.Err(); err != nil {
			t.Fatalf("fault %d (%s) stopped the FSM: %v", at, failed, err)
		}
		if err != nil {
			if !errors.Is(err, errInjected) {
				t.Fatalf("fault %d (%s): Restore: %v, not the injected error", at, failed, err)
			}
			checkOldState(t, f, fs, 0)
			if r := f.Apply(putCmd(11, "k11", "new11")); r != nil {
				t.Fatalf("fault %d (%s): Apply after the failed restore: %v", at, failed, r)
			}
			checkOldState(t, f, fs, 11)
		} else {
			if got := f.AppliedIndex(); got != 50 {
				t.Fatalf("fault %d (%s): Restore succeeded with AppliedIndex %d", at, failed, got)
			}
			checkSource(t, f, 50)
		}
		want := f.AppliedIndex()
		if err := f.Close(); err != nil {
			t.Fatalf("fault %d (%s): Close: %v", at, failed, err)
		}
		f = openTestFSM(t, fs, "/data/fsm")
		if got := f.AppliedIndex(); got != want {
			t.Fatalf("fault %d (%s): AppliedIndex %d after a reopen, was %d", at, failed, got, want)
		}
		checkNoLeftovers(t, fs, "/data", "fsm")
		f.Close()
	}
	// The swap's two renames, each failed on purpose: the fault positions
	// above move with the DB's background work (a flush, the next WAL), so
	// they need not have hit them.
	for _, swap := range []struct {
		name  string
		match func(string) bool
	}{
		{"the old DB out", func(w string) bool { return strings.HasPrefix(w, "rename /data/fsm to ") }},
		{"the new DB in", func(w string) bool { return strings.HasPrefix(w, "rename ") && strings.HasSuffix(w, " to /data/fsm") }},
	} {
		fs := &errFS{FS: vfs.NewMem()}
		f := dstFSM(t, fs)
		fs.armMatch(swap.match)
		err := f.Restore(io.NopCloser(bytes.NewReader(good)))
		failed := fs.disarm()
		if failed == "" || !errors.Is(err, errInjected) {
			t.Fatalf("a fault in the rename of %s (%q): Restore = %v", swap.name, failed, err)
		}
		if err := f.Err(); err != nil {
			t.Fatalf("a fault in the rename of %s stopped the FSM: %v", swap.name, err)
		}
		checkOldState(t, f, fs, 0)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		f = openTestFSM(t, fs, "/data/fsm")
		checkOldState(t, f, fs, 0)
		checkNoLeftovers(t, fs, "/data", "fsm")
		f.Close()
	}
}

// The same on the operating system's file system, where the restore
// directory is made with mkdir(2) and the lock is an OFD lock.
func TestFSMRestoreOnDisk(t *testing.T) {
	src := srcFSM(t)
	good := checkpointStream(t, src, func(vfs.FS, string, []string) {})
	src.Close()
	root := t.TempDir()
	dir := vfs.Default.PathJoin(root, "fsm")
	open := func() *FSM {
		t.Helper()
		f, err := OpenFSM(dir, &FSMOptions{Vigil: memOptions(vfs.Default)})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := open()
	defer func() { f.Close() }()
	f.Apply(putCmd(1, "a", "1"))
	if g, err := OpenFSM(dir, &FSMOptions{Vigil: memOptions(vfs.Default)}); err == nil {
		g.Close()
		t.Fatal("a second OpenFSM of a directory in use succeeded")
	}
	bad := streamOfFiles(t, map[string][]byte{"CURRENT": []byte("MANIFEST-000042\n")})
	if err := f.Restore(io.NopCloser(bytes.NewReader(bad))); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("Restore of a dangling CURRENT: %v", err)
	}
	checkGet(t, f, "a", "1")
	checkNoLeftovers(t, vfs.Default, root, "fsm")
	if err := f.Restore(io.NopCloser(bytes.NewReader(good))); err != nil {
		t.Fatal(err)
	}
	checkSource(t, f, 50)
	checkGet(t, f, "a", "")
	checkNoLeftovers(t, vfs.Default, root, "fsm")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = open()
	if got := f.AppliedIndex(); got != 50 {
		t.Fatalf("AppliedIndex after a reopen: %d", got)
	}
}
