package stress

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// The merges mode (vigil stress --merges): worker goroutines issue Put,
// Delete, DeleteRange, Merge (alone and in batches that write a key
// several times), Get, iterator walks in both directions and snapshot
// reads against a DB with a merge operator, with a small write buffer so
// that flushes and compactions combine operands all the time. The
// operator, drawn from the seed, is the counter (vigil.Uint64AddMerger)
// or the list (vigil.AppendMerger); see mergeoracle.go for the operands,
// which name the writes that made them. Every read is checked exactly: it
// must return the value some state of the key's history held while the
// read ran, or a write in flight then would leave. At random operation
// counts the DB loses power (--crash=inprocess), or is closed cleanly, and
// the reopened DB is read whole and checked with the crash checker
// (solver.go): each key must hold the value of a prefix of its own
// history, and the set of writes these prefixes add up to must be a
// prefix of the commit order across keys holding every write the
// durability rules promise.

// MergeOperator names the merge operator of a merges run.
type MergeOperator string

// The merge operators of the merges mode.
const (
	// MergeCounter is vigil.Uint64AddMerger: 8-byte counters.
	MergeCounter MergeOperator = "uint64add"
	// MergeAppend is vigil.AppendMerger: values are lists of tokens.
	MergeAppend MergeOperator = "append"
)

// ParseMergeOperator parses a --merger value: "" (drawn from the seed),
// uint64add (or counter), append.
func ParseMergeOperator(s string) (MergeOperator, error) {
	switch strings.ToLower(s) {
	case "":
		return "", nil
	case "uint64add", "counter":
		return MergeCounter, nil
	case "append":
		return MergeAppend, nil
	}
	return "", fmt.Errorf("unknown merge operator %q: use uint64add (counter) or append", s)
}

// merger returns the operator's vigil.Merger.
func (m MergeOperator) merger() *vigil.Merger {
	if m == MergeCounter {
		return vigil.Uint64AddMerger
	}
	return vigil.AppendMerger
}

// MergeConfig configures a merges run. The zero value of each field means
// its default.
type MergeConfig struct {
	// Seed draws everything (0: from the clock; printed).
	Seed uint64
	// Duration bounds the run's wall time, Ops its operation count; with
	// neither it lasts DefaultDuration.
	Duration time.Duration
	Ops      int64
	// Threads is the number of workers (default 4).
	Threads int
	// Crash is CrashNone or CrashInProcess.
	Crash CrashMode
	// Keys overrides the key-space size drawn from the seed.
	Keys int
	// Operator overrides the operator drawn from the seed.
	Operator MergeOperator
	// Out receives the plan, the summary and any failure report; Log the
	// progress lines (both default to nothing).
	Out, Log io.Writer
	// ProgressInterval is the time between progress lines (default 5s).
	ProgressInterval time.Duration

	// testFault names a misbehaving store wrapper (mergeTestFaults) and
	// planHook adjusts the drawn plan: tests check the runner notices.
	testFault string
	planHook  func(*mergePlan)
}

// MergeResult is what a merges run did. Plain data.
type MergeResult struct {
	// Seed and Operator repeat the plan's.
	Seed     uint64
	Operator MergeOperator
	// Plan is the text printed at the start.
	Plan string
	// Writes counts write operations (a batch or a transaction is one),
	// MergeOperands the operands they wrote.
	Ops, Reads, Writes, MergeOperands, Scans, Snapshots, Flushes, Compactions int64
	// Txns counts the transactions that wrote (and read back) operands,
	// LargeBatches the batches large enough to be applied as flushable
	// batches (over half the write buffer).
	Txns, LargeBatches int64
	// Crashes (in-process), clean Reopens, full Verifications.
	Crashes, Reopens, Verifications int64
	// LongestChain is the most merge operands on one value a read
	// checked (on top of its last Set, or of nothing).
	LongestChain int64
	// LostUnsynced counts acknowledged writes a crash legitimately lost.
	LostUnsynced int64
	// ToleratedErrors counts DB calls that failed while a crash closed
	// the DB under them.
	ToleratedErrors int64
	// Failure is the first divergence, or nil.
	Failure *Divergence
	// Elapsed is the run's wall time.
	Elapsed time.Duration
}

// mergePlan is everything a merges run drew from its seed: the main
// runner's plan (DB options, key space, sync share, schedule) plus the
// operator and the share of merges among single writes.
type mergePlan struct {
	plan
	Operator MergeOperator
	// MergePct is the percentage of merges among single-key writes and
	// batch operations (the rest are sets and deletes).
	MergePct int
}

