package stress

import (
	"errors"
	"fmt"
	"github.com/vigildb/vigil/internal/private"
	"strings"
	"sync"
	"unsafe"

	"github.com/vigildb/vigil"
)

// Bit flips (--corrupt-memory).
//
// A flip models bad RAM: one bit of a live memtable entry's key or value
// bytes (found with private.MemtableEntryKind for a recently written key),
// or of a data block in the block cache (private.ForEachCachedBlock), or
// of a write batch before Apply (see Batch flips, below).
// Flips happen with every worker stopped, one at a time, and each is
// followed at once by probe reads: Gets of the key (and of the key the flip
// turned it into, if that is one of ours), and bounded scans around it in
// both directions for a memtable flip; full scans for a block flip. The
// oracle is exact then (nothing is in flight), so a probe read either
// returns the right data, returns wrong data without an error (the flip was
// missed), or fails with ErrCorruption (detected at read).
//
// Then a memtable flip is settled. The corrupt entry stays in the memtable
// until a reopen rebuilds it from the WAL (which the flip did not touch),
// so the runner either reopens at once, or — with 8 protection bytes, where
// nothing may slip through — calls Flush, which must refuse the memtable
// with ErrCorruption (detected at flush), or releases the flip to the
// workers: until the next reopen their reads may fail with ErrCorruption
// and the background flush must fail the same way, but no read may return
// wrong data. A block flip heals itself: the paranoid cache check evicts
// the block it catches; a background compaction that read the block first
// fails with a corruption background error (detected at compaction).
//
// Flips in skiplist links and towers are a different class (they break
// reachability rather than bytes under a checksum) and are not injected.
//
// With fewer than 8 protection bytes a flip escapes the per-entry check
// with probability 2^-8N by design, so misses are reported but only fail
// the run with 8 bytes.

// flipState tracks the flips of a run.
//
// Concurrency: mu guards everything; workers consult it (tolerates,
// noteMissed) concurrently with each other, the flipper runs with the
// gate held exclusively.
type flipState struct {
	mu    sync.Mutex
	stats FlipStats
	// released: a memtable flip is left for the workers and the
	// background flush to find, until the next reopen.
	released bool
	// releasedVerdict is the probe's verdict on the released flip, and
	// releasedRead whether a worker's read reported it since.
	releasedVerdict flipVerdict
	releasedTarget  *FlipCounts
	releasedRead    bool
	releasedMissed  bool
	// blockSinceReopen: a block flip happened since the last reopen, so a
	// background compaction may have stopped on it.
	blockSinceReopen bool
	// recent describes the last flips, for the context of a divergence.
	recent []string
}

// note remembers a flip's description (mu is held).
func (f *flipState) note(s string) {
	if len(f.recent) == 6 {
		f.recent = append(f.recent[:0], f.recent[1:]...)
	}
	f.recent = append(f.recent, s)
}

// context describes the last flips, for a divergence report.
func (f *flipState) context() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.recent) == 0 {
		return ""
	}
	return "last bit flips before this:\n  " + strings.Join(f.recent, "\n  ")
}

// flipVerdict is what the probe reads made of a flip.
type flipVerdict int

const (
	flipNoEffect flipVerdict = iota
	flipDetectedAtRead
	flipMissed
	// flipDetectedAtApply: Apply refused a flipped write batch.
	flipDetectedAtApply
)

func (f *flipState) snapshot() FlipStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// addCorruptions adds a closing DB's counts of the memtable corruptions
// and corrupt batches it reported. The progress line reads the stats
// concurrently, so mu is taken.
func (f *flipState) addCorruptions(m *vigil.Metrics) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.MemtableCorruptions += m.MemTable.Corruptions
	f.stats.BatchCorruptions += m.BatchCorruptions
}

// tolerates reports whether a worker may see err because of a flip.
func (f *flipState) tolerates(err error) bool {
	if !errors.Is(err, vigil.ErrCorruption) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.released {
		if !errors.Is(err, vigil.ErrReadOnly) {
			f.releasedRead = true
		}
		return true
	}
	// A compaction that read a flipped cached block stops with a
	// corruption background error; writes then fail read-only.
	return f.blockSinceReopen && errors.Is(err, vigil.ErrReadOnly)
}

