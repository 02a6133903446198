package bench

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The DB benchmarks follow db_bench 7.8.3's: the same keys and values, the
// same random draws in the same order (one draw to pick a DB wherever
// db_bench makes it, even though kvbench has one DB, so the key streams
// stay identical), the same counts, bytes and messages.

// opType names an operation for --histogram, as db_bench does.
type opType uint8

const (
	opRead opType = iota
	opWrite
	opDelete
	opSeek
	opUpdate
	opMerge
	numOpTypes
)

var opTypeNames = [numOpTypes]string{"read", "write", "delete", "seek", "update", "merge"}

// threadState is one benchmark thread's state and tallies.
type threadState struct {
	// The pads keep each thread's counters, written on every operation,
	// off the cache lines of the objects allocated next to it (another
	// thread's state): with --threads=2 that false sharing cost more than
	// the engine's own (see paddedBuf).
	_        [cacheLine]byte
	id       int
	rng      *random64
	ops      int64
	bytes    int64
	found    int64
	reads    int64 // readrandomwriterandom, readrandommergerandom
	writes   int64
	merges   int64 // mergerandom, readrandommergerandom
	maxLen   int   // readrandommergerandom: the longest value read
	busy     time.Duration
	hists    [numOpTypes]*Histogram // --histogram
	keys     *KeyGen
	values   *ValueGenerator
	valBuf   []byte // reused by Get
	target   []byte // seekrandom's scratch for SeekForPrev's target
	inPrefix inPrefixIter
	batch    WriteBatch
	progress func(n int64)
	pending  int64
	st       *opStats // --statistics; nil when off
	wlimit   *rateLimiter
	rlimit   *rateLimiter
	err      error
	_        [cacheLine]byte
}

// cacheLine is a cache line and its adjacent-line prefetch partner: what
// two threads must not share.
const cacheLine = 128

// paddedBuf returns a buffer of length n whose capacity is a whole number
// of cache lines, so it sits on lines of its own: the key and value buffers
// of two threads, allocated one after the other, would otherwise share one,
// and each thread writes its own on every operation.
func paddedBuf(n, capacity int) []byte {
	capacity = (max(capacity, n, 1) + cacheLine - 1) / cacheLine * cacheLine
	return make([]byte, n, capacity)
}

// tick counts one finished operation of type op that took since start
// (when a histogram is kept), and n operations for progress.
func (t *threadState) tick(op opType, start time.Time, n int64) {
	if h := t.hists[op]; h != nil {
		h.Record(time.Since(start))
	}
	t.pending += n
	if t.pending >= 1024 {
		t.flushProgress()
	}
}

func (t *threadState) flushProgress() {
	if t.progress != nil && t.pending > 0 {
		t.progress(t.pending)
	}
	t.pending = 0
}

// timing reports whether per-op clocks are needed.
func (t *threadState) timing() bool { return t.hists != [numOpTypes]*Histogram{} }

// limiter is db_bench's Duration: it allows maxOps operations, or, with a
// deadline, as many as fit before it (the clock read every gran ops).
type limiter struct {
	maxOps   int64
	deadline time.Time
	ops      int64
	gran     int64
}

func (r *Runner) newLimiter(maxOps int64, timed bool) *limiter {
	l := &limiter{maxOps: maxOps, gran: max(r.cfg.OpsBetweenDurationChecks, 1)}
	if timed && r.cfg.Duration > 0 {
		l.deadline = time.Now().Add(r.cfg.Duration)
	}
	return l
}

// done adds inc operations and reports whether the loop should stop
// before doing them.
func (l *limiter) done(inc int64) bool {
	inc = max(inc, 1)
	l.ops += inc
	if !l.deadline.IsZero() {
		if l.ops/l.gran != (l.ops-inc)/l.gran {
			return !time.Now().Before(l.deadline)
		}
		return false
	}
	return l.ops > l.maxOps
}

// rateLimiter paces the threads of one benchmark run to perSec units a
// second, like the rate limiters db_bench shares between its threads for
// --benchmark_write_rate_limit (bytes) and --benchmark_read_rate_limit
// (operations, requested 256 at a time). A nil *rateLimiter never waits.
type rateLimiter struct {
	perSec float64
	start  time.Time
	mu     sync.Mutex
	used   float64
}

