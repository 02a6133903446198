package vigil

import (
	"fmt"
	"io"
	"sort"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/memtable"
	"github.com/vigildb/vigil/wal"
)

// WAL recovery at Open.
//
// The WALs numbered at or above the MANIFEST's log number hold the writes
// not yet in tables. Open replays them, oldest first, into memtables,
// flushes those to L0 (unless ReadOnly), starts a new WAL and records both
// in the MANIFEST; the replayed WALs then become obsolete.
//
// What recovery may drop, and what it must report. A write is acknowledged
// once a synced Apply returned, a Flush after it returned, or a clean Close
// followed it; no acknowledged write is dropped without an error, in every
// recovery mode but WALSkipAnyCorrupted (which drops damaged records, counts
// them in Metrics.Recovery and says so in the LOG). A crash can only tear
// what was never synced: the tail of the newest WAL. So:
//
//   - A WAL is rotated only after it is synced and closed, and the new WAL's
//     preamble (walmeta.go) records the old one's size. The old WAL must be
//     intact up to that size; damage before it is corruption, in any mode
//     but skip-any (package wal's modes govern only the bytes past it,
//     which a crash during a recovery at Open may have left torn).
//   - Sequence numbers continue from the tables (the MANIFEST's last seqnum)
//     through every batch of every WAL: a batch that starts past the next
//     expected seqnum means batches are missing, and is corruption.
//   - A preamble naming a predecessor at or above the log number that is not
//     on disk means a WAL is missing; so does a predecessor whose batches
//     end before the seqnum the preamble says was assigned before it.
//   - A clean-close record says how far the batches before it reach.
//
// The recovered state is therefore a prefix of the commit order: writes
// the crash lost come after every write recovered.

// recoveryStats counts what Open's WAL replay read and dropped. Written by
// Open alone, read by Metrics after Open returned.
type recoveryStats struct {
	wals, batches, records int64
	// droppedRecords and droppedBytes are what the WAL readers dropped: torn
	// tails, and in skip-any mode damaged records.
	droppedRecords, droppedBytes int64
	// tornTails counts WALs whose end was torn (a crash mid-append).
	tornTails int64
	// skipped counts the damage that skip-any mode stepped over: damaged
	// records, missing batches, missing WALs.
	skipped int64
}

// walReplay is the state of one Open's WAL replay.
type walReplay struct {
	d    *DB
	mode wal.RecoveryMode
	// last is the highest seqnum known written so far: in a table (the
	// MANIFEST's last seqnum) or in a batch read from a WAL.
	last uint64
	// mt is the memtable being filled; rangeDels counts its range
	// tombstones.
	mt        *memtable.MemTable
	rangeDels int64
	// flushed are the tables written from full replay memtables.
	flushed []*manifest.FileMetadata
	// lastWAL and lastEnd are the newest WAL read and the end of its intact
	// prefix: the predecessor named in the new WAL's preamble.
	lastWAL uint64
	lastEnd int64
	stats   recoveryStats
}

// replayWALs rebuilds the memtables from the WALs at or above the MANIFEST's
// log number, then (unless ReadOnly) flushes what they held to L0, starts a
// new WAL and records both in the MANIFEST.
func (d *DB) replayWALs() (err error) {
	logs, err := d.walsToReplay()
	if err != nil {
		return err
	}
	rp := &walReplay{d: d, mode: d.opts.WALRecoveryMode, last: d.vs.lastSeq}
	first := rp.newMem
	if len(logs) == 0 && !d.opts.ReadOnly {
		first = rp.newMutable // nothing to replay: it takes new writes
	}
	if err := first(0); err != nil {
		return err
	}
	defer func() {
		// A failed recovery frees the memtable it was filling, unless it
		// already became d.mem (abortOpen frees that one).
		if err != nil && (d.mem == nil || d.mem.mt != rp.mt) {
			releaseMemTable(rp.mt, &d.stats.memtableBytes)
		}
	}()
	pres := make([]*walPreamble, len(logs))
	for i, num := range logs {
		pres[i] = d.readPreamble(num)
	}
	for i, num := range logs {
		if err := rp.checkPredecessor(logs, pres, i); err != nil {
			return err
		}
		var succ *walPreamble
		if i+1 < len(logs) && pres[i+1] != nil && pres[i+1].prevLogNum == num {
			succ = pres[i+1]
		}
		if err := rp.replayWAL(num, succ); err != nil {
			return err
		}
	}
	d.stats.recovery = rp.stats
	return rp.finish()
}

