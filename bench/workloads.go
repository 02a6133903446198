package bench

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// workload runs one benchmark on one thread and reports what it did.
type threadState struct {
	id       int
	rng      *rand.Rand
	ops      int64
	bytes    int64
	found    int64
	busy     time.Duration
	hist     *Histogram
	key      []byte
	values   *ValueGenerator
	err      error
	onOp     func(n int64) // progress
	valBuf   []byte        // reused by Get
	deadline time.Time
}

// timed runs op n times (or until the duration passes), recording latencies
// when a histogram is kept.
func (t *threadState) loop(n int64, op func(i int64) error) {
	start := time.Now()
	progress := int64(0)
	for i := int64(0); i < n; i++ {
		var opStart time.Time
		if t.hist != nil {
			opStart = time.Now()
		}
		if err := op(i); err != nil {
			t.err = err
			break
		}
		if t.hist != nil {
			t.hist.Record(time.Since(opStart))
		}
		t.ops++
		if i&1023 == 1023 {
			if t.onOp != nil {
				t.onOp(i + 1 - progress)
				progress = i + 1
			}
			if !t.deadline.IsZero() && time.Now().After(t.deadline) {
				break
			}
		}
	}
	if t.onOp != nil {
		t.onOp(t.ops - progress)
	}
	t.busy = time.Since(start)
}

// benchFunc is one benchmark's per-thread body.
type benchFunc func(r *Runner, e Engine, t *threadState) error

// dbBenchmarks are the DB workloads by db_bench name. fresh says the
// benchmark starts from an empty store (unless --use_existing_db).
var dbBenchmarks = map[string]struct {
	fresh  bool
	writes bool
	fn     benchFunc
}{
	"fillseq":          {true, true, fillSeq},
	"fillrandom":       {true, true, fillRandom},
	"overwrite":        {false, true, fillRandom},
	"readrandom":       {false, false, readRandom},
	"readseq":          {false, false, readSeq},
	"readreverse":      {false, false, readReverse},
	"seekrandom":       {false, false, seekRandom},
	"readwhilewriting": {false, false, readRandom},
	"deleterandom":     {false, true, deleteRandom},
}

// utilityBenchmarks run once, not per thread.
var utilityBenchmarks = map[string]bool{"flush": true, "compact": true, "stats": true}

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

func fillSeq(r *Runner, e Engine, t *threadState) error {
	t.loop(r.writes(), func(i int64) error {
		k := MakeKey(t.key, uint64(i))
		v := t.values.Next(r.cfg.ValueSize)
		t.bytes += int64(len(k) + len(v))
		return e.Put(k, v, r.cfg.Sync)
	})
	return t.err
}

func fillRandom(r *Runner, e Engine, t *threadState) error {
	num := uint64(max(r.cfg.Num, 1))
	t.loop(r.writes(), func(int64) error {
		k := MakeKey(t.key, t.rng.Uint64()%num)
		v := t.values.Next(r.cfg.ValueSize)
		t.bytes += int64(len(k) + len(v))
		return e.Put(k, v, r.cfg.Sync)
	})
	return t.err
}

func deleteRandom(r *Runner, e Engine, t *threadState) error {
	num := uint64(max(r.cfg.Num, 1))
	t.loop(r.writes(), func(int64) error {
		return e.Delete(MakeKey(t.key, t.rng.Uint64()%num), r.cfg.Sync)
	})
	return t.err
}

func readRandom(r *Runner, e Engine, t *threadState) error {
	num := uint64(max(r.cfg.Num, 1))
	t.loop(r.reads(), func(int64) error {
		k := MakeKey(t.key, t.rng.Uint64()%num)
		found, n, err := e.Get(k, &t.valBuf)
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		if found {
			t.found++
			t.bytes += int64(len(k) + n)
		}
		return nil
	})
	return t.err
}

func seekRandom(r *Runner, e Engine, t *threadState) error {
	it, err := e.NewIter()
	if err != nil {
		return err
	}
	num := uint64(max(r.cfg.Num, 1))
	t.loop(r.reads(), func(int64) error {
		k := MakeKey(t.key, t.rng.Uint64()%num)
		if it.SeekGE(k) {
			t.found++
			t.bytes += int64(len(it.Key()) + len(it.Value()))
		}
		return nil
	})
	if cerr := it.Close(); t.err == nil {
		t.err = cerr
	}
	return t.err
}

