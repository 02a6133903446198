package stress

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/internal/vfsutil"
)

// Result summarizes a run. Plain data: Run returns it when the run is
// over.
type Result struct {
	Seed uint64
	// Plan is the text printed at the start: seed, options, workload.
	Plan string
	// Operations by kind.
	Ops, Reads, Writes, Scans, Snapshots, Flushes, Compactions int64
	// Ingestions (of one external table each, half with an excise) and
	// checkpoints (each opened read-only and checked) that succeeded.
	Ingests, Checkpoints int64
	// Crashes (in-process), Kills (kill mode), clean Reopens and full
	// Verifications of the DB against the oracle.
	Crashes, Kills, Reopens, Verifications int64
	// Unverifiable counts reads whose key changed too often while they ran
	// to judge the result (see ringLen).
	Unverifiable int64
	// InjectedFaults counts I/O errors injected; ToleratedErrors the DB
	// calls that returned an error the mode allows (an injected fault, a
	// detected corruption, a closed DB during a crash).
	InjectedFaults, ToleratedErrors int64
	// StrictRecoveryRefusals counts opens after a crash that the WAL
	// recovery mode refused because of a torn WAL tail (absolute
	// consistency, tolerate-corrupted-tail), as documented; the runner
	// then recovers point-in-time.
	StrictRecoveryRefusals int64
	// LostUnsynced counts acknowledged writes that a crash or kill
	// legitimately lost (they were not yet durable): evidence that the
	// crashes bit, and that the checker allowed only what it should.
	LostUnsynced int64
	// Flips reports --corrupt-memory.
	Flips FlipStats
	// FileFlips reports --corrupt-files.
	FileFlips FileFlipStats
	// EmptyRanges counts range deletions with start == end the workers
	// issued (alone or in batches; each must be a no-op), InvertedRanges
	// the writes with start > end (each must fail with ErrInvalidArgument
	// and leave nothing behind). Not counted in kill mode (children's
	// counts stay in the children).
	EmptyRanges, InvertedRanges int64
	// Failure is the first divergence, or nil if the run passed.
	Failure *Divergence
	// Elapsed is the run's wall time.
	Elapsed time.Duration
}

// FlipStats counts the bit flips of --corrupt-memory and what became of
// them, per target. Reads classify each flip once: missed (a read returned
// wrong data without an error), detected at read (a read returned
// ErrCorruption), or neither. Independently, a flip is detected at flush
// or compaction if a Flush failed or a background error named corruption
// because of it — a memtable flip caught at read is usually caught at
// flush too. No effect counts flips neither reads nor flushes noticed (a
// flip in a cached block of a table no longer live, say). A batch flip
// has one outcome: detected at apply (Apply refused the batch with
// ErrCorruption and nothing of it is in the DB), missed (Apply wrote it),
// or no effect (the bit was in the header, which Apply rewrites).
type FlipStats struct {
	// ProtectionBytes and BatchProtectionBytes are the plan's memtable and
	// batch protection.
	ProtectionBytes, BatchProtectionBytes int
	// MemtableKey, MemtableValue and Block are flips in a point entry's
	// user key, in its value, and in a cached data block. MemtableRangeDel
	// are flips in a memtable range tombstone (start or end key): reads use
	// a copy of the tombstones checked when it was made, so these flips have
	// no effect at read and must be caught by flush validation.
	MemtableKey, MemtableValue, MemtableRangeDel, Block FlipCounts
	// Batch are flips in a write batch's buffer between its last Put and
	// Apply (see flipBatch), with batch protection on.
	Batch FlipCounts
	// MemtableCorruptions and BatchCorruptions sum
	// Metrics().MemTable.Corruptions and Metrics().BatchCorruptions over
	// the DB instances of the run.
	MemtableCorruptions, BatchCorruptions int64
}

// FlipCounts are the outcomes of the flips of one target.
type FlipCounts struct {
	Injected, DetectedAtRead, DetectedAtFlush, DetectedAtApply, Missed, NoEffect int64
}

func (c *FlipCounts) add(o FlipCounts) {
	c.Injected += o.Injected
	c.DetectedAtRead += o.DetectedAtRead
	c.DetectedAtFlush += o.DetectedAtFlush
	c.DetectedAtApply += o.DetectedAtApply
	c.Missed += o.Missed
	c.NoEffect += o.NoEffect
}