// walsToReplay lists the WALs at or above the MANIFEST's log number, oldest
// first, raises the next file number past every numbered file, and checks
// that every table the MANIFEST names is present: a missing one means the
// MANIFEST lost an edit after its inputs were deleted, or the file was lost.
func (d *DB) walsToReplay() ([]uint64, error) {
	names, err := d.fs.List(d.dirname)
	if err != nil {
		return nil, fmt.Errorf("vigil: listing %s: %w", d.dirname, err)
	}
	var logs []uint64
	present := make(map[uint64]bool)
	for _, n := range names {
		ft, num, ok := parseFilename(n)
		if !ok {
			continue
		}
		switch ft {
		case fileTypeLog:
			if num >= d.vs.logNumber {
				logs = append(logs, num)
			}
		case fileTypeTable:
			present[num] = true
		}
		if num >= d.vs.nextFileNum {
			d.vs.nextFileNum = num + 1
		}
	}
	var missing []uint64
	for _, files := range d.vs.current.Levels {
		for _, f := range files {
			if !present[f.FileNum] {
				missing = append(missing, f.FileNum)
			}
		}
	}
	if len(missing) > 0 {
		sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
		return nil, base.CorruptionErrorf("vigil: MANIFEST-%06d names %d table(s) missing from %s: %06d (a lost MANIFEST edit or a lost file)",
			d.vs.manifestNum, len(missing), d.dirname, missing)
	}
	sort.Slice(logs, func(i, j int) bool { return logs[i] < logs[j] })
	d.wal.all = append(d.wal.all, logs...)
	return logs, nil
}

// readPreamble returns the preamble of WAL num, or nil if its first record
// is not one (an empty log, or damage, which the replay reports).
func (d *DB) readPreamble(num uint64) *walPreamble {
	name := makeFilename(d.fs, d.dirname, fileTypeLog, num)
	f, err := d.fs.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	r, err := wal.NewReader(f, name, wal.AbsoluteConsistency)
	if err != nil || r.CheckLogNumber(num) != nil {
		return nil
	}
	rec, err := r.Next()
	if err != nil || !isWALMeta(rec) {
		return nil
	}
	m, err := decodeWALMeta(rec, name)
	if err != nil || m.kind != walMetaPreamble {
		return nil
	}
	return &m.preamble
}

// corrupt handles damage found by a recovery check: in skip-any mode it is
// logged and counted and replay goes on; otherwise it fails Open.
func (rp *walReplay) corrupt(err error) error {
	if rp.mode == wal.SkipAnyCorruptedRecords {
		rp.stats.skipped++
		rp.d.log.Errorf("WAL recovery (skip-any-corrupted) goes on past: %v", err)
		return nil
	}
	return err
}

// checkPredecessor checks that the WAL named by logs[i]'s preamble as its
// predecessor is either obsolete (below the log number), or the WAL just
// replayed, or had nothing that is not already recovered.
func (rp *walReplay) checkPredecessor(logs []uint64, pres []*walPreamble, i int) error {
	pre := pres[i]
	if pre == nil || pre.prevLogNum == 0 || pre.prevLogNum < rp.d.vs.logNumber {
		return nil
	}
	if i > 0 && logs[i-1] == pre.prevLogNum {
		return nil // present; replayWAL checks it against this preamble
	}
	if pre.lastSeq <= rp.last {
		rp.d.log.Infof("WAL %06d names %06d as its predecessor, which is missing, but every write before it (up to seq %d) is recovered",
			logs[i], pre.prevLogNum, pre.lastSeq)
		return nil
	}
	return rp.corrupt(base.CorruptionErrorf("vigil: WAL %06d names WAL %06d as its predecessor, which is missing: writes up to seq %d were made before it, recovery has only up to %d",
		logs[i], pre.prevLogNum, pre.lastSeq, rp.last))
}

