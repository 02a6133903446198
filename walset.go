package vigil

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/vigildb/vigil/wal"
)

// walSet is the DB's write-ahead logs: the live one that commits append to,
// the spare created ahead of the next rotation, the numbers of every WAL the
// DB has (so that obsolete ones can be deleted), and the counts Metrics.WAL
// reports.
//
// Concurrency: live and liveNum change only with commitMu and DB.mu both
// held (at a rotation), so either lock is enough to read them; commits read
// them under commitMu. spare, spareNum, preparing, unused, all and keep are
// guarded by DB.mu. The counters are atomic.
//
// Invariants: all holds liveNum and every older WAL not yet deleted, oldest
// first; a number is in unused only once its WAL is known to hold no batch
// (a spare discarded at Close); no WAL is deleted while keep > 0.
type walSet struct {
	live    *wal.Writer
	liveNum uint64
	// spare is the next WAL, created ahead of its rotation by prepareWAL
	// (nil while none is ready; preparing while one is being created);
	// unused are spares discarded at Close, to delete.
	spare     *wal.Writer
	spareNum  uint64
	preparing bool
	unused    []uint64
	// ahead is the zero reserve the next prepared WAL writes before its
	// use (wal.Writer.ReserveAhead): the size of the last WAL rotated
	// away from, if synced writes filled it (see aheadReserve).
	ahead int64
	// all are the numbers of the WALs this DB has, oldest first: those
	// replayed at Open and those created since.
	all []uint64
	// keep counts Checkpoints copying WALs: none is deleted meanwhile.
	keep int
	// recycle are obsolete WALs kept to be written over by the next ones
	// (Options.WALRecycleFiles), oldest first; closing are the WALs being
	// closed (closeWAL), which must not be recycled before they are.
	recycle []uint64
	closing map[uint64]bool

	bytes, records atomic.Int64
	// closedSyncs counts the fsyncs of the WALs closed since Open (the
	// live one's are in its own stats).
	closedSyncs atomic.Int64
}

// takeObsoleteLocked removes from the set, and returns, the WALs below
// logNumber (every batch in them is in a table) other than the live one,
// and the unused spares; none while a Checkpoint keeps them. DB.mu is held.
//
// Up to recycle of them (Options.WALRecycleFiles), those closed already, are
// kept for prepareWAL to write the next WALs over instead.
func (s *walSet) takeObsoleteLocked(logNumber uint64, recycle int) []uint64 {
	var out []uint64
	keep := s.all[:0]
	for _, n := range s.all {
		switch {
		case n >= logNumber || n == s.liveNum || s.keep > 0:
			keep = append(keep, n)
		case len(s.recycle) < recycle && !s.closing[n]:
			s.recycle = append(s.recycle, n)
		default:
			out = append(out, n)
		}
	}
	s.all = keep
	out = append(out, s.unused...)
	s.unused = nil
	return out
}

// walReadyLocked reports whether a write may switch to the next WAL now:
// it is created (prepareWAL), or there is no WAL. d.mu is held.
func (d *DB) walReadyLocked() bool { return d.opts.DisableWAL || d.wal.spare != nil }

// switchWALLocked makes the spare WAL (which must be ready) the DB's WAL
// and returns its number: it writes the new WAL's preamble, which chains it
// to the end of the old one, and syncs and closes the old one in the
// background (closeWAL). No file I/O. The caller moves the old memtable to
// the immutable list, then starts the next WAL (maybePrepareWALLocked),
// whose wait for a recyclable one asks about that list. d.mu and commitMu
// are held.
func (d *DB) switchWALLocked() (uint64, error) {
	oldW, oldNum := d.wal.live, d.wal.liveNum
	newW, logNum := d.wal.spare, d.wal.spareNum
	pre := walPreamble{prevLogNum: oldNum, prevSize: oldW.Size(), lastSeq: d.nextSeq - 1}
	if _, err := newW.WriteRecord(pre.encode()); err != nil {
		return 0, fmt.Errorf("writing the preamble of WAL %06d: %w", logNum, err)
	}
	d.wal.spare, d.wal.spareNum = nil, 0
	d.wal.live, d.wal.liveNum = newW, logNum
	d.wal.ahead = aheadReserve(oldW.Size(), oldW.Stats())
	if d.wal.closing == nil {
		d.wal.closing = map[uint64]bool{}
	}
	d.wal.closing[oldNum] = true
	d.bgWG.Add(1)
	go d.closeWAL(oldW, oldNum, newW)
	d.emitWAL(WALInfo{LogNum: logNum, PrevLogNum: oldNum})
	return logNum, nil
}