// Total sums the targets.
func (f FlipStats) Total() FlipCounts {
	var t FlipCounts
	t.add(f.MemtableKey)
	t.add(f.MemtableValue)
	t.add(f.MemtableRangeDel)
	t.add(f.Block)
	t.add(f.Batch)
	return t
}

// Divergence is a failed check: the DB did something the oracle says it
// must not. Plain data, like Result.
type Divergence struct {
	Seed uint64
	// Replay is the command line that reruns the plan.
	Replay   string
	Op       string
	Key      string
	Expected string
	Got      string
	Detail   string
}

// Error renders the divergence on one line (plus its detail), so that a
// *Divergence can travel as an error.
func (d *Divergence) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "divergence (seed %d): %s", d.Seed, d.Op)
	if d.Key != "" {
		fmt.Fprintf(&b, ", key %s", d.Key)
	}
	if d.Expected != "" || d.Got != "" {
		fmt.Fprintf(&b, ": expected %s, got %s", d.Expected, d.Got)
	}
	if d.Detail != "" {
		fmt.Fprintf(&b, "\n%s", d.Detail)
	}
	return b.String()
}

// Report renders the divergence for people: every field on its own line.
func (d *Divergence) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "DIVERGENCE\n")
	fmt.Fprintf(&b, "  seed:     %d\n", d.Seed)
	if d.Replay != "" {
		fmt.Fprintf(&b, "  replay:   %s\n", d.Replay)
	}
	fmt.Fprintf(&b, "  op:       %s\n", d.Op)
	if d.Key != "" {
		fmt.Fprintf(&b, "  key:      %s\n", d.Key)
	}
	if d.Expected != "" {
		fmt.Fprintf(&b, "  expected: %s\n", d.Expected)
	}
	if d.Got != "" {
		fmt.Fprintf(&b, "  got:      %s\n", d.Got)
	}
	if d.Detail != "" {
		for _, l := range strings.Split(d.Detail, "\n") {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	return b.String()
}

// counters are the run's statistics, updated atomically by workers.
type counters struct {
	ops, reads, writes, scans, snapshots, flushes, compactions atomic.Int64
	crashes, kills, reopens, verifications                     atomic.Int64
	unverifiable, tolerated, strictRefusals, lostUnsynced      atomic.Int64
	emptyRanges, invertedRanges                                atomic.Int64
	ingests, checkpoints                                       atomic.Int64
}

// maxEpochOps bounds the op log: past it the runner does a clean reopen
// (verifying and starting a new epoch) so memory stays bounded.
const maxEpochOps = 400000

// runner runs workers against one DB and checks them against the oracle.
//
// Concurrency: workers hold gate shared for each operation; events
// (crash, reopen, flip, final verification) hold it exclusively to stop
// the world, except that a crash closes the DB first, under the workers'
// feet, and only then waits for them. db and epoch change only under the
// exclusive gate. eventMu makes events one at a time.
type runner struct {
	cfg  Config
	plan plan
	kc   keyCodec
	vc   valueCodec
	or   *oracle
	// log is the epoch's writes, for the crash checker; nil when nothing
	// can leave a write in doubt (no crash, faults or flips), where the
	// oracle alone is exact.
	log   *opLog
	clock atomic.Uint64

	gate    sync.RWMutex
	db      store
	epoch   uint64
	closing atomic.Bool

	fs vfs.FS
	// baseFS is fs without the fault injector: the runner's own files (the
	// external tables it ingests) and its reads of checkpoints go through
	// it, so that an injected fault fails a DB call, never the check.
	baseFS vfs.FS
	mem    *vfs.MemFS
	inj    *faultInjector
	dbDir  string
	// faultsAtOpen is inj.injected when the DB was last opened: a DB that
	// saw faults may leave debris (a WAL whose header write failed) that
	// the strict WAL recovery modes refuse even after a clean close.
	faultsAtOpen int64

	stats    counters
	failure  atomic.Pointer[Divergence]
	stopFlag atomic.Bool
	start    time.Time
	deadline time.Time

	eventMu    sync.Mutex
	eventRng   *rand.Rand // eventMu
	nextCrash  atomic.Int64
	nextReopen atomic.Int64
	nextFlip   atomic.Int64
	needReopen atomic.Bool
	// base is every key's state at the last verification (gate exclusive).
	base []kstate

	recent    [64]atomic.Int64
	recentPos atomic.Uint64

	flips flipState
	// files makes the --corrupt-files flips (nil without the option, and
	// in kill-mode children).
	files *fileFlipper

	// child is set in a kill-mode child: no in-process crashes, an op log
	// file, and no final verification (the parent kills it).
	child bool
}

func newRunner(cfg Config, p plan) *runner {
	r := &runner{cfg: cfg, plan: p, kc: p.keyCodec(), vc: p.valueCodec(), or: newOracle(p.Keys)}
	if p.Crash != CrashNone || p.FaultRate > 0 || p.Corrupt || p.CorruptFiles {
		r.log = &opLog{}
	}
	if p.CorruptFiles {
		r.files = newFileFlipper(p.Seed, p.FileFlipPct)
	}
	r.eventRng = rand.New(rand.NewPCG(p.Seed, 0xe7e7))
	r.base = r.or.current()
	r.flips.stats.ProtectionBytes = p.Protection
	r.flips.stats.BatchProtectionBytes = p.BatchProtection
	return r
}

func (r *runner) tick() uint64 { return r.clock.Add(1) }

func (r *runner) stopped() bool { return r.stopFlag.Load() }

func (r *runner) stop() { r.stopFlag.Store(true) }

// fail records the first divergence and stops the run.
func (r *runner) fail(d *Divergence) {
	d.Seed = r.plan.Seed
	if r.plan.Corrupt {
		if c := r.flips.context(); c != "" {
			d.Detail = strings.TrimLeft(d.Detail+"\n"+c, "\n")
		}
	}
	if c := r.files.context(); c != "" {
		d.Detail = strings.TrimLeft(d.Detail+"\n"+c, "\n")
	}
	if r.failure.CompareAndSwap(nil, d) {
		r.logf("divergence: %s", d.Op)
	}
	r.stop()
}

func (r *runner) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "[%7.1fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
	}
}