func newRateLimiter(perSec int64) *rateLimiter {
	if perSec <= 0 {
		return nil
	}
	return &rateLimiter{perSec: float64(perSec), start: time.Now()}
}

// request takes n units, sleeping until the rate allows them.
func (l *rateLimiter) request(n int64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.used += float64(n)
	due := time.Duration(l.used / l.perSec * float64(time.Second))
	l.mu.Unlock()
	if ahead := due - time.Since(l.start); ahead > 0 {
		time.Sleep(ahead)
	}
}

// benchFunc is one benchmark's per-thread body.
type benchFunc func(r *Runner, e Engine, t *threadState) error

// dbBench describes one DB benchmark.
type dbBench struct {
	// fresh: the benchmark starts from an empty store (skipped with
	// --use_existing_db, as in db_bench).
	fresh bool
	// writer: one more thread, thread 0, writes until the others finish;
	// its figures are left out of the result.
	writer bool
	// expected is the per-thread op count for the progress bar.
	expected func(r *Runner) int64
	fn       benchFunc
	// main is the operation type whose latency --json reports.
	main opType
}

func (r *Runner) readsN() int64  { return r.reads() }
func (r *Runner) writesN() int64 { return r.writes() }

// dbBenchmarks are the DB workloads by db_bench name.
var dbBenchmarks = map[string]dbBench{
	"fillseq":                {fresh: true, expected: (*Runner).writesN, fn: fillSeq, main: opWrite},
	"fillbatch":              {fresh: true, expected: (*Runner).writesN, fn: fillBatch, main: opWrite},
	"fillrandom":             {fresh: true, expected: (*Runner).writesN, fn: fillRandom, main: opWrite},
	"overwrite":              {expected: (*Runner).writesN, fn: fillRandom, main: opWrite},
	"fillsync":               {fresh: true, expected: (*Runner).writesN, fn: fillSync, main: opWrite},
	"fill100K":               {fresh: true, expected: (*Runner).writesN, fn: fill100K, main: opWrite},
	"readseq":                {expected: (*Runner).readsN, fn: readSeq, main: opRead},
	"readreverse":            {expected: (*Runner).readsN, fn: readReverse, main: opRead},
	"readrandom":             {expected: (*Runner).readsN, fn: readRandom, main: opRead},
	"readmissing":            {expected: (*Runner).readsN, fn: readMissing, main: opRead},
	"readhot":                {expected: (*Runner).readsN, fn: readHot, main: opRead},
	"readwhilewriting":       {writer: true, expected: (*Runner).readsN, fn: readRandom, main: opRead},
	"seekrandom":             {expected: (*Runner).readsN, fn: seekRandom, main: opSeek},
	"seekrandomwhilewriting": {writer: true, expected: (*Runner).readsN, fn: seekRandom, main: opSeek},
	"readrandomwriterandom":  {expected: (*Runner).readWrites, fn: readRandomWriteRandom, main: opRead},
	"updaterandom":           {expected: (*Runner).readWrites, fn: updateRandom, main: opUpdate},
	"deleteseq":              {expected: (*Runner).deletes, fn: deleteSeq, main: opDelete},
	"deleterandom":           {expected: (*Runner).deletes, fn: deleteRandom, main: opDelete},
	"mergerandom":            {expected: (*Runner).readWrites, fn: mergeRandom, main: opMerge},
	"readrandommergerandom":  {expected: (*Runner).readWrites, fn: readRandomMergeRandom, main: opMerge},
}

// utilityBenchmarks run once, not per thread.
var utilityBenchmarks = map[string]bool{"flush": true, "compact": true, "compactall": true, "stats": true, "levelstats": true}

func (r *Runner) writes() int64 {
	if r.cfg.Writes >= 0 {
		return r.cfg.Writes
	}
	return r.cfg.Num
}

func (r *Runner) reads() int64 {
	if r.cfg.Reads >= 0 {
		return r.cfg.Reads
	}
	return r.cfg.Num
}

func (r *Runner) deletes() int64 {
	if !r.cfg.DeletesSet {
		return r.writes()
	}
	if r.cfg.Deletes >= 0 {
		return r.cfg.Deletes
	}
	return r.cfg.Num
}