// noteMissed records a worker read that returned wrong data while a flip
// was released. The run fails on it anyway; this keeps the count honest.
func (f *flipState) noteMissed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.released {
		f.releasedMissed = true
	}
}

// count files one flip's outcome under its target: missed, detected at
// read, or no effect by its reads, and independently whether a flush or
// compaction reported it. mu is held.
func (f *flipState) count(c *FlipCounts, v flipVerdict, flushDetected bool) {
	switch v {
	case flipMissed:
		c.Missed++
	case flipDetectedAtRead:
		c.DetectedAtRead++
	}
	if flushDetected {
		c.DetectedAtFlush++
	} else if v == flipNoEffect {
		c.NoEffect++
	}
}

// countLocking is count for a caller that does not hold mu.
func (f *flipState) countLocking(c *FlipCounts, v flipVerdict, flushDetected bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count(c, v, flushDetected)
}

// release leaves a memtable flip for the workers and the background flush
// to find until the next reopen, where settle counts it under target: its
// verdict so far is the probe reads' (v), which the workers' reads may
// upgrade.
func (f *flipState) release(v flipVerdict, target *FlipCounts) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released, f.releasedVerdict, f.releasedTarget = true, v, target
	f.releasedRead, f.releasedMissed = false, false
}

// settle classifies a released flip before the DB is closed (db nil: it is
// closed already, after a crash) and forgets block flips.
func (f *flipState) settle(db store) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blockSinceReopen = false
	if !f.released {
		return
	}
	f.released = false
	v := f.releasedVerdict
	if f.releasedMissed {
		v = flipMissed
	} else if v == flipNoEffect && f.releasedRead {
		v = flipDetectedAtRead
	}
	flushed := false
	if db != nil {
		if bg := db.Metrics().BackgroundError; bg != nil && errors.Is(bg, vigil.ErrCorruption) {
			flushed = true
		}
	}
	f.count(f.releasedTarget, v, flushed)
}

// within reports whether inner starts inside outer's bytes.
func within(inner, outer []byte) bool {
	if len(inner) == 0 || len(outer) == 0 {
		return false
	}
	o := uintptr(unsafe.Pointer(unsafe.SliceData(outer)))
	i := uintptr(unsafe.Pointer(unsafe.SliceData(inner)))
	return i >= o && i < o+uintptr(len(outer))
}

// flip injects one bit flip and settles it. The gate is taken exclusively.
func (r *runner) flip() *Divergence {
	r.gate.Lock()
	defer r.gate.Unlock()
	r.flips.mu.Lock()
	released := r.flips.released
	r.flips.mu.Unlock()
	if released {
		// The previous flip is still out: settle it first.
		return r.reopenLocked("settle a released memtable flip")
	}
	r.setFaults(false)
	defer func() { r.setFaults(!r.stopped()) }()
	if r.eventRng.IntN(5) < 3 {
		return r.flipMemtable()
	}
	return r.flipBlock()
}

// memtableFlip is a bit flipped in a memtable entry, followed from the
// flip to its settling.
type memtableFlip struct {
	k int // the key whose newest entry was flipped
	// inKey: the bit is in the entry's key, not its value.
	inKey bool
	// flipped is the entry's key after the flip (a copy).
	flipped []byte
	// inMutable: the entry is in the mutable memtable, which no
	// background flush can have read before the flip.
	inMutable bool
	// target counts the flip's outcome: key, value or range deletion flips.
	target *FlipCounts
}

// where names the flipped part of the entry, for messages.
func (m *memtableFlip) where() string {
	if m.inKey {
		return "key"
	}
	return "value"
}

