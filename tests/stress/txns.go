package stress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// The transactions mode (vigil stress --txns): worker goroutines move
// money between accounts in optimistic transactions (read two balances,
// write both), retrying on ErrConflict, some commits synced, while others
// audit the accounts in read-only transactions (every audit must see the
// total), and between epochs, once the workers have finished their
// transaction in flight, the DB loses power (--crash=inprocess: everything
// not synced is dropped) or is closed cleanly. After each epoch the checker replays the
// epoch's committed transactions one at a time in commit order (CommitSeq)
// from the state verified last: every balance each one read must be the
// one the serial order gives it (serializability), and the recovered state
// must be the serial state after some prefix of them that holds every
// commit a synced one acknowledged, or all of them after a clean close
// (durability, and no torn transaction). The total is conserved throughout.

// TxnConfig configures a transactions run.
type TxnConfig struct {
	// Seed draws everything (0: from the clock; printed).
	Seed     uint64
	Duration time.Duration
	Threads  int
	// Crash is CrashNone or CrashInProcess.
	Crash CrashMode
	// Accounts is the number of accounts (0: drawn, 2 to 64: fewer means
	// more conflicts).
	Accounts int
	Out      io.Writer
	// ProgressInterval is the time between progress lines (0: none).
	ProgressInterval time.Duration
}

// TxnResult is what a transactions run did.
type TxnResult struct {
	Seed                                     uint64
	Committed, Conflicts, Audits, SyncedTxns int64
	Epochs, Crashes, LostUnsynced, Refusals  int64
	Failure                                  error
}

// txnCommit is one committed transfer: what it read and wrote.
type txnCommit struct {
	seq      uint64
	synced   bool
	reads    [2]int // balances read of from, to
	from, to int
	amount   int64
}

// txnRun is the state of one run.
type txnRun struct {
	cfg      TxnConfig
	opts     *vigil.Options
	fs       vfs.FS
	mem      *vfs.MemFS
	accounts int
	syncPct  int
	res      TxnResult
	// state is the balances verified last (the epoch's start).
	state []int
	total int
	mu    sync.Mutex
	log   []txnCommit
}

const txnInitial = 1000

// RunTxns runs the transactions mode until the duration passes or ctx is
// done, and returns what it did; a divergence is in Failure.
func RunTxns(ctx context.Context, cfg TxnConfig) (*TxnResult, error) {
	if cfg.Crash != CrashNone && cfg.Crash != CrashInProcess {
		return nil, fmt.Errorf("stress --txns: crash mode %q: only none and inprocess", cfg.Crash)
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	cfg.Threads = max(cfg.Threads, 1)
	if cfg.Duration == 0 {
		cfg.Duration = DefaultDuration
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7478))
	r := &txnRun{cfg: cfg, accounts: cfg.Accounts, syncPct: rng.IntN(50)}
	if r.accounts == 0 {
		r.accounts = 2 + rng.IntN(63)
	}
	r.res.Seed = cfg.Seed
	if cfg.Crash == CrashInProcess {
		r.mem = vfs.NewStrictMem()
		r.fs = r.mem
	} else {
		r.fs = vfs.NewMem()
	}
	r.opts = txnOptions(rng, r.fs)
	if cfg.Out != nil {
		fmt.Fprintf(cfg.Out, "vigil stress --txns: seed=%d crash=%s threads=%d duration=%s accounts=%d sync=%d%%\n  replay: vigil stress --txns --seed=%d --crash=%s --threads=%d --duration=%s\n  options: checksum=%v write_buffer=%d batch_protection=%d memtable_protection=%d paranoid=%v\n",
			cfg.Seed, cfg.Crash, cfg.Threads, cfg.Duration, r.accounts, r.syncPct, cfg.Seed, cfg.Crash, cfg.Threads, cfg.Duration,
			r.opts.ChecksumType, r.opts.WriteBufferSize, r.opts.BatchProtectionBytesPerKey, r.opts.MemtableProtectionBytesPerKey, r.opts.ParanoidMemoryChecks)
	}
	if err := r.run(ctx, rng); err != nil {
		return nil, err
	}
	if cfg.Out != nil {
		res := &r.res
		fmt.Fprintf(cfg.Out, "  summary: %d transactions committed (%d synced), %d conflicts retried, %d audits, %d epochs, %d crashes, %d unsynced commits lost to crashes (allowed)\n",
			res.Committed, res.SyncedTxns, res.Conflicts, res.Audits, res.Epochs, res.Crashes, res.LostUnsynced)
		if res.Failure != nil {
			fmt.Fprintf(cfg.Out, "  DIVERGENCE: %v\n  FAIL\n", res.Failure)
		} else {
			fmt.Fprintln(cfg.Out, "  PASS")
		}
	}
	return &r.res, nil
}