func (r *runner) verbosef(format string, args ...any) {
	if r.cfg.Verbose {
		r.logf(format, args...)
	}
}

// setupFS builds the file system: strict MemFS for in-process crashes,
// plain MemFS for none, the real one for kill-mode children; wrapped with
// the fault injector when faults are on.
func (r *runner) setupFS() {
	switch {
	case r.child:
		r.fs = vfs.Default
	case r.plan.Crash == CrashInProcess:
		r.mem = vfs.NewStrictMem()
		r.fs = r.mem
	default:
		r.fs = vfs.NewMem()
	}
	r.baseFS = r.fs
	if r.plan.FaultRate > 0 {
		r.inj = newFaultInjector(r.plan.Seed, r.plan.FaultRate)
		r.fs = vfsutil.SyncDataAsSync(errorfs.Wrap(r.fs, r.inj))
	}
}

func (r *runner) setFaults(on bool) {
	if r.inj != nil {
		r.inj.enabled.Store(on)
	}
}

// open opens the DB with the plan's options. afterCrash allows the strict
// WAL recovery modes to refuse a torn tail, as documented; the runner then
// recovers point-in-time and counts it.
func (r *runner) open(afterCrash bool) (store, error) {
	db, _, err := openDB(r.dbDir, r.plan.options(r.fs), afterCrash, nil, r.strictRefusal)
	if err != nil {
		return nil, err
	}
	return r.adopt(db)
}

// strictRefusal counts an Open refused by a strict WAL recovery mode.
func (r *runner) strictRefusal(err error) {
	r.stats.strictRefusals.Add(1)
	r.verbosef("recovery mode %s refused the crashed WAL (%v); recovering point-in-time", r.plan.WALMode, err)
}