// flipMemtable flips a bit in the newest memtable entry of a recently
// written key, probes, and settles the flip. The steps pass the flip along
// as a memtableFlip; whichever step settles it counts its outcome under
// m.target (detected at read or at flush, no effect, or missed).
func (r *runner) flipMemtable() *Divergence {
	m := r.flipMemtableEntry()
	if m == nil {
		return nil // no recent key has an entry we may flip now
	}
	r.flips.mu.Lock()
	m.target.Injected++
	r.flips.note(fmt.Sprintf("op %d: memtable %s of %s", r.stats.ops.Load(), m.where(), r.kc.keyName(m.k)))
	r.flips.mu.Unlock()
	r.verbosef("flipped a bit in the memtable %s of %s (now %q)", m.where(), r.kc.keyName(m.k), m.flipped)

	verdict, missed, div := r.probeMemtable(m.k, m.flipped)
	if div != nil {
		return div
	}
	if verdict == flipMissed {
		r.verbosef("missed: %s", missed)
	}
	if verdict == flipMissed && r.plan.Protection == 8 {
		r.flips.countLocking(m.target, verdict, false)
		return &Divergence{Op: fmt.Sprintf("memtable %s bit flip", m.where()), Key: r.kc.keyName(m.k), Got: "wrong data without an error",
			Detail: fmt.Sprintf("with 8 protection bytes and paranoid checks every flip must be reported as ErrCorruption; %s", missed)}
	}
	if r.plan.Protection == 8 {
		// Nothing may slip through 8 bytes: besides a reopen, the flip can
		// be left to the workers or to Flush to find.
		switch r.eventRng.IntN(3) {
		case 0:
			r.flips.release(verdict, m.target)
			return nil
		case 1:
			return r.flushFlipped(m, verdict)
		}
	}
	r.flips.countLocking(m.target, verdict, false)
	return r.reopenLocked("after a memtable flip")
}

// flipMemtableEntry picks a recently written key with a memtable entry it
// may flip, flips one bit of that entry's key or value, and describes the
// flip; nil if 16 tries found no such entry.
//
// It flips only entries of the mutable memtable under the race detector
// (an immutable one may be read by the flush goroutine right now, a race
// by design that the detector would report), and with fewer than 8
// protection bytes: there a flip escapes the check with probability
// 2^-8N by design, and one escaping in a memtable being flushed would
// reach an SST before the runner's reopen could undo it.
func (r *runner) flipMemtableEntry() *memtableFlip {
	db := r.db.DB()
	mutableOnly := raceEnabled || r.plan.Protection < 8
	var mutable []byte
	first := true
	private.ForEachMemtableArena(db, func(a []byte) {
		if first {
			mutable, first = a, false
		}
	})
	k, inKey, flipped, inMutable, rangeDel := -1, false, []byte(nil), false, false
	for attempt := 0; attempt < 16 && k < 0; attempt++ {
		cand := int(r.recent[r.eventRng.IntN(len(r.recent))].Load())
		if cand < 0 || cand >= r.plan.Keys {
			continue
		}
		private.MemtableEntryKind(db, r.kc.key(cand), func(kb, vb []byte, isRangeDel bool) {
			if mutableOnly && !within(kb, mutable) {
				return
			}
			if r.plan.NoKeyFlips && len(vb) == 0 {
				return
			}
			inKey = !r.plan.NoKeyFlips && (len(vb) == 0 || r.eventRng.IntN(2) == 0)
			target := vb
			if inKey {
				target = kb
			}
			bit := r.eventRng.IntN(8 * len(target))
			target[bit/8] ^= 1 << (bit % 8)
			k, flipped, inMutable, rangeDel = cand, append([]byte(nil), kb...), within(kb, mutable), isRangeDel
		})
	}
	if k < 0 {
		return nil
	}
	m := &memtableFlip{k: k, inKey: inKey, flipped: flipped, inMutable: inMutable, target: &r.flips.stats.MemtableValue}
	switch {
	case rangeDel:
		m.target = &r.flips.stats.MemtableRangeDel
	case inKey:
		m.target = &r.flips.stats.MemtableKey
	}
	return m
}