// closeWAL syncs and closes a WAL the DB rotated away from, then lets the
// WAL after it (next, held until now) reach the disk, or fails it if the old
// one could not be made durable: its writes then stop the DB, as any WAL
// failure does. Runs on its own goroutine (counted in bgWG).
func (d *DB) closeWAL(w *wal.Writer, num uint64, next *wal.Writer) {
	defer d.bgWG.Done()
	err := w.Close()
	d.mu.Lock()
	delete(d.wal.closing, num)
	d.mu.Unlock()
	d.wal.closedSyncs.Add(w.Stats().Syncs)
	next.Release(err)
	if err != nil {
		d.mu.Lock()
		d.setBackgroundErrorLocked(fmt.Errorf("closing WAL %06d: %w", num, err), "WAL rotation")
		d.mu.Unlock()
	}
}

// maybePrepareWALLocked starts creating the next WAL unless one is ready or
// being created. d.mu is held.
//
// With WAL recycling on (Options.WALRecycleFiles), it may wait for an
// obsolete WAL to write over (waitForRecyclableLocked): the flush that
// frees one calls here again from deleteObsoleteFiles. A rotation that
// needs the next WAL now (urgent) does not wait, and reserves no zeros
// ahead in a new one, which it would wait for.
func (d *DB) maybePrepareWALLocked(urgent bool) {
	if d.opts.DisableWAL || d.opts.ReadOnly || d.wal.spare != nil || d.wal.preparing || d.bgErr != nil || d.closed.Load() {
		return
	}
	if !urgent && d.waitForRecyclableLocked() {
		return
	}
	ahead := d.wal.ahead
	if urgent {
		ahead = 0 // a writer waits for this WAL: its reserve grows as it fills
	}
	d.wal.preparing = true
	num := d.vs.allocFileNum()
	d.wal.all = append(d.wal.all, num)
	var reuse uint64 // 0: none (file number 0 is never a WAL's)
	if len(d.wal.recycle) > 0 {
		reuse, d.wal.recycle = d.wal.recycle[0], d.wal.recycle[1:]
	}
	d.bgWG.Add(1)
	go d.prepareWAL(num, ahead, reuse)
}

// waitForRecyclableLocked reports whether the next WAL should wait for an
// obsolete one to write over rather than be created now: recycling is on,
// none is free, a new WAL would write zeros ahead (synced writes filled
// the last one: see aheadReserve), and a WAL older than the live one
// awaits its memtable's flush, after which it is free. Why: such a WAL
// writes its whole reserve ahead of use (ReserveAhead: tens of MiB of
// zeros competing with the live WAL's syncs; a 67 ms append was traced at
// a new store's first rotation), where a recycled WAL's blocks are there
// already. The flush of the memtable just rotated away from usually ends
// long before the live WAL fills; a rotation that finds no spare makes
// one at once, with no zeros ahead. Not while the immutable memtables wait
// below the flush threshold (the first ones after Open: flushDueLocked):
// then no flush is coming. d.mu is held.
func (d *DB) waitForRecyclableLocked() bool {
	if d.opts.WALRecycleFiles == 0 || len(d.wal.recycle) > 0 || d.wal.ahead == 0 {
		return false
	}
	if due, _ := d.immDueLocked(); !due {
		return false
	}
	return d.wal.all[0] < d.wal.liveNum // oldest first, liveNum among them
}

// aheadReserve is the zero reserve to write ahead into the next WAL, given
// the size and stats of the WAL before: its size, up to maxAheadReserve,
// if a caller waited for a sync at least once per aheadSyncEvery bytes of
// it (it took synced writes throughout, and grew its reserve to about its
// size), else none: writers that do not sync never pay for zeros, and the
// odd sync (a Flush, a SyncWAL) does not make them.
func aheadReserve(size int64, st wal.WriterStats) int64 {
	if st.WaitedSyncs*aheadSyncEvery < size {
		return 0
	}
	return min(size, maxAheadReserve)
}

// aheadSyncEvery: see aheadReserve.
const aheadSyncEvery = 64 << 10

// maxAheadReserve bounds the zeros a prepared WAL writes ahead: the
// appends past it grow the reserve as usual (walReserve at a time).
const maxAheadReserve = 256 << 20