// drawMergePlan draws a merges run's plan from cfg.Seed.
func drawMergePlan(cfg *MergeConfig) mergePlan {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6d657267))
	mp := mergePlan{Operator: pick(rng, MergeCounter, MergeAppend), MergePct: pick(rng, 50, 75, 90)}
	if cfg.Operator != "" {
		mp.Operator = cfg.Operator
	}
	p := &mp.plan
	p.Seed, p.Threads, p.Crash = cfg.Seed, cfg.Threads, cfg.Crash
	p.Keys = pick(rng, 4, 8, 16, 64, 256, 1000)
	if cfg.Keys > 0 {
		p.Keys = cfg.Keys
	}
	p.Pad = pick(rng, 0, 0, 4, 24)
	p.Value = pick(rng, 0, 8, 40, 200)
	p.SyncPct = pick(rng, 0, 0, 5, 30, 100)
	p.drawOptions(rng)
	// Small memtables: flushes, and so compactions, all the time.
	p.WriteBuffer = pick(rng, 64<<10, 64<<10, 128<<10, 256<<10)
	p.CrashEvery = pick(rng, int64(300), 1500, 6000)
	p.ReopenEvery = pick(rng, int64(2000), 8000, 30000)
	p.FlushOneIn = pick(rng, 100, 300, 1000)
	p.CompactOneIn = 2 * p.FlushOneIn
	p.drawBatchProtection()
	if p.Checksum == vigil.ChecksumNone && p.Protection > 0 {
		p.Protection = 0
	}
	if cfg.planHook != nil {
		cfg.planHook(&mp)
	}
	p.resolveConflicts()
	return mp
}

// options returns the DB options of the plan on fs, with the operator.
func (mp *mergePlan) options(fs vfs.FS) *vigil.Options {
	o := mp.plan.options(fs)
	o.Merger = mp.Operator.merger()
	return o
}

func (mp *mergePlan) codec() mergeCodec {
	return mergeCodec{counter: mp.Operator == MergeCounter, filler: mp.Value}
}

// replay is the command line that reruns the plan.
func (mp *mergePlan) replay(cfg *MergeConfig) string {
	s := fmt.Sprintf("vigil stress --merges --seed=%d --crash=%s --threads=%d", mp.Seed, mp.Crash, mp.Threads)
	if cfg.Operator != "" {
		s += " --merger=" + string(cfg.Operator)
	}
	if cfg.Keys > 0 {
		s += fmt.Sprintf(" --keys=%d", cfg.Keys)
	}
	if cfg.Ops > 0 {
		return s + fmt.Sprintf(" --ops=%d", cfg.Ops)
	}
	return s + fmt.Sprintf(" --duration=%v", cfg.Duration)
}

// describe renders the plan for the first lines of the output.
func (mp *mergePlan) describe(cfg *MergeConfig) string {
	p := &mp.plan
	var b strings.Builder
	fmt.Fprintf(&b, "vigil stress --merges: seed=%d operator=%s crash=%s threads=%d\n", p.Seed, mp.Operator, p.Crash, p.Threads)
	fmt.Fprintf(&b, "  replay: %s\n", mp.replay(cfg))
	fmt.Fprintf(&b, "  workload: keys=%d key_pad<%d set_filler<=%d merge_share=%d%% sync=%d%%", p.Keys, max(p.Pad, 1), p.Value, mp.MergePct, p.SyncPct)
	if p.Crash == CrashInProcess {
		fmt.Fprintf(&b, " crash_every~%d ops", p.CrashEvery)
	}
	fmt.Fprintf(&b, " reopen_every~%d ops flush_one_in=%d compact_one_in=%d\n", p.ReopenEvery, p.FlushOneIn, p.CompactOneIn)
	fmt.Fprintf(&b, "  options: checksum=%s paranoid=%v protection_bytes=%d batch_protection_bytes=%d write_buffer=%s max_immutable=%d\n",
		p.Checksum.Resolve(), p.Paranoid, p.Protection, p.BatchProtection, sizeStr(int64(p.WriteBuffer)), p.MaxImm)
	fmt.Fprintf(&b, "           block_size=%d restart=%d bloom_bits=%d compression=%s cache=%s l0_trigger=%d l0_stop=%d lbase=%s multiplier=%d target_file=%s\n",
		p.BlockSize, p.Restart, p.Bloom, p.Compression, sizeStr(p.Cache), p.L0Trigger, p.L0Stop, sizeStr(p.LBase), p.Multiplier, sizeStr(p.TargetFile))
	fmt.Fprintf(&b, "           wal_recovery=%s disable_wal=%v auto_compactions=%v\n", p.WALMode, p.DisableWAL, !p.NoAutoCompact)
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}