// flushFlipped settles a memtable flip made with 8 protection bytes by
// calling Flush, whose validation must refuse the corrupt memtable with
// ErrCorruption; then reopens to drop it. verdict is the probe reads'.
func (r *runner) flushFlipped(m *memtableFlip, verdict flipVerdict) *Divergence {
	op := fmt.Sprintf("Flush after a memtable %s bit flip", m.where())
	err := r.db.Flush()
	switch {
	case err == nil && !m.inMutable:
		// The flip hit an immutable memtable whose background flush had
		// already read the entry (validation and the copy both check it),
		// so the table holds it as it was and Flush had nothing left to
		// refuse: seen by a seeded sweep, with 256 KiB memtables flushing
		// constantly. Reads must now return the oracle's data.
		after, missed, div := r.probeMemtable(m.k, m.flipped)
		if div != nil {
			return div
		}
		if after == flipMissed {
			return &Divergence{Op: op, Key: r.kc.keyName(m.k),
				Expected: "ErrCorruption, or the entry flushed before the flip", Got: "success, and reads return wrong data: " + missed}
		}
		r.flips.countLocking(m.target, verdict, false)
		return r.reopenLocked("after a memtable flip that a flush had already passed")
	case err == nil:
		return &Divergence{Op: op, Key: r.kc.keyName(m.k),
			Expected: "ErrCorruption (flush validation checks every entry's 8 protection bytes)", Got: "success: the corrupt entry went to an SST"}
	case errors.Is(err, vigil.ErrCorruption):
		r.flips.countLocking(m.target, verdict, true)
		return r.reopenLocked("after a memtable flip caught by Flush")
	default:
		return &Divergence{Op: op, Key: r.kc.keyName(m.k), Expected: "ErrCorruption", Got: err.Error()}
	}
}

// probeMemtable reads what a memtable flip of key k may have changed.
func (r *runner) probeMemtable(k int, flipped []byte) (flipVerdict, string, *Divergence) {
	keys := []int{k}
	if k2, err := r.kc.decode(flipped); err == nil && k2 != k {
		keys = append(keys, k2)
	}
	p := prober{r: r}
	for _, kk := range keys {
		p.get(kk)
		lo, hi := max(0, kk-8), min(r.plan.Keys, kk+9)
		p.scan(lo, hi, true, true)
		p.scan(lo, hi, true, false)
		p.scan(lo, hi, false, true)
		p.scan(lo, hi, false, false)
	}
	if r.plan.Keys <= 4096 {
		p.scan(0, r.plan.Keys, false, true)
		p.scan(0, r.plan.Keys, false, false)
	}
	return p.verdict()
}

// flipBlock flips a bit in a random cached data block and probes with full
// scans.
func (r *runner) flipBlock() *Divergence {
	db := r.db.DB()
	count := 0
	private.ForEachCachedBlock(db, func(b []byte) {
		if len(b) > 0 {
			count++
		}
	})
	if count == 0 {
		return nil
	}
	target, i := r.eventRng.IntN(count), 0
	done := false
	private.ForEachCachedBlock(db, func(b []byte) {
		if len(b) == 0 || done {
			return
		}
		if i == target {
			bit := r.eventRng.IntN(8 * len(b))
			b[bit/8] ^= 1 << (bit % 8)
			done = true
		}
		i++
	})
	if !done {
		return nil
	}
	r.flips.mu.Lock()
	r.flips.stats.Block.Injected++
	r.flips.blockSinceReopen = true
	r.flips.note(fmt.Sprintf("op %d: cached block %d of %d", r.stats.ops.Load(), target, count))
	r.flips.mu.Unlock()
	r.verbosef("flipped a bit in cached block %d of %d", target, count)
	p := prober{r: r}
	// A detection evicts the block; scan until a scan is clean (one flip
	// damages one block, so two scans suffice; three allow for a cache
	// that re-reads under pressure).
	for attempt := 0; attempt < 3; attempt++ {
		before := p.detected
		p.scan(0, r.plan.Keys, false, attempt%2 == 0)
		if p.detected == before {
			break
		}
	}
	verdict, missed, div := p.verdict()
	if div != nil {
		return div
	}
	if verdict == flipMissed {
		r.flips.mu.Lock()
		r.flips.count(&r.flips.stats.Block, verdict, false)
		r.flips.mu.Unlock()
		return &Divergence{Op: "cached block bit flip", Got: "wrong data without an error",
			Detail: "paranoid checks re-verify a cached block's 64-bit checksum on every hit; " + missed}
	}
	bg := r.db.Metrics().BackgroundError
	compacted := bg != nil && errors.Is(bg, vigil.ErrCorruption)
	r.flips.mu.Lock()
	r.flips.count(&r.flips.stats.Block, verdict, compacted)
	r.flips.mu.Unlock()
	if compacted {
		return r.reopenLocked("a compaction stopped on a flipped block")
	}
	return nil
}