// readWrites is db_bench's count for updaterandom, readrandomwriterandom,
// mergerandom and readrandommergerandom: --num unless --reads or --writes
// is given, then the larger of the two.
func (r *Runner) readWrites() int64 {
	if r.cfg.Writes < 0 && r.cfg.Reads < 0 {
		return r.cfg.Num
	}
	return max(r.cfg.Writes, r.cfg.Reads)
}

// writeParams describe one fill benchmark.
type writeParams struct {
	seq       bool
	keyRange  int64 // random keys are drawn from [0, keyRange)
	valueSize int
	batch     int64
	sync      bool
}

func fillSeq(r *Runner, e Engine, t *threadState) error {
	return doWrite(r, e, t, writeParams{seq: true, keyRange: r.cfg.Num, valueSize: r.cfg.ValueSize, batch: r.batchSize(), sync: r.cfg.Sync})
}

// fillBatch is fillseq in batches of 1000, whatever --batch_size says, as
// in db_bench.
func fillBatch(r *Runner, e Engine, t *threadState) error {
	return doWrite(r, e, t, writeParams{seq: true, keyRange: r.cfg.Num, valueSize: r.cfg.ValueSize, batch: 1000, sync: r.cfg.Sync})
}

func fillRandom(r *Runner, e Engine, t *threadState) error {
	return doWrite(r, e, t, writeParams{keyRange: r.cfg.Num, valueSize: r.cfg.ValueSize, batch: r.batchSize(), sync: r.cfg.Sync})
}

// fillSync and fill100K divide the key range by 1000 (not the write count,
// as db_bench 7.8.3 does) and say so in their message.
func fillSync(r *Runner, e Engine, t *threadState) error {
	return doWrite(r, e, t, writeParams{keyRange: r.cfg.Num / 1000, valueSize: r.cfg.ValueSize, batch: r.batchSize(), sync: true})
}

func fill100K(r *Runner, e Engine, t *threadState) error {
	return doWrite(r, e, t, writeParams{keyRange: r.cfg.Num / 1000, valueSize: 100 * 1000, batch: r.batchSize(), sync: r.cfg.Sync})
}

func (r *Runner) batchSize() int64 { return max(r.cfg.BatchSize, 1) }

// doWrite is db_bench's DoWrite: batches of p.batch entries until the
// write count (or, for random keys, --duration) is used up; per batch one
// draw picks the DB, then each random key takes one draw.
func doWrite(r *Runner, e Engine, t *threadState, p writeParams) error {
	lim := r.newLimiter(r.writes(), !p.seq)
	keyRange := uint64(max(p.keyRange, 1))
	timing := t.timing() || t.st != nil
	var next uint64
	var start time.Time
	for !lim.done(p.batch) {
		t.rng.Next()
		if timing {
			start = time.Now()
		}
		var err error
		before := t.bytes
		if p.batch == 1 {
			k := t.nextKey(p.seq, &next, keyRange)
			v := t.values.Next(p.valueSize)
			t.bytes += int64(len(k) + len(v))
			err = e.Put(k, v, p.sync)
			t.st.wrote(1, batchBytes(1, len(k), len(v)), start)
		} else {
			err = t.writeBatch(e, p, &next, keyRange, start)
		}
		if err != nil {
			return fmt.Errorf("put: %w", err)
		}
		t.wlimit.request(t.bytes - before)
		t.ops += p.batch
		t.tick(opWrite, start, p.batch)
	}
	return nil
}

func (t *threadState) nextKey(seq bool, next *uint64, keyRange uint64) []byte {
	if seq {
		k := t.keys.Key(*next)
		*next++
		return k
	}
	return t.keys.Key(t.rng.Next() % keyRange)
}

// writeBatch writes one batch of p.batch entries, atomically when the
// engine has batches.
func (t *threadState) writeBatch(e Engine, p writeParams, next *uint64, keyRange uint64, start time.Time) error {
	be, ok := e.(BatchEngine)
	if ok && t.batch == nil {
		t.batch = be.NewWriteBatch()
	}
	var size int64 = batchHeader
	for j := int64(0); j < p.batch; j++ {
		k := t.nextKey(p.seq, next, keyRange)
		v := t.values.Next(p.valueSize)
		t.bytes += int64(len(k) + len(v))
		size += batchBytes(1, len(k), len(v)) - batchHeader
		if ok {
			t.batch.Put(k, v)
		} else if err := e.Put(k, v, p.sync); err != nil {
			return err
		}
	}
	var err error
	if ok {
		err = t.batch.Commit(p.sync)
	}
	t.st.wrote(p.batch, size, start)
	return err
}

