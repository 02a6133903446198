package stress

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/internal/vfsutil"
)

// Two operations at a low rate: an ingestion of an external table and a
// checkpoint.
//
// An ingestion replaces a small range [a, b) of keys: with its keys
// locked, as a batch's are, each key of the range takes its next version,
// set or deleted, and an external table holds exactly that (the sets, some
// deletes as point deletes, and a range deletion of [a, b) for the rest,
// which, sharing the table's seqnum, does not delete the table's own
// sets); or, half the time, the table holds only the sets and point
// deletes and IngestAndExcise(a, b) empties the range around them. Keys
// are ordered like their numbers, so the range holds no other key. For
// the oracle and the crash checker it is one atomic write of every key of
// the range, durable once acknowledged (Ingest syncs the WAL before its
// MANIFEST edit, so it is also never recovered without the writes before
// it): logged as a synced write.
//
// A checkpoint is taken with a small range locked, like a snapshot, so the
// range's state at the checkpoint's point is known; other keys are written
// meanwhile. The checkpoint is then opened read-only and the range read by
// Get and scans in both directions (checkSnapshot), the checkpoint
// verified, closed and removed.

// scratchNames numbers the runner's scratch files (external tables,
// checkpoint directories) so that no two share a name.
var scratchNames atomic.Uint64

func (w *worker) scratchName(kind string) string {
	return fmt.Sprintf("%s.%s-%d-%d", w.r.dbDir, kind, w.id, scratchNames.Add(1))
}

// ingestOp ingests one external table over a random range of keys.
func (w *worker) ingestOp(db store) *Divergence {
	r := w.r
	a, b := w.rangeOf()
	keys := make([]int, 0, b-a)
	for k := a; k < b; k++ {
		keys = append(keys, k)
	}
	excise := w.rng.IntN(2) == 0
	// Each key: set (2 in 3), or deleted by a point delete or by the range
	// deletion (or the excise).
	sets := make([]bool, len(keys))
	pointDel := make([]bool, len(keys))
	for i := range keys {
		sets[i] = w.rng.IntN(3) != 0
		pointDel[i] = !sets[i] && w.rng.IntN(2) == 0
	}
	unlock := r.or.lock(keys)
	defer unlock()
	// The writer lock holds the keys' versions still: build the table with
	// the versions begin will hand out, before anything is pending, so
	// that a table the runner fails to write changes nothing.
	vers := make([]uint32, len(keys))
	for i, k := range keys {
		vers[i] = r.or.nextVersion(k)
	}
	path := w.scratchName("ingest")
	defer func() { _ = r.baseFS.Remove(path) }()
	if err := w.writeExternal(path, keys, vers, sets, pointDel, !excise); err != nil {
		return r.machinery(fmt.Errorf("writing external table %s: %w", path, err))
	}
	rec := &opRec{name: nameIngest, synced: true, writes: make([]keyWrite, len(keys))}
	for i, k := range keys {
		st := r.or.begin(k, !sets[i])
		if st.ver != vers[i] {
			return r.machinery(fmt.Errorf("ingest: key %d took version %d, the table holds %d", k, st.ver, vers[i]))
		}
		rec.writes[i] = keyWrite{key: uint32(k), st: st}
	}
	if r.log != nil {
		if err := r.log.begin(rec, r.tick); err != nil {
			return r.machinery(err)
		}
	}
	var err error
	if excise {
		err = db.IngestAndExcise([]string{path}, r.kc.key(a), r.kc.key(b))
	} else {
		err = db.Ingest([]string{path})
	}
	if r.log != nil {
		if lerr := r.log.end(rec, err == nil, r.tick); lerr != nil {
			return r.machinery(lerr)
		}
	}
	r.stats.writes.Add(1)
	if err != nil {
		if !r.tolerate(err) {
			return &Divergence{Op: fmt.Sprintf("%v (excise %v)", rec, excise), Got: err.Error(), Detail: "the ingestion failed with no fault, crash or corruption to explain it"}
		}
		r.needReopen.Store(true)
		return nil
	}
	r.stats.ingests.Add(1)
	for _, kw := range rec.writes {
		r.or.commit(int(kw.key), kw.st)
		r.noteWritten(int(kw.key))
	}
	return nil
}