// prober runs probe reads with every worker stopped, so the oracle's
// committed state is exact (pending states are failed writes awaiting a
// verification, and are accepted too).
type prober struct {
	r        *runner
	detected int
	missed   []string
	div      *Divergence
}

func (p *prober) verdict() (flipVerdict, string, *Divergence) {
	switch {
	case p.div != nil:
		return 0, "", p.div
	case len(p.missed) > 0:
		return flipMissed, fmt.Sprintf("%d probe reads returned wrong data: %s", len(p.missed), strings.Join(p.missed, "; ")), nil
	case p.detected > 0:
		return flipDetectedAtRead, "", nil
	}
	return flipNoEffect, "", nil
}

// fail files an error: corruption is a detection, anything else a
// divergence (no faults are injected during probes).
func (p *prober) fail(op string, err error) {
	if errors.Is(err, vigil.ErrCorruption) {
		p.detected++
		return
	}
	if p.div == nil {
		p.div = &Divergence{Op: "probe " + op + " after a bit flip", Got: "error: " + err.Error(), Detail: "expected data or ErrCorruption"}
	}
}

func (p *prober) judge(op string, k int, got kstate) {
	var v keyView
	p.r.or.view(k, &v)
	if check(&v, &v, got) == verdictWrong {
		p.missed = append(p.missed, fmt.Sprintf("%s of %s returned %v, expected %s", op, p.r.kc.keyName(k), got, expected(&v, &v)))
	}
}

func (p *prober) get(k int) {
	r := p.r
	v, err := r.db.Get(r.kc.key(k))
	if err != nil && !errors.Is(err, vigil.ErrNotFound) {
		p.fail("get", err)
		return
	}
	var got kstate
	if err != nil {
		got = kstate{del: true}
	} else {
		dv, derr := r.vc.decodeValue(v)
		if derr == nil && (dv.key != k || dv.transient) {
			derr = valueMismatch(dv, k)
		}
		if derr != nil {
			p.missed = append(p.missed, fmt.Sprintf("get of %s returned a wrong value: %v", r.kc.keyName(k), derr))
			return
		}
		got = kstate{ver: dv.version}
	}
	p.judge("get", k, got)
}