// adopt wraps a DB just opened for the runner.
func (r *runner) adopt(db *vigil.DB) (store, error) {
	if r.inj != nil {
		r.faultsAtOpen = r.inj.injected.Load()
	}
	s, err := wrapTestFault(r.cfg.testFault, dbStore{db})
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// tolerate reports whether err, returned by a DB call, is an outcome the
// mode allows. Anything else fails the run.
func (r *runner) tolerate(err error) bool {
	ok := false
	switch {
	case r.closing.Load():
		// A crash or close is under way: anything may fail.
		ok = true
	case r.plan.FaultRate > 0 && errors.Is(err, errorfs.ErrInjected):
		ok = true
	case r.inj != nil && errors.Is(err, vigil.ErrReadOnly) && r.inj.injected.Load() > r.faultsAtOpen:
		// Writers queued behind a batch whose WAL sync failed get a
		// read-only error that does not wrap the injected one ("an
		// earlier write's WAL sync failed"): tolerated once a fault hit
		// this DB.
		ok = true
	case r.plan.Corrupt && r.flips.tolerates(err):
		ok = true
	}
	if ok {
		r.stats.tolerated.Add(1)
	}
	return ok
}

// noteWritten remembers a recently written key, for the flipper.
func (r *runner) noteWritten(k int) {
	r.recent[r.recentPos.Add(1)%uint64(len(r.recent))].Store(int64(k))
}

func (r *runner) schedule(next *atomic.Int64, mean int64) {
	if mean <= 0 {
		next.Store(1 << 62)
		return
	}
	// Uniform in [mean/2, 3*mean/2): irregular, with the requested mean.
	d := mean/2 + r.eventRng.Int64N(mean)
	next.Store(r.stats.ops.Load() + d)
}

// Run runs a stress test and returns its result. The error is for a run
// that could not be set up or whose machinery failed (a file of the runner
// itself could not be written); what the DB did wrong is in
// Result.Failure.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	p := drawPlan(&cfg)
	if err := p.check(); err != nil {
		return nil, err
	}
	if p.Crash == CrashKill {
		return runKillParent(ctx, cfg, p)
	}
	desc := p.describe(&cfg)
	fmt.Fprint(cfg.Out, desc)
	r := newRunner(cfg, p)
	r.dbDir = "db"
	r.setupFS()
	res, err := r.runLocal(ctx)
	if res != nil {
		res.Plan = desc
		r.printSummary(res)
	}
	return res, err
}

// normalize fills defaults and checks the configuration.
func (c *Config) normalize() error {
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
		if c.Seed == 0 {
			c.Seed = 1
		}
	}
	if c.Threads <= 0 {
		c.Threads = 4
	}
	if c.Crash == "" {
		c.Crash = CrashNone
	}
	if _, err := ParseCrashMode(string(c.Crash)); err != nil {
		return err
	}
	if c.Duration <= 0 && c.Ops <= 0 {
		c.Duration = DefaultDuration
	}
	if c.FaultRate < 0 || c.FaultRate >= 1 {
		return fmt.Errorf("fault rate %g: must be in [0, 1)", c.FaultRate)
	}
	if c.Keys < 0 || c.Keys > maxKeys {
		return fmt.Errorf("keys %d: must be in [1, %d]", c.Keys, maxKeys)
	}
	if c.Crash == CrashKill && c.CorruptMemory {
		return fmt.Errorf("--corrupt-memory works with --crash=none or inprocess, not kill (flip accounting lives in one process)")
	}
	if c.Crash == CrashKill && c.ChildCommand == nil {
		return fmt.Errorf("kill mode needs a command to run the child process")
	}
	if c.Out == nil {
		c.Out = discard{}
	}
	if c.Log == nil {
		c.Log = discard{}
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = 5 * time.Second
	}
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// check rejects plans the DB would refuse, before anything starts.
func (p *plan) check() error {
	if err := p.options(vfs.NewMem()).EnsureDefaults().Validate(); err != nil {
		return fmt.Errorf("stress plan has invalid options (a runner bug): %w", err)
	}
	return nil
}

// runLocal runs workers in this process until the duration or op count is
// reached or a check fails, then verifies the final state, closes,
// reopens and verifies again.
func (r *runner) runLocal(ctx context.Context) (*Result, error) {
	r.start = time.Now()
	if r.cfg.Duration > 0 {
		r.deadline = r.start.Add(r.cfg.Duration)
	}
	db, err := r.open(false)
	if err != nil {
		return nil, fmt.Errorf("opening the DB: %w", err)
	}
	r.db = db
	r.setFaults(true)
	r.schedule(&r.nextCrash, r.plan.CrashEvery)
	r.schedule(&r.nextReopen, r.plan.ReopenEvery)
	r.schedule(&r.nextFlip, r.plan.FlipEvery)

	var wg sync.WaitGroup
	for i := 0; i < r.plan.Threads; i++ {
		w := newWorker(r, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run()
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	r.watch(ctx, done)

	if r.failure.Load() == nil && !r.child {
		r.finish()
	}
	if r.db != nil {
		r.flips.addCorruptions(r.db.Metrics())
		r.db.Close()
		r.db = nil
	}
	return r.result(), nil
}

// watch prints progress until the workers are done, stopping them at the
// deadline or when ctx ends.
func (r *runner) watch(ctx context.Context, done <-chan struct{}) {
	tick := time.NewTicker(r.cfg.ProgressInterval)
	defer tick.Stop()
	var timeout <-chan time.Time
	if !r.deadline.IsZero() {
		t := time.NewTimer(time.Until(r.deadline))
		defer t.Stop()
		timeout = t.C
	}
	lastOps, last := int64(0), time.Now()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			r.stop()
		case <-timeout:
			r.stop()
			timeout = nil
		case now := <-tick.C:
			ops := r.stats.ops.Load()
			if r.child {
				// The parent reads progress from the op log.
				pc := progressCounts{ops: uint64(ops), reads: uint64(r.stats.reads.Load()),
					writes: uint64(r.stats.writes.Load()), scans: uint64(r.stats.scans.Load())}
				if r.inj != nil {
					pc.faults = uint64(r.inj.injected.Load())
				}
				if err := r.log.progress(pc); err != nil {
					r.fail(r.machinery(err))
				}
				continue
			}
			rate := float64(ops-lastOps) / now.Sub(last).Seconds()
			lastOps, last = ops, now
			r.logf("%s", r.progressLine(ops, rate))
		}
	}
}