// txnOptions draws the DB's options.
func txnOptions(rng *rand.Rand, fs vfs.FS) *vigil.Options {
	cks := []vigil.ChecksumType{vigil.ChecksumCRC32c, vigil.ChecksumXXHash64, vigil.ChecksumXXH3, vigil.ChecksumCRC64}
	prot := []int{0, 1, 2, 4, 8}
	return &vigil.Options{FS: fs, ChecksumType: cks[rng.IntN(len(cks))],
		WriteBufferSize:               (64 << 10) << rng.IntN(5),
		BatchProtectionBytesPerKey:    prot[rng.IntN(len(prot))],
		MemtableProtectionBytesPerKey: prot[rng.IntN(len(prot))],
		ParanoidMemoryChecks:          rng.IntN(2) == 0}
}

func acctKey(i int) []byte { return fmt.Appendf(nil, "acct%04d", i) }

// run loops over epochs until the deadline.
func (r *txnRun) run(ctx context.Context, rng *rand.Rand) error {
	db, err := vigil.Open("db", r.opts)
	if err != nil {
		return err
	}
	b := db.NewBatch()
	r.state = make([]int, r.accounts)
	for i := range r.accounts {
		r.state[i] = txnInitial
		b.Put(acctKey(i), []byte(strconv.Itoa(txnInitial)))
	}
	r.total = r.accounts * txnInitial
	if err := db.Apply(b, vigil.Sync); err != nil {
		return err
	}
	deadline := time.Now().Add(r.cfg.Duration)
	nextProgress := time.Now().Add(r.cfg.ProgressInterval)
	for time.Now().Before(deadline) && ctx.Err() == nil && r.res.Failure == nil {
		crash := r.mem != nil && rng.IntN(3) > 0
		epoch := time.Duration(50+rng.IntN(400)) * time.Millisecond
		if db, err = r.epoch(db, rng.Uint64(), epoch, crash); err != nil {
			return err
		}
		if r.cfg.ProgressInterval > 0 && r.cfg.Out != nil && time.Now().After(nextProgress) {
			fmt.Fprintf(r.cfg.Out, "  progress: %d committed, %d conflicts, %d crashes\n", r.res.Committed, r.res.Conflicts, r.res.Crashes)
			nextProgress = time.Now().Add(r.cfg.ProgressInterval)
		}
	}
	if db != nil {
		return db.Close()
	}
	return nil
}

// epoch runs the workers on db for d, ends it (a crash or a clean close),
// reopens, and checks. It returns the reopened DB.
func (r *txnRun) epoch(db *vigil.DB, seed uint64, d time.Duration, crash bool) (*vigil.DB, error) {
	r.res.Epochs++
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range r.cfg.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.worker(db, rand.New(rand.NewPCG(seed, uint64(w))), &stop)
		}()
	}
	time.Sleep(d)
	if crash {
		// Power loss once the workers are done with their transaction in
		// flight (so every commit's outcome is known): what was not synced
		// is gone.
		stop.Store(true)
		wg.Wait()
		r.mem.SetIgnoreSyncs(true)
		db.Close()
		r.mem.ResetToSyncedState()
		r.mem.SetIgnoreSyncs(false)
		r.res.Crashes++
	} else {
		stop.Store(true)
		wg.Wait()
		if err := db.Close(); err != nil {
			r.res.Failure = fmt.Errorf("clean close: %w", err)
			return nil, nil
		}
	}
	ndb, err := vigil.Open("db", r.opts)
	if err != nil {
		r.res.Failure = fmt.Errorf("reopen after the epoch (crash %v): %w", crash, err)
		return nil, nil
	}
	if err := r.check(ndb, !crash); err != nil {
		r.res.Failure = err
	}
	return ndb, nil
}

// worker runs transfers (and, one time in eight, an audit) until stop.
func (r *txnRun) worker(db *vigil.DB, rng *rand.Rand, stop *atomic.Bool) {
	for !stop.Load() {
		if rng.IntN(8) == 0 {
			r.audit(db, stop)
			continue
		}
		from, to := rng.IntN(r.accounts), rng.IntN(r.accounts-1)
		if to >= from {
			to++
		}
		c, err := r.transfer(db, rng, from, to)
		switch {
		case errors.Is(err, vigil.ErrConflict):
			atomic.AddInt64(&r.res.Conflicts, 1)
		case err != nil:
			if !stop.Load() {
				r.fail(fmt.Errorf("transfer %d -> %d: %w", from, to, err))
			}
			return
		default:
			r.mu.Lock()
			r.log = append(r.log, c)
			r.mu.Unlock()
		}
	}
}

func (r *txnRun) fail(err error) {
	r.mu.Lock()
	if r.res.Failure == nil {
		r.res.Failure = err
	}
	r.mu.Unlock()
}