// scan reads [lo, hi) in one direction, with bounds or (unbounded) until
// it leaves the range, checking every key present and every key skipped.
func (p *prober) scan(lo, hi int, bounded, forward bool) {
	r := p.r
	var opts *vigil.IterOptions
	if bounded {
		opts = &vigil.IterOptions{LowerBound: r.kc.key(lo), UpperBound: r.kc.key(hi)}
	}
	it, err := r.db.NewIter(opts)
	if err != nil {
		p.fail("NewIter", err)
		return
	}
	defer it.Close()
	op := "scan " + dir(forward)
	var ok bool
	if forward {
		ok = it.SeekGE(r.kc.key(lo))
	} else {
		ok = it.SeekLT(r.kc.key(hi))
	}
	next := lo // forward: next key to account for; backward: hi-1 downwards
	if !forward {
		next = hi - 1
	}
	for ; ok; ok = step(it, forward) {
		k, err := r.kc.decode(it.Key())
		if err != nil {
			p.missed = append(p.missed, fmt.Sprintf("%s returned key %q: %v", op, it.Key(), err))
			return
		}
		if (forward && k >= hi) || (!forward && k < lo) {
			break
		}
		if (forward && k < next) || (!forward && k > next) {
			p.missed = append(p.missed, fmt.Sprintf("%s returned %s out of order", op, r.kc.keyName(k)))
			return
		}
		for ; next != k; next = nextKey(next, forward) {
			p.judge(op, next, kstate{del: true})
		}
		dv, derr := r.vc.decodeValue(it.Value())
		if derr == nil && (dv.key != k || dv.transient) {
			derr = valueMismatch(dv, k)
		}
		if derr != nil {
			p.missed = append(p.missed, fmt.Sprintf("%s returned a wrong value for %s: %v", op, r.kc.keyName(k), derr))
			return
		}
		p.judge(op, k, kstate{ver: dv.version})
		next = nextKey(k, forward)
	}
	if err := it.Error(); err != nil {
		p.fail(op, err)
		return
	}
	for ; next >= lo && next < hi; next = nextKey(next, forward) {
		p.judge(op, next, kstate{del: true})
	}
}

func nextKey(k int, forward bool) int {
	if forward {
		return k + 1
	}
	return k - 1
}

// Batch flips. With batch protection (Options.BatchProtectionBytesPerKey)
// a worker now and then flips one bit of its write batch after the batch's
// last Put and before Apply, as bad RAM could between building a batch and
// committing it. The batch is the worker's own, so no one else is stopped.
// Apply must refuse it with ErrCorruption having written nothing: the
// runner then drops the write from the op log and its versions from the
// oracle's pending writes (it never happened), and reads every key of the
// batch back, which must hold the state before it (detected at apply). A
// flip in the batch's header (seqnum and count, which Apply rewrites) must
// have no effect. Apply succeeding after a flip in the records is a miss.
//
// With 8 bytes a miss fails the run. With fewer a flip escapes with
// probability 2^-8N by design, so the bit is flipped in the value of a
// decoy put to a transient value that the batch itself overrides (see
// buildBatch): a miss is counted, and harmless. A flipped batch whose
// Apply failed for another reason (the DB closed by a crash, read-only
// after a fault) never reached the check and is not counted.

// batchHeaderLen is the batch encoding's header: seqnum u64, count u32
// (see vigil.Batch).
const batchHeaderLen = 12

// batchFlip is a bit flipped in a write batch before Apply.
type batchFlip struct {
	// decoy: the bit is in the value of the decoy that starts the batch.
	decoy bool
	// inHeader: the bit is in the header, which Apply rewrites.
	inHeader bool
	// where names the bit, for messages.
	where string
}

// batchFlipDue reports whether the worker flips its next batch: with
// --corrupt-memory and batch protection, one batch in about
// FlipEvery*8/100 (batches are about 8 % of the operations, so batch flips
// come about as often as the runner's other flips), drawn from flipRng.
func (w *worker) batchFlipDue() bool {
	p := &w.r.plan
	if !p.Corrupt || p.BatchProtection == 0 {
		return false
	}
	return w.flipRng.IntN(max(2, int(p.FlipEvery*8/100))) == 0
}

// flipBatch flips one bit of the built batch b: in the decoy's value, or
// anywhere in its buffer, header included.
func (w *worker) flipBatch(b *vigil.Batch, bf *batchFlip) {
	if bf.decoy {
		_, _, v, ok := b.Reader().Next() // the decoy; v aliases the buffer
		if !ok || len(v) == 0 {
			panic("stress: a batch without its decoy")
		}
		bit := w.flipRng.IntN(8 * len(v))
		v[bit/8] ^= 1 << (bit % 8)
		bf.where = fmt.Sprintf("bit %d of the decoy's %d-byte value", bit, len(v))
		return
	}
	buf := private.BatchBuffer(b)
	bit := w.flipRng.IntN(8 * len(buf))
	buf[bit/8] ^= 1 << (bit % 8)
	bf.inHeader = bit < 8*batchHeaderLen
	bf.where = fmt.Sprintf("bit %d of %d bytes", bit, len(buf))
	if bf.inHeader {
		bf.where += " (header)"
	}
}

