package stress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/vfs"
)

// Kill mode.
//
// The parent owns the truth between runs: the expected-state file (every
// key's verified state and next version). For each run it writes that
// file and a child configuration, starts the child, and SIGKILLs it after
// a random delay. The child loads the state into its oracle, opens the DB
// (recovering whatever the previous kill left), and runs the workload,
// checking its own reads live. Before each write it appends the intent
// (operation, keys, versions, sync flag, invocation tick) to its op log,
// and after the DB call the answer (ok or failed, acknowledgement tick),
// each with one write system call. A SIGKILL loses the DB's in-process
// WAL buffer but nothing the kernel already has, so the op log is complete
// up to the kill while the DB may have lost its unsynced tail.
//
// After the kill the parent opens the DB itself, reads it whole and runs
// the crash checker over the op log: acknowledged synced writes (with a
// WAL), writes acknowledged before a returned Flush or clean Close must be
// there, in-flight ones may or may not, and the rest must form a prefix of
// the commit order. The recovered state becomes the next expected state.

// childConfig is what the parent tells a child. Stored as JSON.
type childConfig struct {
	Plan      plan   `json:"plan"`
	Run       int    `json:"run"`
	DBDir     string `json:"db_dir"`
	StateFile string `json:"state_file"`
	OpLog     string `json:"op_log"`
	// MaxLife ends a child the parent failed to kill.
	MaxLife   time.Duration `json:"max_life"`
	TestFault string        `json:"test_fault,omitempty"`
}

// Exit statuses of a child.
const (
	childExitTimeout    = 0 // lived MaxLife without being killed
	childExitDivergence = 1
	childExitError      = 2
)

// SelfCommand returns a Config.ChildCommand that runs exe with args and a
// final "--child=PATH" argument. On Linux the child also gets SIGKILL if
// the parent dies, so an interrupted run leaves no orphan.
func SelfCommand(exe string, args ...string) func(configPath string) *exec.Cmd {
	return func(configPath string) *exec.Cmd {
		a := append(append([]string{}, args...), "--child="+configPath)
		cmd := exec.Command(exe, a...)
		setPdeathsig(cmd)
		return cmd
	}
}

// RunChild is the body of a kill-mode child process: configPath names the
// configuration its parent wrote. It returns the process exit status; the
// parent normally kills the child long before it returns.
func RunChild(ctx context.Context, configPath string, stderr io.Writer) int {
	data, err := readFile(vfs.Default, configPath)
	if err != nil {
		fmt.Fprintf(stderr, "stress child: %v\n", err)
		return childExitError
	}
	var cc childConfig
	if err := json.Unmarshal(data, &cc); err != nil {
		fmt.Fprintf(stderr, "stress child: decoding %s: %v\n", configPath, err)
		return childExitError
	}
	states, next, err := readState(vfs.Default, cc.StateFile)
	if err != nil {
		fmt.Fprintf(stderr, "stress child: %v\n", err)
		return childExitError
	}
	p := cc.Plan
	if len(states) != p.Keys {
		fmt.Fprintf(stderr, "stress child: state file has %d keys, plan %d\n", len(states), p.Keys)
		return childExitError
	}
	// Each run draws different operations from the same plan.
	p.Seed = mix64(p.Seed, uint64(cc.Run))
	cfg := Config{Seed: p.Seed, Duration: cc.MaxLife, Threads: p.Threads, Crash: CrashNone,
		FaultRate: p.FaultRate, Out: stderr, Log: discard{}, ProgressInterval: 100 * time.Millisecond, testFault: cc.TestFault}
	r := newRunner(cfg, p)
	r.child = true
	// Only the parent flips bits in files: a kill between a flip and its
	// undo would leave the parent a flip it knows nothing about.
	r.files = nil
	r.dbDir = cc.DBDir
	r.or.load(states, next)
	r.base = states
	r.log = &opLog{}
	if r.log.file, err = createOpLog(vfs.Default, cc.OpLog, p.Keys); err != nil {
		fmt.Fprintf(stderr, "stress child: %v\n", err)
		return childExitError
	}
	r.setupFS()
	res, err := r.runLocal(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "stress child run %d: %v\n", cc.Run, err)
		return childExitError
	}
	if res.Failure != nil {
		fmt.Fprintf(stderr, "stress child run %d:\n%s", cc.Run, res.Failure.Report())
		return childExitDivergence
	}
	return childExitTimeout
}

// killParent runs the kill loop.
type killParent struct {
	cfg   Config
	plan  plan
	kc    keyCodec
	vc    valueCodec
	fs    vfs.FS
	dir   string
	rng   *rand.Rand
	start time.Time

	states []kstate
	next   []uint32
	stats  counters
	ops    int64
	faults int64
	// files makes the --corrupt-files flips, before each recovery.
	files *fileFlipper
}