func (r *runner) progressLine(ops int64, rate float64) string {
	s := &r.stats
	line := fmt.Sprintf("ops %d (%.0f/s): %d reads, %d writes, %d scans; crashes %d, reopens %d, verifications %d",
		ops, rate, s.reads.Load(), s.writes.Load(), s.scans.Load(), s.crashes.Load(), s.reopens.Load(), s.verifications.Load())
	if r.inj != nil {
		line += fmt.Sprintf("; faults injected %d", r.inj.injected.Load())
	}
	if r.plan.Corrupt {
		f := r.flips.snapshot().Total()
		line += fmt.Sprintf("; flips %d (read %d, flush %d, apply %d, missed %d)", f.Injected, f.DetectedAtRead, f.DetectedAtFlush, f.DetectedAtApply, f.Missed)
	}
	if r.files != nil {
		f := r.files.snapshot().Total()
		line += fmt.Sprintf("; file flips %d (detected %d, no effect %d, tail %d, missed %d)", f.Injected, f.Detected, f.NoEffect, f.Tail, f.Missed)
	}
	return line
}

// finish verifies the live DB (every acknowledged write visible), then
// closes it cleanly, reopens and verifies again.
func (r *runner) finish() {
	r.gate.Lock()
	defer r.gate.Unlock()
	r.setFaults(false)
	r.closing.Store(false)
	if r.plan.Corrupt {
		// A memtable flip left for the workers stays in the memtable until
		// a reopen rebuilds it from the WAL: settle it first.
		if div := r.reopenLocked("settle the last flips"); div != nil {
			r.fail(div)
			return
		}
		r.setFaults(false)
	}
	d := durability{cutoff: r.tick(), everything: true, syncedWAL: !r.plan.DisableWAL, what: "the end of the run (live DB)", live: true}
	if div := r.verify(r.db, d); div != nil {
		r.fail(div)
		return
	}
	if div := r.reopenLocked("final clean close"); div != nil {
		r.fail(div)
	}
}

func (r *runner) result() *Result {
	s := &r.stats
	res := &Result{
		Seed: r.plan.Seed, Ops: s.ops.Load(), Reads: s.reads.Load(), Writes: s.writes.Load(), Scans: s.scans.Load(),
		Snapshots: s.snapshots.Load(), Flushes: s.flushes.Load(), Compactions: s.compactions.Load(),
		Crashes: s.crashes.Load(), Kills: s.kills.Load(), Reopens: s.reopens.Load(), Verifications: s.verifications.Load(),
		Unverifiable: s.unverifiable.Load(), ToleratedErrors: s.tolerated.Load(), StrictRecoveryRefusals: s.strictRefusals.Load(),
		LostUnsynced: s.lostUnsynced.Load(), EmptyRanges: s.emptyRanges.Load(), InvertedRanges: s.invertedRanges.Load(),
		Ingests: s.ingests.Load(), Checkpoints: s.checkpoints.Load(),
		Flips: r.flips.snapshot(), FileFlips: r.files.snapshot(), Failure: r.failure.Load(), Elapsed: time.Since(r.start),
	}
	if r.inj != nil {
		res.InjectedFaults = r.inj.injected.Load()
	}
	if res.Failure != nil {
		res.Failure.Replay = r.plan.replay(&r.cfg)
	}
	return res
}