// writeExternal writes the external table of an ingestion: keys[i] set to
// version vers[i] where sets[i], deleted by a point delete where
// pointDel[i], and, with rangeDel, a range deletion of the whole range.
func (w *worker) writeExternal(path string, keys []int, vers []uint32, sets, pointDel []bool, rangeDel bool) error {
	r := w.r
	p := &r.plan
	o := &vigil.ExternalWriterOptions{ChecksumType: p.Checksum, Compression: p.Compression, BlockSize: p.BlockSize,
		BlockRestartInterval: p.Restart, BloomBitsPerKey: p.Bloom}
	ew, err := vigil.NewExternalWriter(r.baseFS, path, o)
	if err != nil {
		return err
	}
	if rangeDel {
		// Added first: the writer takes range deletions in any order.
		if err := ew.DeleteRange(r.kc.key(keys[0]), r.kc.key(keys[len(keys)-1]+1)); err != nil {
			ew.Abort()
			return err
		}
	}
	for i, k := range keys {
		w.keyBuf = r.kc.appendKey(w.keyBuf[:0], k)
		switch {
		case sets[i]:
			w.valBuf = r.vc.appendValue(w.valBuf[:0], k, vers[i], false)
			err = ew.Set(w.keyBuf, w.valBuf)
		case pointDel[i]:
			err = ew.Delete(w.keyBuf)
		}
		if err != nil {
			ew.Abort()
			return err
		}
	}
	return ew.Close()
}

// checkpointOp takes a checkpoint with a small range locked, then opens it
// read-only and checks the range against the states it had then.
func (w *worker) checkpointOp(db store) *Divergence {
	r := w.r
	lo, hi := w.rangeOf()
	keys := make([]int, 0, hi-lo)
	for k := lo; k < hi; k++ {
		keys = append(keys, k)
	}
	dir := w.scratchName("checkpoint")
	removeDir := func() {
		_ = r.baseFS.RemoveAll(dir)
		// Checkpoint's own temporary directories (dir.tmp-<16 hex>),
		// which a crash leaves and nothing else removes.
		parent, base := r.baseFS.PathDir(dir), r.baseFS.PathBase(dir)
		names, _ := r.baseFS.List(parent)
		for _, n := range names {
			if rest, ok := strings.CutPrefix(n, base+vfsutil.TempSuffix); ok && len(rest) == 16 {
				_ = r.baseFS.RemoveAll(r.baseFS.PathJoin(parent, n))
			}
		}
	}
	// A killed child (kill mode) may have left one by the same name.
	removeDir()
	defer removeDir()
	unlock := r.or.lock(keys)
	h := heldSnapshot{lo: lo, hi: hi, views: make([]keyView, hi-lo), what: "checkpoint"}
	for k := lo; k < hi; k++ {
		r.or.view(k, &h.views[k-lo])
	}
	err := db.Checkpoint(dir)
	unlock()
	if err != nil {
		if r.tolerate(err) {
			return nil
		}
		return &Divergence{Op: "Checkpoint", Got: err.Error(), Detail: "the checkpoint failed with no fault, crash or corruption to explain it"}
	}
	o := r.plan.options(r.baseFS)
	o.ReadOnly = true
	// Small memtables and cache: the replayed WAL tail may take several,
	// and opening many checkpoints should not cost a full-size arena each.
	o.WriteBufferSize = min(o.WriteBufferSize, 1<<20)
	o.BlockCacheSize = min(o.BlockCacheSize, 1<<20)
	cp, err := vigil.Open(dir, o)
	if err != nil {
		if r.tolerate(err) {
			return nil
		}
		return &Divergence{Op: "opening a checkpoint read-only", Got: err.Error()}
	}
	h.s = checkpointDB{cp}
	div := w.checkSnapshot(h)
	if div == nil {
		if err := cp.Verify(); err != nil && !r.tolerate(err) {
			div = &Divergence{Op: "checkpoint Verify", Got: err.Error()}
		}
	}
	if err := cp.Close(); err != nil && div == nil && !r.tolerate(err) {
		div = &Divergence{Op: "checkpoint Close", Got: err.Error()}
	}
	if div == nil {
		r.stats.checkpoints.Add(1)
	}
	return div
}

// checkpointDB is an opened checkpoint read through the snapshot interface
// (what checkSnapshot reads with: Get and bounded iterators).
type checkpointDB struct{ db *vigil.DB }

func (c checkpointDB) Get(key []byte) ([]byte, error) { return c.db.Get(key) }
func (c checkpointDB) Close() error                   { return nil } // checkpointOp closes the DB

func (c checkpointDB) NewIter(o *vigil.IterOptions) (iterator, error) {
	it, err := c.db.NewIter(o)
	if err != nil {
		return nil, err
	}
	return it, nil
}