func readSeq(r *Runner, e Engine, t *threadState) error {
	return scan(r, e, t, true)
}

func readReverse(r *Runner, e Engine, t *threadState) error {
	return scan(r, e, t, false)
}

func scan(r *Runner, e Engine, t *threadState, forward bool) error {
	it, err := e.NewIter()
	if err != nil {
		return err
	}
	valid := false
	if forward {
		valid = it.First()
	} else {
		valid = it.Last()
	}
	reads := r.reads()
	start := time.Now()
	var n, bytes int64
	var opStart time.Time
	for valid && n < reads {
		bytes += int64(len(it.Key()) + len(it.Value()))
		n++
		if t.hist != nil {
			opStart = time.Now()
		}
		if forward {
			valid = it.Next()
		} else {
			valid = it.Prev()
		}
		if t.hist != nil {
			t.hist.Record(time.Since(opStart))
		}
		if n&1023 == 0 && t.onOp != nil {
			t.onOp(1024)
		}
	}
	t.busy = time.Since(start)
	t.ops, t.bytes = n, bytes
	return it.Close()
}

// runThreads runs fn on cfg.Threads threads (plus, for readwhilewriting,
// one writer that runs until the readers finish) and merges their figures.
func (r *Runner) runThreads(name string, e Engine, fn benchFunc) (Result, error) {
	threads := max(r.cfg.Threads, 1)
	states := make([]*threadState, threads)
	var progress atomic.Int64
	bar := r.newProgress(name, r.expectedOps(name)*int64(threads))
	for i := range states {
		r.threadSeq++
		states[i] = &threadState{
			id:     i,
			rng:    rand.New(rand.NewPCG(r.seed+r.threadSeq, 0x9e3779b97f4a7c15)),
			key:    make([]byte, r.cfg.KeySize),
			values: r.values,
			onOp: func(n int64) {
				progress.Add(n)
				bar.add(n)
			},
		}
		if i > 0 {
			// Value buffers are not safe for concurrent use.
			states[i].values = NewValueGenerator(r.cfg.CompressionRatio, r.cfg.ValueSize)
		}
		if r.cfg.Histogram {
			states[i].hist = &Histogram{}
		}
		if r.cfg.Duration > 0 {
			states[i].deadline = time.Now().Add(r.cfg.Duration)
		}
	}
	stopWriter := make(chan struct{})
	var writerWG sync.WaitGroup
	var writerErr error
	if name == "readwhilewriting" {
		writerWG.Add(1)
		go func() {
			defer writerWG.Done()
			writerErr = r.backgroundWriter(e, stopWriter)
		}()
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, st := range states {
		wg.Add(1)
		go func(st *threadState) {
			defer wg.Done()
			if err := fn(r, e, st); err != nil && st.err == nil {
				st.err = err
			}
		}(st)
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopWriter)
	writerWG.Wait()
	bar.finish()

	res := Result{Name: name, Elapsed: elapsed}
	var found int64
	var hist Histogram
	for _, st := range states {
		if st.err != nil {
			return res, fmt.Errorf("%s: %w", name, st.err)
		}
		res.Ops += st.ops
		res.Bytes += st.bytes
		res.Busy += st.busy
		found += st.found
		if st.hist != nil {
			hist.Merge(st.hist)
		}
	}
	if writerErr != nil {
		return res, fmt.Errorf("%s: writer: %w", name, writerErr)
	}
	switch name {
	case "readrandom", "readwhilewriting", "seekrandom":
		res.Message = fmt.Sprintf("(%d of %d found)", found, res.Ops)
	}
	if r.cfg.Histogram {
		res.Latency = hist.Summary()
	}
	return res, nil
}

// backgroundWriter writes random keys at full speed until stop closes.
func (r *Runner) backgroundWriter(e Engine, stop <-chan struct{}) error {
	rng := rand.New(rand.NewPCG(r.seed, 77))
	values := NewValueGenerator(r.cfg.CompressionRatio, r.cfg.ValueSize)
	key := make([]byte, r.cfg.KeySize)
	num := uint64(max(r.cfg.Num, 1))
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := e.Put(MakeKey(key, rng.Uint64()%num), values.Next(r.cfg.ValueSize), r.cfg.Sync); err != nil {
			return err
		}
	}
}

// expectedOps is the per-thread op count, for the progress bar.
func (r *Runner) expectedOps(name string) int64 {
	if dbBenchmarks[name].writes {
		return r.writes()
	}
	return r.reads()
}