// replayWAL replays WAL num into the memtables. succ is the preamble of the
// next WAL if it names num as its predecessor.
func (rp *walReplay) replayWAL(num uint64, succ *walPreamble) error {
	d := rp.d
	name := makeFilename(d.fs, d.dirname, fileTypeLog, num)
	f, err := d.fs.Open(name)
	if err != nil {
		return fmt.Errorf("vigil: opening WAL %s: %w", name, err)
	}
	defer f.Close()
	r, err := wal.NewReader(f, name, rp.mode)
	if err != nil {
		return fmt.Errorf("vigil: replaying WAL %s: %w", name, err)
	}
	if err := r.CheckLogNumber(num); err != nil {
		return fmt.Errorf("vigil: replaying WAL %s: %w", name, err)
	}
	var batches int64
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("vigil: replaying WAL %s: %w", name, err)
		}
		where := fmt.Sprintf("WAL %s, record ending at offset %d", name, r.Offset())
		if isWALMeta(rec) {
			if err := rp.meta(rec, where); err != nil {
				return err
			}
			continue
		}
		applied, err := rp.applyBatch(rec, where)
		if err != nil {
			return err
		}
		if applied {
			batches++
		}
	}
	st := r.Stats()
	end := r.Offset()
	rp.stats.wals++
	rp.stats.batches += batches
	rp.stats.records += st.Records
	rp.stats.droppedRecords += st.DroppedRecords
	rp.stats.droppedBytes += st.DroppedBytes
	if st.TailDroppedBytes > 0 {
		rp.stats.tornTails++
	}
	d.log.Infof("replayed WAL %s: %d batches applied, %d records, intact up to offset %d, dropped %d records / %d bytes (torn tail: %d bytes)",
		name, batches, st.Records, end, st.DroppedRecords, st.DroppedBytes, st.TailDroppedBytes)
	if stopped := r.Stopped(); stopped != nil {
		d.log.Errorf("WAL %s: reading stopped at: %v", name, stopped)
	}
	if succ != nil {
		if end < succ.prevSize {
			why := "its end"
			if c := r.LastCorruption(); c != nil {
				why = c.Error()
			}
			if err := rp.corrupt(base.CorruptionErrorf("vigil: WAL %s is intact only up to offset %d, but it was synced up to %d before the next WAL was created: %s",
				name, end, succ.prevSize, why)); err != nil {
				return err
			}
		}
		if succ.lastSeq > rp.last {
			if err := rp.corrupt(base.CorruptionErrorf("vigil: WAL %s: its batches end at seq %d, but writes up to seq %d were made before the next WAL was created",
				name, rp.last, succ.lastSeq)); err != nil {
				return err
			}
		}
	}
	rp.lastWAL, rp.lastEnd = num, end
	return nil
}

// meta handles a WAL meta record found during replay.
func (rp *walReplay) meta(rec []byte, where string) error {
	m, err := decodeWALMeta(rec, where)
	if err != nil {
		return rp.corrupt(err)
	}
	if m.kind == walMetaClose && m.lastSeq > rp.last {
		return rp.corrupt(base.CorruptionErrorf("vigil: %s: the DB was closed cleanly after seq %d, but the batches before it end at seq %d",
			where, m.lastSeq, rp.last))
	}
	if m.kind == walMetaIngest && m.lastSeq > rp.last {
		// The seqnums of an ingestion: a batch without entries (its
		// tables, if its MANIFEST edit was made, are in the version).
		if m.firstSeq > rp.last+1 {
			if err := rp.corrupt(base.CorruptionErrorf("vigil: %s: ingestion takes seq %d, but the writes before it end at seq %d: seqs %d..%d are missing",
				where, m.firstSeq, rp.last, rp.last+1, m.firstSeq-1)); err != nil {
				return err
			}
		}
		rp.last = m.lastSeq
	}
	return nil
}