func runKillParent(ctx context.Context, cfg Config, p plan) (*Result, error) {
	k := &killParent{cfg: cfg, plan: p, kc: p.keyCodec(), vc: p.valueCodec(), fs: vfs.Default,
		rng: rand.New(rand.NewPCG(p.Seed, 0x4b11)), start: time.Now()}
	if p.CorruptFiles {
		k.files = newFileFlipper(p.Seed, p.FileFlipPct)
	}
	desc := p.describe(&cfg)
	fmt.Fprint(cfg.Out, desc)
	removeDir := false
	k.dir = cfg.Dir
	if k.dir == "" {
		k.dir = filepath.Join(os.TempDir(), fmt.Sprintf("vigil-stress-%d-%d", p.Seed, os.Getpid()))
		removeDir = true
	}
	if err := k.fs.MkdirAll(k.dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", k.dir, err)
	}
	// Start from an empty DB: the state file describes only what this run
	// wrote.
	if err := k.fs.RemoveAll(k.path("db")); err != nil {
		return nil, fmt.Errorf("removing an old DB in %s: %w", k.dir, err)
	}
	fmt.Fprintf(cfg.Out, "  kill-mode directory: %s\n", k.dir)
	k.states = make([]kstate, p.Keys)
	k.next = make([]uint32, p.Keys)
	for i := range k.states {
		k.states[i], k.next[i] = neverWritten, 1
	}
	res, err := k.loop(ctx)
	if res != nil {
		res.Plan = desc
		if res.Failure != nil {
			res.Failure.Seed = p.Seed
			res.Failure.Replay = p.replay(&cfg)
		}
		printSummary(cfg.Out, res, &p)
		if res.Failure == nil && err == nil && removeDir {
			k.fs.RemoveAll(k.dir)
		}
	}
	return res, err
}

func (k *killParent) path(name string) string { return k.fs.PathJoin(k.dir, name) }

func (k *killParent) logf(format string, args ...any) {
	fmt.Fprintf(k.cfg.Log, "[%7.1fs] %s\n", time.Since(k.start).Seconds(), fmt.Sprintf(format, args...))
}

func (k *killParent) result(fail *Divergence) *Result {
	s := &k.stats
	return &Result{Seed: k.plan.Seed, Ops: k.ops, Reads: s.reads.Load(), Writes: s.writes.Load(), Scans: s.scans.Load(),
		Kills: s.kills.Load(), Verifications: s.verifications.Load(), LostUnsynced: s.lostUnsynced.Load(), InjectedFaults: k.faults,
		StrictRecoveryRefusals: s.strictRefusals.Load(), FileFlips: k.files.snapshot(), Failure: fail, Elapsed: time.Since(k.start)}
}

func (k *killParent) loop(ctx context.Context) (*Result, error) {
	var deadline time.Time
	if k.cfg.Duration > 0 {
		deadline = k.start.Add(k.cfg.Duration)
	}
	lastProgress := time.Now()
	for run := 1; ; run++ {
		if ctx.Err() != nil || (!deadline.IsZero() && time.Now().After(deadline)) || (k.cfg.Ops > 0 && k.ops >= k.cfg.Ops) {
			break
		}
		if time.Since(lastProgress) >= k.cfg.ProgressInterval {
			lastProgress = time.Now()
			k.logf("child runs %d, kills %d, ops %d (%.0f/s), verifications %d", run-1, k.stats.kills.Load(), k.ops,
				float64(k.ops)/time.Since(k.start).Seconds(), k.stats.verifications.Load())
		}
		if fail, err := k.runChild(ctx, run, deadline); fail != nil || err != nil {
			return k.result(fail), err
		}
	}
	return k.result(nil), nil
}

// runChild runs, kills and verifies one child.
func (k *killParent) runChild(ctx context.Context, run int, deadline time.Time) (*Divergence, error) {
	stateFile, opLog, cfgFile := k.path("expected.state"), k.path("oplog"), k.path("child.json")
	if err := writeState(k.fs, stateFile, k.states, k.next); err != nil {
		return nil, err
	}
	// A child killed before it creates its op log must not leave the
	// previous run's log in place to be read as its own.
	if err := k.fs.Remove(opLog); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing the previous op log: %w", err)
	}
	cc := childConfig{Plan: k.plan, Run: run, DBDir: k.path("db"), StateFile: stateFile, OpLog: opLog,
		MaxLife: 10 * time.Minute, TestFault: k.cfg.testFault}
	data, err := json.Marshal(cc)
	if err != nil {
		return nil, err
	}
	if err := writeFile(k.fs, cfgFile, data); err != nil {
		return nil, err
	}
	cmd := k.cfg.ChildCommand(cfgFile)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting child: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Kill at a random moment: mostly within a second, sometimes while
	// the child is still recovering, sometimes after a few seconds of
	// work (a bigger LSM, more flushes and compactions).
	delay := time.Duration(float64(50*time.Millisecond) * (1 + k.rng.Float64()*float64(pick(k.rng, 2, 10, 20, 60))))
	if !deadline.IsZero() {
		if left := time.Until(deadline); left < delay {
			delay = max(left, 10*time.Millisecond)
		}
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == childExitDivergence {
			return &Divergence{Op: fmt.Sprintf("child run %d (live checks)", run), Detail: out.String()}, nil
		}
		return nil, fmt.Errorf("child run %d exited before it was killed (%v):\n%s", run, err, out.String())
	case <-ctx.Done():
	case <-timer.C:
	}
	_ = cmd.Process.Kill()
	<-exited
	k.stats.kills.Add(1)
	k.verbosef("killed child run %d after %v", run, delay)
	return k.verify(run, opLog, out.String())
}