// mergeCounters are a merges run's statistics.
type mergeCounters struct {
	ops, reads, writes, operands, scans, snapshots, flushes, compactions atomic.Int64
	crashes, reopens, verifications, lostUnsynced, tolerated, chain      atomic.Int64
	txns, largeBatches                                                   atomic.Int64
}

// mergeRun is the state of one merges run. Concurrency as the main
// runner's: workers hold gate shared for each operation, events hold it
// exclusively; a crash closes the DB under the workers first. db and epoch
// change only under the exclusive gate.
type mergeRun struct {
	cfg MergeConfig
	p   mergePlan
	kc  keyCodec
	mc  mergeCodec
	or  *mergeOracle
	// log is the epoch's writes and flushes, for the crash checker.
	log   *opLog
	clock atomic.Uint64

	gate    sync.RWMutex
	db      mergeStore
	epoch   uint64
	closing atomic.Bool
	fs      vfs.FS
	mem     *vfs.MemFS

	stats    mergeCounters
	failure  atomic.Pointer[Divergence]
	stopFlag atomic.Bool
	start    time.Time

	eventMu    sync.Mutex
	nextCrash  atomic.Int64
	nextReopen atomic.Int64
	eventRng   *rand.Rand // eventMu
	// base is every key's kstate at the last verification (gate
	// exclusive).
	base []kstate
}

// RunMerges runs the merges mode until the duration or the operation
// count is reached or ctx is done, and returns what it did; a divergence
// is in Failure. The error is for a run that could not be set up.
func RunMerges(ctx context.Context, cfg MergeConfig) (*MergeResult, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	mp := drawMergePlan(&cfg)
	if err := mp.options(vfs.NewMem()).EnsureDefaults().Validate(); err != nil {
		return nil, fmt.Errorf("stress --merges plan has invalid options (a runner bug): %w", err)
	}
	r := &mergeRun{cfg: cfg, p: mp, kc: mp.keyCodec(), mc: mp.codec(), or: newMergeOracle(mp.Keys), log: &opLog{},
		eventRng: rand.New(rand.NewPCG(mp.Seed, 0xe7e8))}
	r.base = r.or.base()
	if mp.Crash == CrashInProcess {
		r.mem = vfs.NewStrictMem()
		r.fs = r.mem
	} else {
		r.fs = vfs.NewMem()
	}
	desc := mp.describe(&cfg)
	fmt.Fprint(cfg.Out, desc)
	if err := r.run(ctx); err != nil {
		return nil, err
	}
	res := r.result()
	res.Plan = desc
	r.printSummary(res)
	return res, nil
}

// maxMergeKeys bounds the key space of a merges run: every verification
// reads it whole.
const maxMergeKeys = 100000