// applyBatch decodes one batch record and applies it to the replay
// memtable, unless a table already holds it. It reports whether it applied
// anything.
func (rp *walReplay) applyBatch(rec []byte, where string) (bool, error) {
	br, err := newBatchReader(rec, where)
	if err != nil {
		return false, rp.undecodable(where, err)
	}
	if br.count == 0 {
		return false, nil
	}
	first, last := br.seq, br.seq+uint64(br.count)-1
	if last <= rp.last {
		return false, nil // already in a table
	}
	if first > rp.last+1 {
		if err := rp.corrupt(base.CorruptionErrorf("vigil: %s: batch starts at seq %d, but the writes before it end at seq %d: seqs %d..%d are missing",
			where, first, rp.last, rp.last+1, first-1)); err != nil {
			return false, err
		}
	}
	// Entries at or below rp.last are in a table already; a batch can
	// straddle that point only if its last entries were dropped at flush
	// (empty range tombstones).
	skipTo := rp.last
	// Decode fully first: a batch is applied whole or not at all.
	type entry struct {
		kind       base.Kind
		key, value []byte
	}
	var entries []entry
	size := 0
	for {
		kind, key, value, ok, err := br.next(where)
		if err != nil {
			return false, rp.undecodable(where, err)
		}
		if !ok {
			break
		}
		entries = append(entries, entry{kind, key, value})
		size += memtable.EntrySize(len(key)+base.TrailerLen, len(value))
	}
	if err := rp.makeRoom(size, where); err != nil {
		return false, err
	}
	for i, e := range entries {
		seq := first + uint64(i)
		if seq <= skipTo {
			continue
		}
		if err := rp.mt.Add(seq, e.kind, e.key, e.value); err != nil {
			return false, fmt.Errorf("vigil: replaying %s: %w", where, err)
		}
		if e.kind == base.KindRangeDelete {
			rp.rangeDels++
		}
	}
	rp.last = last
	return true, nil
}

// undecodable handles a batch record that verified but does not decode: in
// skip-any mode it is counted, logged and skipped; otherwise it fails Open.
func (rp *walReplay) undecodable(where string, err error) error {
	if rp.mode == wal.SkipAnyCorruptedRecords {
		rp.stats.skipped++
		rp.d.log.Errorf("%s: skipping undecodable batch: %v", where, err)
		return nil
	}
	return fmt.Errorf("vigil: replaying %s: %w", where, err)
}

// makeRoom makes the replay memtable able to take size more bytes: a full
// one is flushed to L0 (or, ReadOnly, kept as an immutable memtable).
func (rp *walReplay) makeRoom(size int, where string) error {
	if rp.mt.Reserve(size) {
		return nil
	}
	d := rp.d
	if !rp.mt.Empty() {
		if d.opts.ReadOnly {
			e := newMemTableEntry(d.cmp, rp.mt, 0, &d.stats.memtableBytes)
			e.rangeDels.Store(rp.rangeDels)
			d.imm = append(d.imm, e)
		} else {
			m, err := d.flushRecovered(rp.mt)
			if err != nil {
				return err
			}
			if m != nil {
				rp.flushed = append(rp.flushed, m)
			}
			releaseMemTable(rp.mt, &d.stats.memtableBytes) // in a table now, and nobody else has seen it
		}
	}
	if err := rp.newMem(size); err != nil {
		return err
	}
	if !rp.mt.Reserve(size) {
		return fmt.Errorf("vigil: replaying %s: batch of %d bytes does not fit a new memtable", where, size)
	}
	return nil
}

