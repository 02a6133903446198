package vigil

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/vfs"
)

// gatedFS holds or fails the syncs of WAL files (*.log) on command, so that
// a test can see what a synced write does while its fsync is pending and
// when it fails; and holds those of tables (*.sst), so that a flush stays
// in progress.
type gatedFS struct {
	vfs.FS
	mu     sync.Mutex
	cond   *sync.Cond
	closed bool  // WAL syncs wait while closed
	fail   error // WAL syncs return it while set
	tables bool  // table syncs wait while set
	held   int   // WAL syncs asleep at the gate, not yet woken
}

func newGatedFS() *gatedFS {
	g := &gatedFS{FS: vfs.NewMem()}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gatedFS) wrap(f vfs.File, err error, name string) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") && !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	return &gatedFile{File: f, g: g, table: strings.HasSuffix(name, ".sst")}, nil
}

func (g *gatedFS) Create(name string) (vfs.File, error) {
	f, err := g.FS.Create(name)
	return g.wrap(f, err, name)
}

func (g *gatedFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(oldname, newname)
	return g.wrap(f, err, newname)
}

func (g *gatedFS) set(closed bool, fail error) {
	g.mu.Lock()
	g.closed, g.fail = closed, fail
	g.held = 0
	g.cond.Broadcast()
	g.mu.Unlock()
}

func (g *gatedFS) holdTables(hold bool) {
	g.mu.Lock()
	g.tables = hold
	g.cond.Broadcast()
	g.mu.Unlock()
}

func (g *gatedFS) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

type gatedFile struct {
	vfs.File
	g     *gatedFS
	table bool
}

func (f *gatedFile) gate() error {
	g := f.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if f.table {
		for g.tables {
			g.cond.Wait()
		}
		return nil
	}
	for g.closed && g.fail == nil {
		g.held++ // reset by set's broadcast
		g.cond.Wait()
	}
	return g.fail
}