// normalize fills defaults and checks the configuration.
func (c *MergeConfig) normalize() error {
	if c.Crash == "" {
		c.Crash = CrashNone
	}
	if c.Crash != CrashNone && c.Crash != CrashInProcess {
		return fmt.Errorf("stress --merges: crash mode %q: only none and inprocess", c.Crash)
	}
	if c.Seed == 0 {
		c.Seed = max(uint64(time.Now().UnixNano()), 1)
	}
	c.Threads = max(c.Threads, 1)
	if c.Duration <= 0 && c.Ops <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Keys < 0 || c.Keys > maxMergeKeys {
		return fmt.Errorf("stress --merges: keys %d: must be in [1, %d]", c.Keys, maxMergeKeys)
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

func (r *mergeRun) tick() uint64  { return r.clock.Add(1) }
func (r *mergeRun) stopped() bool { return r.stopFlag.Load() }

// fail records the first divergence and stops the run.
func (r *mergeRun) fail(d *Divergence) {
	d.Seed = r.p.Seed
	d.Replay = r.p.replay(&r.cfg)
	r.failure.CompareAndSwap(nil, d)
	r.stopFlag.Store(true)
}

// tolerate reports whether err, returned by a DB call, is allowed: only
// while a crash closes the DB under the workers (no faults in this mode).
func (r *mergeRun) tolerate(err error) bool {
	if r.closing.Load() {
		r.stats.tolerated.Add(1)
		return true
	}
	return false
}

// noteChain records the merge chain of a state a read returned.
func (r *mergeRun) noteChain(n int) {
	for {
		c := r.stats.chain.Load()
		if int64(n) <= c || r.stats.chain.CompareAndSwap(c, int64(n)) {
			return
		}
	}
}

// open opens the DB; afterCrash lets a strict WAL recovery mode refuse
// the torn tail of a crash (the DB then recovers point-in-time).
func (r *mergeRun) open(afterCrash bool) error {
	db, _, err := openDB("db", r.p.options(r.fs), afterCrash, nil, func(error) {})
	if err != nil {
		return err
	}
	var s mergeStore = dbStore{db}
	if r.cfg.testFault != "" {
		f, ok := mergeTestFaults[r.cfg.testFault]
		if !ok {
			db.Close()
			return fmt.Errorf("unknown merges test fault %q", r.cfg.testFault)
		}
		s = f(s)
	}
	r.db = s
	return nil
}

func (r *mergeRun) schedule(next *atomic.Int64, mean int64) {
	if mean <= 0 {
		next.Store(1 << 62)
		return
	}
	next.Store(r.stats.ops.Load() + mean/2 + r.eventRng.Int64N(mean))
}

// run opens the DB, runs the workers until the end, and verifies the end
// state live and after a clean close.
func (r *mergeRun) run(ctx context.Context) error {
	r.start = time.Now()
	if err := r.open(false); err != nil {
		return fmt.Errorf("opening the DB: %w", err)
	}
	r.schedule(&r.nextCrash, r.p.CrashEvery)
	r.schedule(&r.nextReopen, r.p.ReopenEvery)
	var wg sync.WaitGroup
	for i := range r.p.Threads {
		w := newMergeWorker(r, i)
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
	if r.failure.Load() == nil {
		r.finish()
	}
	if r.db != nil {
		r.db.Close()
		r.db = nil
	}
	return nil
}

// watch prints progress until the workers are done, stopping them at the
// deadline or when ctx ends.
func (r *mergeRun) watch(ctx context.Context, done <-chan struct{}) {
	tick := time.NewTicker(r.cfg.ProgressInterval)
	defer tick.Stop()
	var timeout <-chan time.Time
	if r.cfg.Duration > 0 {
		t := time.NewTimer(r.cfg.Duration)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			r.stopFlag.Store(true)
		case <-timeout:
			r.stopFlag.Store(true)
			timeout = nil
		case <-tick.C:
			s := &r.stats
			fmt.Fprintf(r.cfg.Log, "[%7.1fs] merges: ops %d: %d reads, %d writes (%d merge operands), %d scans; crashes %d, reopens %d, verifications %d; longest chain read %d\n",
				time.Since(r.start).Seconds(), s.ops.Load(), s.reads.Load(), s.writes.Load(), s.operands.Load(), s.scans.Load(),
				s.crashes.Load(), s.reopens.Load(), s.verifications.Load(), s.chain.Load())
		}
	}
}

func (r *mergeRun) result() *MergeResult {
	s := &r.stats
	return &MergeResult{Seed: r.p.Seed, Operator: r.p.Operator,
		Ops: s.ops.Load(), Reads: s.reads.Load(), Writes: s.writes.Load(), MergeOperands: s.operands.Load(),
		Txns: s.txns.Load(), LargeBatches: s.largeBatches.Load(),
		Scans: s.scans.Load(), Snapshots: s.snapshots.Load(), Flushes: s.flushes.Load(), Compactions: s.compactions.Load(),
		Crashes: s.crashes.Load(), Reopens: s.reopens.Load(), Verifications: s.verifications.Load(),
		LongestChain: s.chain.Load(), LostUnsynced: s.lostUnsynced.Load(), ToleratedErrors: s.tolerated.Load(),
		Failure: r.failure.Load(), Elapsed: time.Since(r.start)}
}

func (r *mergeRun) printSummary(res *MergeResult) {
	var b strings.Builder
	fmt.Fprintf(&b, "summary: %d ops in %v (%.0f/s): %d reads, %d writes (%d merge operands), %d scans, %d snapshots, %d flushes, %d compactions\n",
		res.Ops, res.Elapsed.Round(time.Millisecond), float64(res.Ops)/max(res.Elapsed.Seconds(), 1e-9),
		res.Reads, res.Writes, res.MergeOperands, res.Scans, res.Snapshots, res.Flushes, res.Compactions)
	fmt.Fprintf(&b, "         transactions %d, large (flushable) batches %d\n", res.Txns, res.LargeBatches)
	fmt.Fprintf(&b, "         operator %s: longest merge chain read %d; crashes %d, clean reopens %d, full verifications %d\n",
		res.Operator, res.LongestChain, res.Crashes, res.Reopens, res.Verifications)
	fmt.Fprintf(&b, "         acknowledged unsynced writes lost to crashes (allowed) %d, calls failed by a crash (allowed) %d\n",
		res.LostUnsynced, res.ToleratedErrors)
	if res.Failure != nil {
		b.WriteString(res.Failure.Report())
		b.WriteString("FAIL\n")
	} else {
		b.WriteString("PASS\n")
	}
	io.WriteString(r.cfg.Out, b.String())
}