// prepareWAL creates WAL num ahead of its use, its header and directory
// entry durable, held (see rotateMemtableLocked), and hands it to the next
// rotation, with ahead bytes of zero reserve written and synced first.
// Runs on its own goroutine, without locks during the I/O.
func (d *DB) prepareWAL(num uint64, ahead int64, reuse uint64) {
	defer d.bgWG.Done()
	var w *wal.Writer
	var err error
	if reuse != 0 {
		w, err = d.recycleWALFile(reuse, num)
	} else {
		w, err = d.createWALFile(num)
	}
	if err == nil {
		if err = w.ReserveAhead(ahead); err != nil {
			_ = w.Close()
			err = fmt.Errorf("reserving %d bytes in WAL %06d: %w", ahead, num, err)
		}
	}
	if err == nil {
		w.Hold()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.wal.preparing = false
	switch {
	case err != nil:
		d.setBackgroundErrorLocked(err, "creating the next WAL")
	case d.closed.Load():
		// Close is under way and will not use it.
		d.discardWALLocked(w, num)
	default:
		d.wal.spare, d.wal.spareNum = w, num
	}
	d.stallCond.Broadcast()
}

// discardWALLocked closes an unused spare WAL; its file, which holds no
// record, is removed with the obsolete files. d.mu is held.
func (d *DB) discardWALLocked(w *wal.Writer, num uint64) {
	w.Release(errors.New("unused"))
	_ = w.Close()
	d.wal.unused = append(d.wal.unused, num)
}

// createWAL creates WAL logNum with its preamble (see walmeta.go) and makes
// both, and the directory entry, durable before any batch goes into it:
// Open's first WAL. Later WALs come from prepareWAL.
func (d *DB) createWAL(logNum uint64, pre walPreamble) (*wal.Writer, error) {
	w, err := d.createWALFile(logNum)
	if err != nil {
		return nil, err
	}
	if _, err := w.WriteRecord(pre.encode()); err != nil {
		w.Close()
		return nil, fmt.Errorf("writing the preamble of WAL %06d: %w", logNum, err)
	}
	if err := w.Sync(); err != nil {
		w.Close()
		return nil, fmt.Errorf("syncing new WAL %06d: %w", logNum, err)
	}
	return w, nil
}

// createWALFile creates WAL logNum and makes its header and directory entry
// durable, so that a crash leaves a valid (empty) log, not an empty file
// (which AbsoluteConsistency recovery would reject).
func (d *DB) createWALFile(logNum uint64) (*wal.Writer, error) {
	name := makeFilename(d.fs, d.dirname, fileTypeLog, logNum)
	f, err := d.fs.Create(name)
	if err != nil {
		return nil, fmt.Errorf("creating WAL %s: %w", name, err)
	}
	w, err := wal.NewWriter(f, name, logNum, d.cksum)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("creating WAL %s: %w", name, err)
	}
	return d.startWALFile(w, name)
}

// startWALFile makes a new WAL's header and directory entry durable and
// sets its syncing policy.
func (d *DB) startWALFile(w *wal.Writer, name string) (*wal.Writer, error) {
	w.SetBytesPerSync(d.opts.WALBytesPerSync)
	if err := w.Sync(); err != nil {
		w.Close()
		return nil, fmt.Errorf("syncing new WAL %s: %w", name, err)
	}
	if err := d.dataDir.Sync(); err != nil {
		w.Close()
		return nil, fmt.Errorf("syncing directory after creating %s: %w", name, err)
	}
	// From the first synced write on, synced appends land in durable zeros
	// and cost a SyncData rather than a Sync (see wal.Writer.SetReserve,
	// which keeps none for a log without checksums).
	w.SetReserve(walReserve)
	return w, nil
}

// recycleWALFile makes the obsolete WAL old into WAL logNum, written over
// its blocks (wal.NewRecycledWriter): the new header first, synced, under
// the old name (a crash then leaves an obsolete WAL, deleted at Open), then
// the rename, made durable, so that no file ever bears the new name with
// the old header. Like createWALFile, the header and the directory entry
// are durable when it returns.
func (d *DB) recycleWALFile(old, logNum uint64) (*wal.Writer, error) {
	oldName := makeFilename(d.fs, d.dirname, fileTypeLog, old)
	name := makeFilename(d.fs, d.dirname, fileTypeLog, logNum)
	f, err := d.fs.OpenReadWrite(oldName)
	if err != nil {
		return nil, fmt.Errorf("recycling WAL %s: %w", oldName, err)
	}
	err = wal.WriteRecycledHeader(f, logNum, d.cksum)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.fs.Rename(oldName, name)
	}
	if err == nil {
		err = d.dataDir.Sync()
	}
	if err != nil {
		return nil, fmt.Errorf("recycling WAL %s as %s: %w", oldName, name, err)
	}
	st, err := d.fs.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("recycling WAL %s: %w", name, err)
	}
	if f, err = d.fs.OpenReadWrite(name); err != nil {
		return nil, fmt.Errorf("recycling WAL %s: %w", name, err)
	}
	w, err := wal.NewRecycledWriter(f, name, logNum, d.cksum, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("recycling WAL %s: %w", name, err)
	}
	d.stats.walRecycled.Add(1)
	return d.startWALFile(w, name)
}

// walReserve bounds the zeros a WAL keeps written and synced past its end.
// Its doubling steps (64 KiB, 128 KiB, ... 1 MiB) are each paid by one
// synced write that had to make a new file size durable anyway; past the
// first MiB a WAL takes a full fsync once per MiB of synced writes.
const walReserve = 1 << 20