// readRandom is db_bench's ReadRandom: per read one draw picks the DB and
// one the key.
func readRandom(r *Runner, e Engine, t *threadState) error {
	return doRead(r, e, t, r.cfg.Num, false, true)
}

// readMissing reads keys one byte longer than any written (db_bench pads
// them with one more '0'; the other key shapes with a '.', see
// KeyGen.Missing), so none is found.
func readMissing(r *Runner, e Engine, t *threadState) error {
	return doRead(r, e, t, r.cfg.Num, true, true)
}

// readHot is LevelDB's readhot (db_bench 7.8.3 has none): random reads of
// the first 1 % of the key space, one draw per read.
func readHot(r *Runner, e Engine, t *threadState) error {
	return doRead(r, e, t, (r.cfg.Num+99)/100, false, false)
}

// doRead reads random keys of [0, keyRange), or the missing keys made from
// them, one draw per key after one to pick the DB when pickDB is set.
func doRead(r *Runner, e Engine, t *threadState, keyRange int64, missing, pickDB bool) error {
	lim := r.newLimiter(r.reads(), true)
	n := uint64(max(keyRange, 1))
	timing := t.timing() || t.st != nil
	var start time.Time
	for !lim.done(1) {
		if pickDB {
			t.rng.Next()
		}
		var k []byte
		if missing {
			k = t.keys.Missing(t.rng.Next() % n)
		} else {
			k = t.keys.Key(t.rng.Next() % n)
		}
		if timing {
			start = time.Now()
		}
		found, vlen, err := e.Get(k, &t.valBuf)
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		t.st.got(found, vlen, start)
		if found {
			t.found++
			t.bytes += int64(len(k) + vlen)
		}
		t.ops++
		if t.ops%256 == 255 {
			t.rlimit.request(256)
		}
		t.tick(opRead, start, 1)
	}
	return nil
}

// seekRandom is db_bench's SeekRandom: a new iterator per seek (db_bench
// without --use_tailing_iterator), one draw per seek; a seek is found when
// it lands on the key sought; --seek_nexts steps follow, and only they
// count bytes. Under a prefix extractor the seeks are db_bench's read
// options' (seekMode), and --seek_missing_prefix seeks keys of prefixes
// no key has.
func seekRandom(r *Runner, e Engine, t *threadState) error {
	lim := r.newLimiter(r.reads(), true)
	n := uint64(max(r.cfg.Num, 1))
	timing := t.timing() || t.st != nil
	mode := r.cfg.seekMode()
	missingPrefix := r.seekMissingPrefix()
	var start time.Time
	for !lim.done(1) {
		k := t.keys.Key(t.rng.Next() % n)
		if missingPrefix {
			// db_bench's GenerateKeyFromIntForSeek: byte 8 is a '0' of
			// the prefix's padding in every key; '1' is no key's.
			k[8] = '1'
		}
		if timing {
			start = time.Now()
		}
		it, valid, err := r.openSeek(e, k, mode, t)
		if err != nil {
			return err
		}
		t.st.seeked(valid, it, start)
		if valid && bytes.Equal(it.Key(), k) {
			t.found++
		}
		for j := 0; j < r.cfg.SeekNexts && valid; j++ {
			t.bytes += int64(len(it.Key()) + len(it.Value()))
			if r.cfg.ReverseIterator {
				valid = it.Prev()
				t.st.stepped(false, valid, it)
			} else {
				valid = it.Next()
				t.st.stepped(true, valid, it)
			}
		}
		if err := it.Close(); err != nil {
			return err
		}
		t.st.iterClosed()
		t.ops++
		if t.ops%256 == 255 {
			t.rlimit.request(256)
		}
		t.tick(opSeek, start, 1)
	}
	return nil
}

// seekForPrev positions it at the last key <= k (RocksDB's SeekForPrev).
// buf is scratch for k's successor.
func seekForPrev(it Iter, k, buf []byte) (bool, []byte) {
	if rs, ok := it.(ReverseSeeker); ok {
		buf = append(append(buf[:0], k...), 0)
		return rs.SeekLT(buf), buf
	}
	if !it.SeekGE(k) {
		return it.Last(), buf
	}
	if bytes.Equal(it.Key(), k) {
		return true, buf
	}
	return it.Prev(), buf
}