// newMem starts a memtable of WriteBufferSize to replay into, holding at
// least a batch of size bytes.
func (rp *walReplay) newMem(size int) error {
	return rp.use(rp.d.newMemTable(rp.d.memtableSizeFor(size)))
}

// newMutable starts the memtable new writes go to once Open returns: the
// first of the growth schedule (nextMemtableSize).
func (rp *walReplay) newMutable(size int) error {
	return rp.use(rp.d.newMemTable(rp.d.nextMemtableSize(size)))
}

func (rp *walReplay) use(m *memtable.MemTable, err error) error {
	if err != nil {
		return err
	}
	rp.mt, rp.rangeDels = m, 0
	return nil
}

// finish installs the replayed state: ReadOnly keeps the memtables;
// otherwise they are flushed, a new WAL starts (its preamble naming the
// last WAL replayed), and one MANIFEST edit records the tables, the new log
// number and the last seqnum.
func (rp *walReplay) finish() error {
	d := rp.d
	// Ingested tables carry seqnums of their own, which the WALs hold only
	// as an ingestion record (and only while it is not flushed; without a
	// WAL, not at all): new writes go above them.
	rp.last = max(rp.last, maxTableSeq(d.vs.current))
	d.nextSeq = rp.last + 1
	d.visibleSeq.Store(rp.last)
	if d.opts.ReadOnly {
		d.mem = newMemTableEntry(d.cmp, rp.mt, 0, &d.stats.memtableBytes)
		d.mem.rangeDels.Store(rp.rangeDels)
		d.mem.lastSeq.Store(rp.last)
		return nil
	}
	if !rp.mt.Empty() {
		m, err := d.flushRecovered(rp.mt)
		if err != nil {
			return err
		}
		if m != nil {
			rp.flushed = append(rp.flushed, m)
		}
	}
	if d.memCount == 0 {
		// rp.mt is a replay memtable of WriteBufferSize (flushed above, or
		// left empty by WALs that held nothing; an unused arena cost one
		// mapping, not its pages): new writes take the schedule's first.
		// (Without WALs to replay, Open began with that one.)
		releaseMemTable(rp.mt, &d.stats.memtableBytes)
		if err := rp.newMutable(0); err != nil {
			return err
		}
	}
	var logNum uint64
	if !d.opts.DisableWAL {
		logNum = d.vs.allocFileNum()
		w, err := d.createWAL(logNum, walPreamble{prevLogNum: rp.lastWAL, prevSize: rp.lastEnd, lastSeq: rp.last})
		if err != nil {
			return err
		}
		d.wal.all = append(d.wal.all, logNum)
		d.wal.live, d.wal.liveNum = w, logNum
		d.emitWAL(WALInfo{LogNum: logNum, PrevLogNum: rp.lastWAL})
	} else {
		// Every replayed WAL is in an SST now.
		logNum = d.vs.nextFileNum
	}
	d.mem = newMemTableEntry(d.cmp, rp.mt, logNum, &d.stats.memtableBytes)
	e := &manifest.VersionEdit{}
	e.SetLogNumber(logNum)
	e.SetLastSeq(rp.last)
	for _, m := range rp.flushed {
		e.Added = append(e.Added, manifest.NewFile{Level: 0, Meta: m})
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.vs.logAndApply(e); err != nil {
		return fmt.Errorf("vigil: recording recovery in the MANIFEST: %w", err)
	}
	return nil
}

// flushRecovered writes a memtable rebuilt from WALs to an L0 table during
// Open, with the same validation as a normal flush.
func (d *DB) flushRecovered(mt *memtable.MemTable) (*manifest.FileMetadata, error) {
	fileNum := d.vs.allocFileNum()
	// No reader and no snapshot exists yet: everything is visible.
	m, err := d.writeMemtableTable(mt, fileNum, flushKeep{elide: true}, "recovery flush")
	if err != nil {
		return nil, fmt.Errorf("vigil: flushing recovered WAL data: %w", err)
	}
	return m, nil
}