func (f *gatedFile) Sync() error {
	if err := f.gate(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *gatedFile) SyncData() error {
	if err := f.gate(); err != nil {
		return err
	}
	return f.File.SyncData()
}

// TestCommitRules runs the data-driven files of the write path's rules:
// testdata/commit_stall (when a write stalls, why, and what lets it go on)
// and testdata/commit_sync (what a synced write's readers see while its
// fsync is pending, after it, and after it fails). Writes run on
// goroutines of their own ("put name key=value [sync] [size=n]"); after
// each command the test waits until every write has returned, or waits
// (stalled, or at the fsync gate), and prints the writes that returned and
// those still waiting.
func TestCommitRules(t *testing.T) {
	for _, file := range []string{"testdata/commit_stall", "testdata/commit_sync"} {
		t.Run(file, func(t *testing.T) { runCommitRules(t, file) })
	}
}

func runCommitRules(t *testing.T, file string) {
	var d *DB
	var fs *gatedFS
	var stalls []string
	var stallMu sync.Mutex
	pending := map[string]chan error{}
	// waiters counts the writes that wait: stalled, at the fsync gate, or
	// in the publisher behind an earlier write.
	waiters := func() int {
		d.pub.mu.Lock()
		n := d.pub.waiting
		d.pub.mu.Unlock()
		return n + int(d.Metrics().Stall.Waiting) + fs.waiting()
	}
	settle := func() string {
		var out []string
		collect := func() bool {
			any := false
			for name, ch := range pending {
				select {
				case err := <-ch:
					delete(pending, name)
					any = true
					if err != nil {
						// Which background error stopped writes first
						// (the failed sync, or the next WAL's, created
						// behind it) depends on timing: only the kind shows.
						msg := err.Error()
						if i := strings.Index(msg, "background error: "); i >= 0 {
							msg = msg[:i+len("background error")] + ": ..."
						}
						out = append(out, fmt.Sprintf("%s: %s", name, msg))
					} else {
						out = append(out, name+": done")
					}
				default:
				}
			}
			return any
		}
		// Settled: every write returned or waits, and stays so for a
		// while (a writer just woken still counts as waiting until it
		// runs).
		for deadline := time.Now().Add(10 * time.Second); ; {
			if !collect() && waiters() >= len(pending) {
				time.Sleep(20 * time.Millisecond)
				if !collect() && waiters() >= len(pending) {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d writes neither returned nor wait", len(pending))
			}
			runtime.Gosched()
		}
		for name := range pending {
			out = append(out, name+": waiting")
		}
		stallMu.Lock()
		out = append(out, stalls...)
		stalls = nil
		stallMu.Unlock()
		slices.Sort(out)
		if len(out) == 0 {
			return ""
		}
		return strings.Join(out, "\n") + "\n"
	}
	defer func() {
		if d != nil {
			fs.set(false, nil)
			fs.holdTables(false)
			d.Close()
		}
	}()
	datadriven.RunTest(t, file, func(t *testing.T, td *datadriven.TestData) string {
		switch td.Cmd {
		case "open":
			if d != nil {
				fs.set(false, nil)
				fs.holdTables(false)
				settle()
				d.Close()
			}
			pending = map[string]chan error{}
			fs = newGatedFS()
			o := &Options{FS: fs, WriteBufferSize: 64 << 10, DisableAutomaticCompactions: true, L0CompactionTrigger: 1,
				L0SlowdownWritesTrigger: 1, DelayedWriteRate: 1 << 40, MaxImmutableMemtables: 1}
			td.MaybeScanArgs(t, "l0-stop", &o.L0StopWritesTrigger)
			td.MaybeScanArgs(t, "max-imm", &o.MaxImmutableMemtables)
			o.EventListener = &EventListener{WriteStallBegin: func(i StallInfo) {
				if i.Reason == stallNoSpareWAL {
					// A brief wait for the next WAL, which the
					// background prepares: whether a rotation meets
					// one depends on timing, so it is not shown.
					return
				}
				stallMu.Lock()
				stalls = append(stalls, "stall: "+i.Reason)
				stallMu.Unlock()
			}}
			var err error
			if d, err = Open("db", o); err != nil {
				t.Fatal(err)
			}
			return ""
		case "put":
			name := td.CmdArgs[0].Key
			var key, value string
			size := 0
			td.ScanArgs(t, "key", &key)
			td.MaybeScanArgs(t, "value", &value)
			td.MaybeScanArgs(t, "size", &size)
			if size > len(value) {
				value += strings.Repeat("v", size-len(value))
			}
			var wo *WriteOptions
			if td.HasArg("sync") {
				wo = Sync
			}
			ch := make(chan error, 1)
			pending[name] = ch
			go func() { ch <- d.Put([]byte(key), []byte(value), wo) }()
			return settle()
		case "get":
			var out strings.Builder
			for _, a := range td.CmdArgs {
				v, err := d.Get([]byte(a.Key))
				switch {
				case errors.Is(err, ErrNotFound):
					fmt.Fprintf(&out, "%s: not found\n", a.Key)
				case err != nil:
					fmt.Fprintf(&out, "%s: %v\n", a.Key, err)
				default:
					fmt.Fprintf(&out, "%s=%.8s (%d bytes)\n", a.Key, v, len(v))
				}
			}
			return out.String()
		case "flush":
			if err := d.Flush(); err != nil {
				return err.Error() + "\n" + settle()
			}
			return settle()
		case "compact":
			if err := d.Compact(nil, nil); err != nil {
				return err.Error() + "\n" + settle()
			}
			return settle()
		case "l0":
			d.mu.Lock()
			defer d.mu.Unlock()
			return fmt.Sprintf("L0 files: %d; immutable memtables: %d\n", len(d.vs.current.Levels[0]), len(d.imm))
		case "hold-table-syncs":
			fs.holdTables(true)
			return ""
		case "release-table-syncs":
			fs.holdTables(false)
			return settle()
		case "hold-syncs":
			fs.set(true, nil)
			return ""
		case "release-syncs":
			fs.set(false, nil)
			return settle()
		case "fail-syncs":
			fs.set(true, errors.New("injected fsync failure"))
			return settle()
		}
		t.Fatalf("unknown command %q", td.Cmd)
		return ""
	})
}