func readSeq(r *Runner, e Engine, t *threadState) error     { return scan(r, e, t, true) }
func readReverse(r *Runner, e Engine, t *threadState) error { return scan(r, e, t, false) }

// scan reads min(--reads, entries) entries in order from one iterator
// (under --prefix_same_as_start, of the first key's prefix: scanInPrefix).
func scan(r *Runner, e Engine, t *threadState, forward bool) error {
	it, err := e.NewIter()
	if err != nil {
		return err
	}
	var start time.Time
	timing := t.timing() || t.st != nil
	if timing {
		start = time.Now()
	}
	valid := false
	if forward {
		valid = it.First()
	} else {
		valid = it.Last()
	}
	t.st.seeked(valid, it, start)
	if valid && r.cfg.scanInPrefix() {
		// prefix_same_as_start: the first key's prefix is the iterator's.
		n := r.cfg.Engine.PrefixSize
		it = t.inPrefix.wrap(it, prefixOf(it.Key(), n), n)
	}
	reads := r.reads()
	var n, nbytes int64
	for valid && n < reads {
		nbytes += int64(len(it.Key()) + len(it.Value()))
		n++
		if timing {
			start = time.Now()
		}
		if forward {
			valid = it.Next()
		} else {
			valid = it.Prev()
		}
		t.st.stepped(forward, valid, it)
		t.tick(opRead, start, 1)
	}
	t.ops, t.bytes = n, nbytes
	err = it.Close()
	t.st.iterClosed()
	return err
}

// updateRandom is db_bench's UpdateRandom: read a random key, then write
// it; both count bytes.
func updateRandom(r *Runner, e Engine, t *threadState) error {
	lim := r.newLimiter(r.readWrites(), true)
	n := uint64(max(r.cfg.Num, 1))
	timing := t.timing() || t.st != nil
	var start time.Time
	for !lim.done(1) {
		t.rng.Next()
		k := t.keys.Key(t.rng.Next() % n)
		if timing {
			start = time.Now()
		}
		found, vlen, err := e.Get(k, &t.valBuf)
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		t.st.got(found, vlen, start)
		if found {
			t.found++
			t.bytes += int64(len(k) + vlen)
		}
		v := t.values.Next(r.cfg.ValueSize)
		var wstart time.Time
		if t.st != nil {
			wstart = time.Now()
		}
		if err := e.Put(k, v, r.cfg.Sync); err != nil {
			return fmt.Errorf("put: %w", err)
		}
		t.st.wrote(1, batchBytes(1, len(k), len(v)), wstart)
		t.wlimit.request(int64(len(k) + len(v)))
		t.bytes += int64(len(k) + len(v))
		t.ops++
		t.tick(opUpdate, start, 1)
	}
	return nil
}

// readRandomWriteRandom is db_bench's ReadRandomWriteRandom: in each round
// of 100 operations, --readwritepercent reads come first, then the writes.
func readRandomWriteRandom(r *Runner, e Engine, t *threadState) error {
	lim := r.newLimiter(r.readWrites(), true)
	n := uint64(max(r.cfg.Num, 1))
	timing := t.timing() || t.st != nil
	var start time.Time
	getWeight, putWeight := 0, 0
	for !lim.done(1) {
		t.rng.Next()
		k := t.keys.Key(t.rng.Next() % n)
		if getWeight == 0 && putWeight == 0 {
			getWeight = r.cfg.ReadWritePercent
			putWeight = 100 - getWeight
		}
		if timing {
			start = time.Now()
		}
		if getWeight > 0 {
			found, vlen, err := e.Get(k, &t.valBuf)
			if err != nil {
				return fmt.Errorf("get: %w", err)
			}
			t.st.got(found, vlen, start)
			if found {
				t.found++
			}
			getWeight--
			t.reads++
			t.ops++
			t.tick(opRead, start, 1)
		} else if putWeight > 0 {
			v := t.values.Next(r.cfg.ValueSize)
			if err := e.Put(k, v, r.cfg.Sync); err != nil {
				return fmt.Errorf("put: %w", err)
			}
			t.st.wrote(1, batchBytes(1, len(k), len(v)), start)
			putWeight--
			t.writes++
			t.ops++
			t.tick(opWrite, start, 1)
		}
	}
	return nil
}