// settleBatchFlip classifies the outcome of applying a flipped batch (the
// write rec of keys, which Apply answered with err) and counts it. settled
// says the write is done with (refused: dropped and checked; or a miss
// that fails the run); otherwise the caller goes on as for any write.
func (w *worker) settleBatchFlip(db store, bf *batchFlip, rec *opRec, keys []int, err error) (div *Divergence, settled bool) {
	r := w.r
	var v flipVerdict
	invalid := false // refused as an invalid batch, not for the flip
	switch {
	case err == nil && bf.inHeader:
		v = flipNoEffect
	case err == nil:
		v = flipMissed
	case errors.Is(err, vigil.ErrCorruption) && !errors.Is(err, vigil.ErrReadOnly) && db.Metrics().BackgroundError == nil:
		v = flipDetectedAtApply
	case errors.Is(err, vigil.ErrInvalidArgument):
		// The flip made the batch invalid (a range deletion's end now
		// before its start) and Apply refused it for that: its check
		// missed the flip, and nothing was written.
		v, invalid = flipMissed, true
	default:
		return nil, false // never reached the check
	}
	r.flips.mu.Lock()
	c := &r.flips.stats.Batch
	c.Injected++
	switch v {
	case flipNoEffect:
		c.NoEffect++
	case flipMissed:
		c.Missed++
	default:
		c.DetectedAtApply++
	}
	r.flips.note(fmt.Sprintf("op %d: write batch of %d keys, %s", r.stats.ops.Load(), len(keys), bf.where))
	r.flips.mu.Unlock()
	r.verbosef("flipped %s of a write batch: %s", bf.where, [...]string{"no effect", "", "missed", "refused by Apply"}[v])
	switch {
	case v == flipMissed && r.plan.BatchProtection == 8:
		got := "Apply wrote the batch"
		if invalid {
			got = "Apply refused the batch as invalid: " + err.Error()
		}
		return &Divergence{Op: "write batch bit flip", Got: got,
			Detail: fmt.Sprintf("%v; %s: with 8 batch protection bytes Apply must refuse it with ErrCorruption", rec, bf.where)}, true
	case v != flipDetectedAtApply && !invalid:
		return nil, false // applied, as written: commit it
	}
	// Refused: the write never happened.
	if r.log != nil {
		if err := r.log.drop(rec); err != nil {
			return r.machinery(err), true
		}
	}
	for _, kw := range rec.writes {
		r.or.abort(int(kw.key), kw.st)
	}
	r.stats.writes.Add(1)
	return w.checkUnwritten(db, keys, bf), true
}

// checkUnwritten reads back the keys of a batch Apply refused (they are
// still locked): each must be in the state it had before.
func (w *worker) checkUnwritten(db store, keys []int, bf *batchFlip) *Divergence {
	r := w.r
	for _, k := range keys {
		var pre keyView
		r.or.view(k, &pre)
		val, err := db.Get(r.kc.key(k))
		if err != nil && !errors.Is(err, vigil.ErrNotFound) {
			if r.tolerate(err) {
				continue
			}
			return &Divergence{Op: "get after a refused write batch", Key: r.kc.keyName(k), Expected: expected(&pre, &pre), Got: "error: " + err.Error()}
		}
		got, derr := w.observe(k, val, err)
		if derr != nil {
			return &Divergence{Op: "get after a refused write batch", Key: r.kc.keyName(k), Expected: expected(&pre, &pre), Got: "a wrong value", Detail: derr.Error()}
		}
		if div := w.judge("get after a write batch Apply refused for a flipped bit ("+bf.where+"): nothing of it may be visible", k, &pre, &pre, got); div != nil {
			return div
		}
	}
	return nil
}