func (k *killParent) verbosef(format string, args ...any) {
	if k.cfg.Verbose {
		k.logf(format, args...)
	}
}

// verify opens the DB left by a killed child and checks it against the
// child's op log.
func (k *killParent) verify(run int, opLogName, childOut string) (*Divergence, error) {
	contents, err := readOpLog(k.fs, opLogName)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			// Killed before it created its op log: it wrote nothing.
			contents = &opLogContents{numKeys: k.plan.Keys}
		} else {
			return nil, fmt.Errorf("child run %d: %w", run, err)
		}
	}
	if contents.numKeys != k.plan.Keys && (contents.numKeys != 0 || len(contents.ops) != 0) {
		return nil, fmt.Errorf("child run %d: op log for %d keys, plan has %d", run, contents.numKeys, k.plan.Keys)
	}
	k.ops += int64(contents.progress.ops)
	k.stats.reads.Add(int64(contents.progress.reads))
	k.stats.writes.Add(int64(contents.progress.writes))
	k.stats.scans.Add(int64(contents.progress.scans))
	k.faults += int64(contents.progress.faults)
	var ff *fileFlip
	if k.files.due() {
		if ff, err = k.files.flip(k.fs, k.path("db"), false, k.kc, k.vc, fmt.Sprintf("after killing child run %d", run)); err != nil {
			return nil, err
		}
		if ff != nil {
			k.verbosef("flipped %v", ff)
		}
	}
	db, res, err := openDB(k.path("db"), k.plan.options(k.fs), true, ff, func(error) { k.stats.strictRefusals.Add(1) })
	if err != nil {
		div := k.files.openFailure(fmt.Sprintf("open after killing child run %d", run), ff, res, err)
		if res.how == openMachinery {
			return nil, errors.New(div.Detail)
		}
		return div, nil
	}
	defer db.Close()
	k.stats.verifications.Add(1)
	s, err := wrapTestFault(k.cfg.testFault, dbStore{db})
	if err != nil {
		return nil, err
	}
	d := durability{cutoff: ^uint64(0), syncedWAL: !k.plan.DisableWAL, what: fmt.Sprintf("kill of child run %d", run)}
	var alts []durability
	var outs []fileOutcome
	if res.how == openFlipped {
		alts, outs = ff.alternatives(d, res.mode, db.Metrics())
	}
	which, div := k.check(s, run, d, alts, contents, childOut)
	if ff != nil {
		k.verbosef("file flip %s: %v", outcomeOf(res, outs, which, div), ff)
	}
	return k.files.judge(ff, res, outs, which, div), nil
}

// check reads the DB a killed child left and checks it against the
// child's op log under d (or one of alts, see solveWith), and makes the
// recovered state the next expected state. It returns the rule that
// explained the state.
func (k *killParent) check(s store, run int, d durability, alts []durability, contents *opLogContents, childOut string) (int, *Divergence) {
	rec, div := readAll(s, k.kc, k.vc, k.rng, fmt.Sprintf("verification after killing child run %d", run))
	if div != nil {
		return 0, div
	}
	base := k.states
	if contents.verified != nil {
		// The child reopened the DB and verified it: its operations
		// before that are settled, and may have lost writes (a close that
		// failed under faults counts as a crash), so the prefix rule
		// starts again from the state it verified.
		base = contents.verified
	}
	st, which, err := solveWith(k.kc, base, rec, contents.ops, d, alts)
	if err != nil {
		return 0, &Divergence{Op: "verification after a kill", Detail: err.Error() + "\nchild output:\n" + childOut}
	}
	k.stats.lostUnsynced.Add(int64(st.lostAcked))
	if err := s.Verify(); err != nil {
		return 0, &Divergence{Op: "DB.Verify after a kill", Got: err.Error()}
	}
	for _, o := range append(contents.settled, contents.ops...) {
		for _, w := range o.writes {
			if w.st.ver >= k.next[w.key] {
				k.next[w.key] = w.st.ver + 1
			}
		}
	}
	k.states = rec
	return which, nil
}

// writeFile writes a small file and syncs it.
func writeFile(fs vfs.FS, name string, data []byte) error {
	f, err := fs.Create(name)
	if err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", name, err)
	}
	return f.Close()
}

// lockedBuffer collects a child's output (written by exec's copying
// goroutines, read by the parent).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Keep the head and bound the size: a report is at the start.
	if l.b.Len() < 1<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