func deleteSeq(r *Runner, e Engine, t *threadState) error    { return doDelete(r, e, t, true) }
func deleteRandom(r *Runner, e Engine, t *threadState) error { return doDelete(r, e, t, false) }

// doDelete is db_bench's DoDelete: batches of --batch_size deletes, one
// draw per batch to pick the DB, then one per random key.
func doDelete(r *Runner, e Engine, t *threadState, seq bool) error {
	batch := r.batchSize()
	lim := r.newLimiter(r.deletes(), !seq)
	n := uint64(max(r.cfg.Num, 1))
	timing := t.timing() || t.st != nil
	be, batched := e.(BatchEngine)
	if batched && batch > 1 && t.batch == nil {
		t.batch = be.NewWriteBatch()
	}
	var i uint64
	var start time.Time
	for !lim.done(batch) {
		t.rng.Next()
		if timing {
			start = time.Now()
		}
		var size int64 = batchHeader
		for j := int64(0); j < batch; j++ {
			var k []byte
			if seq {
				k = t.keys.Key(i + uint64(j))
			} else {
				k = t.keys.Key(t.rng.Next() % n)
			}
			size += deleteBytes(len(k))
			switch {
			case batch > 1 && batched:
				t.batch.Delete(k)
			default:
				if err := e.Delete(k, r.cfg.Sync); err != nil {
					return fmt.Errorf("delete: %w", err)
				}
			}
		}
		if batch > 1 && batched {
			if err := t.batch.Commit(r.cfg.Sync); err != nil {
				return fmt.Errorf("delete: %w", err)
			}
		}
		t.st.wrote(batch, size, start)
		i += uint64(batch)
		t.ops += batch
		t.tick(opDelete, start, batch)
	}
	return nil
}

// bgWriter is db_bench's BGWriter, thread 0 of the *whilewriting
// benchmarks: random writes (one draw to pick the DB, one for the key)
// until the other threads finish.
func bgWriter(r *Runner, e Engine, t *threadState, stop *atomic.Bool) error {
	n := uint64(max(r.cfg.Num, 1))
	var start time.Time
	for !stop.Load() {
		t.rng.Next()
		k := t.keys.Key(t.rng.Next() % n)
		v := t.values.Next(r.cfg.ValueSize)
		if t.st != nil {
			start = time.Now()
		}
		if err := e.Put(k, v, r.cfg.Sync); err != nil {
			return fmt.Errorf("put: %w", err)
		}
		t.st.wrote(1, batchBytes(1, len(k), len(v)), start)
		t.bytes += int64(len(k) + len(v))
		t.ops++
		t.wlimit.request(int64(len(k) + len(v)))
	}
	return nil
}

// runThreads runs fn on --threads threads (plus, for *whilewriting, a
// writer thread 0 that runs until the others finish) and merges their
// figures. Each thread's random generator gets --seed plus a count of the
// threads created so far in this invocation, as in db_bench.
func (r *Runner) runThreads(name string, e Engine, b dbBench) (Result, error) {
	readers := max(r.cfg.Threads, 1)
	bar := r.newProgress(name, b.expected(r)*int64(readers))
	states := r.newThreadStates(b, readers, bar)
	workers := states
	if b.writer {
		workers = states[1:]
	}
	elapsed, writerErr := r.runAndWait(e, b, states)
	bar.finish()

	res := Result{Name: name, Elapsed: elapsed}
	for _, st := range states {
		r.stats.merge(st.st)
	}
	hists, err := mergeThreads(&res, workers)
	if err != nil {
		return res, fmt.Errorf("%s: %w", name, err)
	}
	if writerErr != nil {
		return res, fmt.Errorf("%s: writer: %w", name, writerErr)
	}
	res.Message, res.BlankAfter = r.threadsMessage(name, workers[0])
	if r.cfg.Histogram {
		for op := range hists {
			if hists[op].Count() > 0 {
				h := hists[op]
				res.Histograms = append(res.Histograms, OpHistogram{Op: opTypeNames[op], Hist: &h})
			}
		}
		res.Latency = hists[b.main].Summary()
	}
	return res, nil
}

