package peers

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/vigildb/vigil/bench"
)

// BigBatchBenchmark is the first step of the bigbatch scenario, run by this
// package rather than kvbench: on a fresh store, one batch of all Num keys
// (kvbench's keys of the run's shape, bench.KeyGen's of 0..Num-1, each
// once, in the random order of [newPermutation] with the comparison's
// seed; values from
// kvbench's value generator), through the engine's own batch API
// ([bench.BatchEngine]: vigil's NewBatch/Apply, Pebble's NewBatch/Apply/
// Close). It reports:
//
//	bigbatch     Num entries over batch-apply + batch-flush: the time from
//	             handing the built batch to the engine until its data is in
//	             SSTs (Pebble queues a batch this large as a "flushable
//	             batch" and does the work in the flush; Vigil inserts it
//	             into a memtable, then flushes; so both are timed up to the
//	             same state, data on disk and the WAL obsolete)
//	batch-build  filling the batch (key generation included: the same code
//	             for both engines)
//	batch-apply  the Apply (WAL write, no fsync, included)
//	batch-flush  the Flush that follows
//	batch-close  closing the DB (it waits for background compactions)
//
// The reads of the scenario's next step reopen the store.
const BigBatchBenchmark = "bigbatch"

// runBigBatch runs BigBatchBenchmark on engine c with keys of shape,
// the database in db.
func runBigBatch(o Options, num int64, shape bench.KeyShape, c Contender, db string) ([]bench.Result, error) {
	eo := o.Engine
	eo.Dir = db
	eo.Fresh = true
	e, err := c.Open(eo)
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			e.Close()
		}
	}()
	be, ok := e.(bench.BatchEngine)
	if !ok {
		return nil, fmt.Errorf("%s: engine has no batches (bench.BatchEngine)", BigBatchBenchmark)
	}
	perm := newPermutation(uint64(num), o.Seed)
	values := bench.NewValueGenerator(o.CompressionRatio, o.ValueSize)
	keys := bench.NewKeyGen(shape, o.KeySize)

	t0 := time.Now()
	wb := be.NewWriteBatch()
	var bytes int64
	for i := int64(0); i < num; i++ {
		k, v := keys.Key(perm.Next()), values.Next(o.ValueSize)
		bytes += int64(len(k) + len(v))
		wb.Put(k, v)
	}
	t1 := time.Now()
	if err := wb.Commit(false); err != nil {
		return nil, fmt.Errorf("%s: apply: %w", BigBatchBenchmark, err)
	}
	wb = nil // the batch's memory is the engine's (or garbage) from here on
	t2 := time.Now()
	if err := e.Flush(); err != nil {
		return nil, fmt.Errorf("%s: flush: %w", BigBatchBenchmark, err)
	}
	t3 := time.Now()
	closed = true
	if err := e.Close(); err != nil {
		return nil, fmt.Errorf("%s: close: %w", BigBatchBenchmark, err)
	}
	t4 := time.Now()

	phase := func(name string, d time.Duration) bench.Result {
		return bench.Result{Name: name, Ops: num, Bytes: bytes, Elapsed: d, Busy: d}
	}
	main := phase(BigBatchBenchmark, t3.Sub(t1))
	main.Message = fmt.Sprintf("(apply %.3f s + flush %.3f s; build %.3f s not included)",
		t2.Sub(t1).Seconds(), t3.Sub(t2).Seconds(), t1.Sub(t0).Seconds())
	return []bench.Result{
		main,
		phase("batch-build", t1.Sub(t0)),
		phase("batch-apply", t2.Sub(t1)),
		phase("batch-flush", t3.Sub(t2)),
		phase("batch-close", t4.Sub(t3)),
	}, nil
}

// permutation enumerates 0..n-1, each once, in a pseudo-random order fixed
// by the seed, without a table: a bijective mix of the k-bit integers
// (2^k >= n) walked in order, skipping the images >= n (fewer than half).
type permutation struct {
	n, i, mask uint64
	shift      uint
	keys       [3]uint64
}

func newPermutation(n, seed uint64) *permutation {
	k := uint(max(bits.Len64(max(n, 2)-1), 1))
	p := &permutation{n: n, mask: 1<<k - 1, shift: k/2 + 1}
	x := seed
	for r := range p.keys {
		// splitmix64
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		p.keys[r] = z ^ z>>31
	}
	return p
}

// mix is a bijection of [0, 2^k): each of xor, add, multiply by an odd
// number (mod 2^k) and xorshift-right is invertible there.
func (p *permutation) mix(x uint64) uint64 {
	for _, key := range p.keys {
		x = (x ^ key) & p.mask
		x = (x*0xd6e8feb86659fd93 + key>>32) & p.mask
		x ^= x >> p.shift
	}
	return x
}

// Next returns the next number of the permutation; after n of them it
// starts over.
func (p *permutation) Next() uint64 {
	for {
		x := p.mix(p.i)
		p.i = (p.i + 1) & p.mask
		if x < p.n {
			return x
		}
	}
}