func (p *plan) replay(cfg *Config) string {
	s := fmt.Sprintf("vigil stress --seed=%d --crash=%s --threads=%d", p.Seed, p.Crash, p.Threads)
	if p.FaultRate > 0 {
		s += fmt.Sprintf(" --faults=%g", p.FaultRate)
	}
	if p.Corrupt {
		s += " --corrupt-memory"
	}
	if p.CorruptFiles {
		s += " --corrupt-files"
	}
	if cfg.Keys > 0 {
		s += fmt.Sprintf(" --keys=%d", cfg.Keys)
	}
	if cfg.Ops > 0 {
		s += fmt.Sprintf(" --ops=%d", cfg.Ops)
	} else {
		s += fmt.Sprintf(" --duration=%v", cfg.Duration)
	}
	return s
}

// printSummary writes the final summary (and any failure report) to Out.
func (r *runner) printSummary(res *Result) {
	printSummary(r.cfg.Out, res, &r.plan)
}

func printSummary(out interface{ Write([]byte) (int, error) }, res *Result, p *plan) {
	corrupt := p.Corrupt
	var b strings.Builder
	fmt.Fprintf(&b, "summary: %d ops in %v (%.0f/s): %d reads, %d writes, %d scans, %d snapshots, %d flushes, %d compactions\n",
		res.Ops, res.Elapsed.Round(time.Millisecond), float64(res.Ops)/max(res.Elapsed.Seconds(), 1e-9),
		res.Reads, res.Writes, res.Scans, res.Snapshots, res.Flushes, res.Compactions)
	fmt.Fprintf(&b, "         crashes %d, kills %d, clean reopens %d, full verifications %d, unverifiable reads %d\n",
		res.Crashes, res.Kills, res.Reopens, res.Verifications, res.Unverifiable)
	fmt.Fprintf(&b, "         ingestions %d, checkpoints opened and checked %d\n", res.Ingests, res.Checkpoints)
	fmt.Fprintf(&b, "         acknowledged unsynced writes lost to crashes (allowed) %d\n", res.LostUnsynced)
	fmt.Fprintf(&b, "         faults injected %d, tolerated errors %d, strict WAL recovery refusals %d\n",
		res.InjectedFaults, res.ToleratedErrors, res.StrictRecoveryRefusals)
	if res.EmptyRanges > 0 || res.InvertedRanges > 0 {
		fmt.Fprintf(&b, "         empty range deletions (no-ops) %d, inverted ones refused with ErrInvalidArgument %d\n", res.EmptyRanges, res.InvertedRanges)
	}
	if corrupt {
		f := res.Flips
		fmt.Fprintf(&b, "  bit flips (paranoid checks, %d protection bytes, %d batch protection bytes; a flip may count at read and at flush): injected | detected at read | at flush/compaction | at apply | missed | no effect\n",
			f.ProtectionBytes, f.BatchProtectionBytes)
		for _, row := range []struct {
			name string
			c    FlipCounts
		}{{"memtable key", f.MemtableKey}, {"memtable value", f.MemtableValue}, {"memtable rangedel", f.MemtableRangeDel}, {"cached block", f.Block}, {"write batch", f.Batch}, {"total", f.Total()}} {
			fmt.Fprintf(&b, "    %-17s %5d | %16d | %19d | %8d | %6d | %9d\n", row.name, row.c.Injected, row.c.DetectedAtRead, row.c.DetectedAtFlush, row.c.DetectedAtApply, row.c.Missed, row.c.NoEffect)
		}
		fmt.Fprintf(&b, "    corruptions counted in Metrics: memtable %d, batches refused %d\n", f.MemtableCorruptions, f.BatchCorruptions)
	}
	if p.CorruptFiles {
		f := res.FileFlips
		fmt.Fprintf(&b, "  bit flips in files between reopens (checksum %s, WAL recovery %s): injected | detected at open | no effect | tail (indistinguishable from a crash) | skip-any drops | missed | open errors\n",
			p.Checksum.Resolve(), p.WALMode)
		for _, row := range []struct {
			name string
			c    FileFlipCounts
		}{{"WAL", f.WAL}, {"MANIFEST", f.Manifest}, {"CURRENT", f.Current}, {"total", f.Total()}} {
			fmt.Fprintf(&b, "    %-9s %5d | %16d | %9d | %37d | %14d | %6d | %11d\n", row.name, row.c.Injected, row.c.Detected, row.c.NoEffect,
				row.c.Tail, row.c.SkipAny, row.c.Missed, row.c.OpenErrors)
		}
	}
	if res.Failure != nil {
		b.WriteString(res.Failure.Report())
		b.WriteString("FAIL\n")
	} else {
		b.WriteString("PASS\n")
	}
	out.Write([]byte(b.String()))
}