// newThreadStates makes a state for each of the readers threads, after
// one for the writer, thread 0, if b has one. Each state takes the next
// thread seed, so they are made in thread order. The writer's figures stay
// out of the progress bar and the histograms.
func (r *Runner) newThreadStates(b dbBench, readers int, bar *progress) []*threadState {
	n := readers
	if b.writer {
		n++
	}
	states := make([]*threadState, n)
	wlimit, rlimit := newRateLimiter(r.cfg.WriteRateLimit), newRateLimiter(r.cfg.ReadRateLimit)
	for i := range states {
		r.threadSeq++
		st := &threadState{
			id:     i,
			rng:    newRandom64(r.seed + r.threadSeq),
			keys:   r.newKeyGen(),
			valBuf: paddedBuf(0, r.cfg.ValueSize),
			values: NewValueGenerator(r.cfg.CompressionRatio, r.valueBufferSize()),
			wlimit: wlimit,
			rlimit: rlimit,
		}
		if !(b.writer && i == 0) {
			st.progress = bar.add
			if r.cfg.Histogram {
				for op := range st.hists {
					st.hists[op] = &Histogram{}
				}
			}
		}
		if r.cfg.Statistics {
			st.st = newOpStats()
		}
		states[i] = st
	}
	return states
}

// runAndWait runs b.fn on each thread of states, and bgWriter on thread
// 0 if b has a writer, and waits for them. It returns the wall time of the
// fn threads (the writer runs until they finish, then stops) and the
// writer's error; each fn thread's error is left in its state.
func (r *Runner) runAndWait(e Engine, b dbBench, states []*threadState) (time.Duration, error) {
	var stop atomic.Bool
	var writerErr error
	var writerWG sync.WaitGroup
	workers := states
	if b.writer {
		workers = states[1:]
		writerWG.Add(1)
		go func() {
			defer writerWG.Done()
			writerErr = bgWriter(r, e, states[0], &stop)
		}()
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, st := range workers {
		wg.Add(1)
		go func(st *threadState) {
			defer wg.Done()
			t0 := time.Now()
			st.err = b.fn(r, e, st)
			st.busy = time.Since(t0)
			st.flushProgress()
		}(st)
	}
	wg.Wait()
	elapsed := time.Since(start)
	stop.Store(true)
	writerWG.Wait()
	return elapsed, writerErr
}

// mergeThreads adds the fn threads' ops, bytes and busy time to res and
// returns their merged histograms; or the first thread error, in thread
// order (res then holds the figures of the threads before it).
func mergeThreads(res *Result, workers []*threadState) ([numOpTypes]Histogram, error) {
	var hists [numOpTypes]Histogram
	for _, st := range workers {
		if st.err != nil {
			return hists, st.err
		}
		res.Ops += st.ops
		res.Bytes += st.bytes
		res.Busy += st.busy
		for op, h := range st.hists {
			if h != nil {
				hists[op].Merge(h)
			}
		}
	}
	return hists, nil
}

// threadsMessage is the note db_bench prints after benchmark name's
// figures, and whether a blank line follows the result. db_bench merges
// the threads' figures but keeps one thread's message: the first
// reader's, its own counts only.
func (r *Runner) threadsMessage(name string, first *threadState) (msg string, blankAfter bool) {
	switch name {
	case "readrandom", "readmissing", "readhot", "readwhilewriting", "seekrandom", "seekrandomwhilewriting":
		return fmt.Sprintf("(%d of %d found)", first.found, first.ops), true
	case "updaterandom":
		return fmt.Sprintf("( updates:%d found:%d)", first.ops, first.found), false
	case "readrandomwriterandom":
		return fmt.Sprintf("( reads:%d writes:%d total:%d found:%d)", first.reads, first.writes, first.ops, first.found), false
	case "mergerandom":
		return fmt.Sprintf("( updates:%d)", first.ops), false
	case "readrandommergerandom":
		return fmt.Sprintf("(reads:%d merges:%d total:%d hits:%d maxlength:%d)", first.reads, first.merges, first.ops, first.found, first.maxLen), false
	case "fillsync", "fill100K":
		return fmt.Sprintf("(%d ops)", r.cfg.Num/1000), false
	}
	return "", false
}

// valueBufferSize is the value generator's buffer: db_bench's
// max(1 MiB, --value_size_max), and at least one value.
func (r *Runner) valueBufferSize() int {
	maxV := r.cfg.ValueSizeMax
	if maxV <= 0 {
		maxV = 102400
	}
	return max(maxV, r.cfg.ValueSize, 100*1000)
}