// transfer moves a random part of from's balance to to.
func (r *txnRun) transfer(db *vigil.DB, rng *rand.Rand, from, to int) (txnCommit, error) {
	c := txnCommit{from: from, to: to, synced: rng.IntN(100) < r.syncPct}
	tx := db.NewTxn()
	defer tx.Discard()
	for i, a := range []int{from, to} {
		v, err := tx.Get(acctKey(a))
		if err != nil {
			return c, err
		}
		if c.reads[i], err = strconv.Atoi(string(v)); err != nil {
			return c, fmt.Errorf("balance of account %d: %q: %w", a, v, vigil.ErrCorruption)
		}
	}
	c.amount = int64(rng.IntN(c.reads[0] + 1))
	_ = tx.Put(acctKey(from), []byte(strconv.Itoa(c.reads[0]-int(c.amount))))
	_ = tx.Put(acctKey(to), []byte(strconv.Itoa(c.reads[1]+int(c.amount))))
	if err := tx.Commit(&vigil.WriteOptions{Sync: c.synced}); err != nil {
		return c, err
	}
	c.seq = tx.CommitSeq()
	atomic.AddInt64(&r.res.Committed, 1)
	if c.synced {
		atomic.AddInt64(&r.res.SyncedTxns, 1)
	}
	return c, nil
}

// audit sums every balance in one read-only transaction: the total.
func (r *txnRun) audit(db *vigil.DB, stop *atomic.Bool) {
	err := db.View(func(tx *vigil.Txn) error {
		it, err := tx.NewIter(&vigil.IterOptions{LowerBound: []byte("acct"), UpperBound: []byte("acct~")})
		if err != nil {
			return err
		}
		sum, n := 0, 0
		for ok := it.First(); ok; ok = it.Next() {
			v, err := strconv.Atoi(string(it.Value()))
			if err != nil {
				it.Close()
				return fmt.Errorf("audit: %s = %q: %w", it.Key(), it.Value(), vigil.ErrCorruption)
			}
			sum += v
			n++
		}
		if err := it.Close(); err != nil {
			return err
		}
		if n != r.accounts || sum != r.total {
			return fmt.Errorf("audit saw %d accounts holding %d, want %d holding %d", n, sum, r.accounts, r.total)
		}
		return nil
	})
	if err != nil && !stop.Load() {
		r.fail(err)
	}
	atomic.AddInt64(&r.res.Audits, 1)
}

// check reads the reopened DB and checks the epoch (see the file comment);
// the state read becomes the next epoch's start.
func (r *txnRun) check(db *vigil.DB, clean bool) error {
	got := make([]int, r.accounts)
	for i := range r.accounts {
		v, err := db.Get(acctKey(i))
		if err != nil {
			return fmt.Errorf("account %d after reopen: %w", i, err)
		}
		if got[i], err = strconv.Atoi(string(v)); err != nil {
			return fmt.Errorf("account %d after reopen: %q", i, v)
		}
	}
	r.mu.Lock()
	log := r.log
	r.log = nil
	r.mu.Unlock()
	lost, err := checkTxnHistory(r.state, log, got, clean)
	if err != nil {
		return err
	}
	r.res.LostUnsynced += int64(lost)
	r.state = got
	return nil
}

// checkTxnHistory checks an epoch's committed transfers against the state
// recovered after it: replayed in commit order from start, each must have
// read what the serial order gives, and got must be the state after a
// prefix of them that holds the last synced one (all of them if clean). It
// returns how many commits the recovered state lacks.
func checkTxnHistory(start []int, log []txnCommit, got []int, clean bool) (int, error) {
	sort.Slice(log, func(i, j int) bool { return log[i].seq < log[j].seq })
	state := append([]int(nil), start...)
	mustHave := 0 // commits the recovered state must include
	if clean {
		mustHave = len(log)
	}
	match := -1 // the largest prefix whose state is got
	equal := func() bool {
		for i := range state {
			if state[i] != got[i] {
				return false
			}
		}
		return true
	}
	if equal() {
		match = 0
	}
	for i, c := range log {
		if state[c.from] != c.reads[0] || state[c.to] != c.reads[1] {
			return 0, fmt.Errorf("transaction %d of %d (seq %d, %d -> %d) read balances %d and %d, the serial order has %d and %d: not serializable",
				i+1, len(log), c.seq, c.from, c.to, c.reads[0], c.reads[1], state[c.from], state[c.to])
		}
		state[c.from] -= int(c.amount)
		state[c.to] += int(c.amount)
		if c.synced {
			mustHave = max(mustHave, i+1)
		}
		if equal() {
			match = i + 1
		}
	}
	if match < mustHave {
		return 0, fmt.Errorf("recovered balances %v are the serial state after no prefix of the %d commits holding the first %d (the last synced one; clean close %v)",
			got, len(log), mustHave, clean)
	}
	return len(log) - match, nil
}
