package vigil

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/internal/vfsutil"
	"github.com/vigildb/vigil/memtable"
	"github.com/vigildb/vigil/sst"
)

// Ingestion: external tables (written by ExternalWriter) join the LSM
// without passing through the memtable and the WAL.
//
// The steps, and what each keeps true:
//
//  1. Every file is opened and verified in full (every block checksum,
//     the order of every key and tombstone, the external properties) and
//     the files must not overlap one another. Nothing in the DB has
//     changed yet; a bad file is refused with an error naming it.
//  2. The files are hard-linked (copied where linking fails, and then
//     verified again) into the DB directory under new file numbers, and
//     synced with the directory. Until step 6 they are orphans: a crash
//     leaves them to Open, which deletes every table the MANIFEST does not
//     name (removeLeftovers), as it does for a crashed flush's output.
//  3. A memtable holding keys in the ingested ranges is flushed first: the
//     read path looks in the memtables before the tables, so a memtable
//     must never hold data older than a table below it.
//  4. Under commitMu, like a batch, the ingestion takes its sequence
//     number (two for IngestAndExcise), after waiting for the writers
//     still applying earlier batches and checking the memtables again (a
//     write may have come in since step 3; then the memtable is rotated and
//     flushed while the seqnum is held, which delays the visibility of
//     later writes for that flush). An ingestion record in the WAL takes the
//     seqnums' place in the WAL's sequence (walmeta.go). Then commitMu is
//     released: later writes go on, and become visible after the ingestion.
//  5. The WAL is synced up to that record, so that the recovered state
//     stays a prefix of the commit order: the ingestion is never recovered
//     without the writes before it. (With DisableWAL there is no WAL to
//     sync: step 3 flushes the memtables whether they overlap or not, as
//     Checkpoint does, so every write acknowledged before the ingestion
//     began is in a table first.)
//  6. One MANIFEST edit adds every file at its level, each with the
//     ingestion's seqnum as its global seqnum (FileMetadata.GlobalSeqNum:
//     the file, whose entries are stored at seqnum 0, is never rewritten;
//     readers substitute the seqnum where they decode trailers). The edit
//     is built once no other edit is in flight, on the exact version it
//     applies to, and no compaction runs from step 4 to the end
//     (compactionMu), so its placement cannot conflict with one; flushes of
//     memtables holding later seqnums wait for the edit (flushOne), so
//     nothing newer can reach the levels first.
//  7. Only after the edit is durable is the seqnum published (visibleSeq):
//     a reader either sees every file or none, and a snapshot taken before
//     never sees them (every entry is above its seqnum).
//
// Level placement is RocksDB's: the deepest level such that neither it nor
// any level above it has a file overlapping the ingested file's key range;
// L0 if an L0 file overlaps. So the new data sits above everything older it
// overlaps, and below nothing.
//
// Crash safety: before the edit is durable nothing but orphan files and
// the WAL record exist, and both are harmless (the record is a batch with
// no entries); after it, the files are live. Either all files are in or
// none. The MANIFEST's last seqnum is not raised by the edit: WAL replay
// skips the batches at or below it, and the ones just below the ingestion
// may still be only in the WAL; recovery puts new seqnums above every
// table instead (walReplay.finish).

// Ingest adds the external tables at paths (written by ExternalWriter) to
// the DB atomically: after Ingest returns every key of every file is
// visible, at one new sequence number above every write made before; a
// reader, an iterator or a snapshot sees all of the files or none; a crash
// at any point leaves all of them or none. Each file's range deletions
// delete what the DB held in their ranges. The files must not overlap one
// another. Empty files are skipped.
//
// Every file is verified first (every block checksum, the key order, that
// it is an external table); a damaged or unsorted file is refused with an
// error wrapping ErrCorruption (or ErrInvalidArgument for a file that is
// not external, or files that overlap) naming the file, and the DB is left
// unchanged. The files are hard-linked into the DB directory (copied if
// that fails), never moved or modified: the caller may delete them after.
//
// Concurrency: safe to call concurrently with every other method; writes
// wait only while the sequence number is taken (and, if a write into the
// ingested ranges raced the memtable flush, for one more flush), and
// become visible after the ingestion's MANIFEST edit is durable.
// Ingestions and compactions run one at a time.
func (d *DB) Ingest(paths []string) error {
	return d.ingest("Ingest", paths, false, nil, nil)
}

// IngestAndExcise replaces the key range [start, end) with the contents of
// the external tables at paths, atomically: afterwards nothing the DB held
// in the range is visible and the files' keys are; no reader, iterator or
// snapshot sees a state in between, and a crash leaves the old contents or
// the new. The files must lie within [start, end); with no files the range
// is just emptied. Replica snapshots (a raft snapshot applied to a range
// of a store) use this. Verification, errors and concurrency are Ingest's.
//
// How: the ingestion takes two sequence numbers. At the lower one a range
// tombstone [start, end) goes into a table of its own, written into the
// DB directory with the files; the files get the higher one. One MANIFEST
// edit adds the tombstone table and the files, placed as Ingest places
// them (the tombstone table first, the files above it), so the deletion
// and the new contents become durable and visible in the same step.
// This is a logical excise, not a physical one: the old data stays on disk,
// hidden by the tombstone, until compactions drop it, and a snapshot taken
// before still reads it, as with DeleteRange; cutting the overlapping
// tables instead (Pebble's excise) would reclaim the space at once, but
// it breaks older snapshots and needs virtual tables.
func (d *DB) IngestAndExcise(paths []string, start, end []byte) error {
	if d.cmp.Cmp(start, end) >= 0 {
		return base.InvalidArgumentErrorf("IngestAndExcise: range [%s, %s) is empty or inverted", base.HexKey(start), base.HexKey(end))
	}
	return d.ingest("IngestAndExcise", paths, true, start, end)
}

// ingestFile is one table being ingested.
type ingestFile struct {
	path string
	// The table's bounds (at seqnum 0, as stored), size and counts.
	smallest, largest base.InternalKey
	size              uint64
	numEntries        uint64
	numDeletions      uint64
	numRangeDels      uint64
	fileChecksum      uint64
	checksumType      checksum.Type
	// identity is the one its properties hold (its writer's), which the
	// MANIFEST records for it under its new number.
	identity base.TableIdentity
	// fileNum is its number in the DB directory once linked (or written).
	fileNum uint64
}

// keySpan is a user-key range [start, end], end exclusive if endExcl, in
// cmp's order.
type keySpan struct {
	cmp        *base.Comparer
	start, end []byte
	endExcl    bool
}

// spanOf returns the key range of a file's bounds.
func spanOf(cmp *base.Comparer, smallest, largest base.InternalKey) keySpan {
	return keySpan{cmp: cmp, start: smallest.UserKey, end: largest.UserKey, endExcl: largest.IsExclusiveSentinel()}
}

// before reports whether every key of a precedes every key of b.
func (a keySpan) before(b keySpan) bool {
	c := a.cmp.Cmp(a.end, b.start)
	return c < 0 || (c == 0 && a.endExcl)
}

func (a keySpan) overlaps(b keySpan) bool { return !a.before(b) && !b.before(a) }

// containsKey reports whether k is in the span.
func (a keySpan) containsKey(k []byte) bool {
	if a.cmp.Cmp(k, a.start) < 0 {
		return false
	}
	c := a.cmp.Cmp(k, a.end)
	return c < 0 || (c == 0 && !a.endExcl)
}

func (a keySpan) String() string {
	r := "]"
	if a.endExcl {
		r = ")"
	}
	return fmt.Sprintf("[%s, %s%s", base.HexKey(a.start), base.HexKey(a.end), r)
}

// ingest runs Ingest, or with excise IngestAndExcise of [start, end).
//
// (It is one long function on purpose: its steps — verify, link, flush,
// take the seqnum, sync the WAL, write the edit, publish — must run in
// this order, and each failure must undo exactly the steps before it,
// which the deferred cleanup does from the state the function holds.)
func (d *DB) ingest(op string, paths []string, excise bool, start, end []byte) (err error) {
	if err := d.writable(); err != nil {
		return err
	}
	began := time.Now()
	files, err := d.loadExternalTables(op, paths)
	if err != nil {
		return err
	}
	spans, err := ingestSpans(d.cmp, op, files, excise, start, end)
	if err != nil || len(spans) == 0 {
		return err
	}

	// Step 2: into the DB directory. From here on, a failure removes what
	// was linked (until the MANIFEST edit, which may be durable even when
	// it fails: then the files stay, and Open sorts it out).
	linked, tomb, err := d.ingestLink(op, files, excise, start, end)
	defer func() {
		if err != nil && linked != nil {
			for _, f := range linked {
				_ = d.fs.Remove(makeFilename(d.fs, d.dirname, fileTypeTable, f.fileNum))
			}
		}
	}()
	if err != nil {
		return err
	}

	// Step 3: flush memtables holding keys of the spans (without a WAL,
	// every memtable: see step 5).
	if over, err := d.memtablesOverlap(spans); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	} else if over || d.opts.DisableWAL {
		if err := d.flushAndWait(false); err != nil {
			return fmt.Errorf("%s: flushing the memtable that overlaps the ingested keys: %w", op, err)
		}
	}

	d.compactionMu.Lock()
	defer d.compactionMu.Unlock()
	// Step 4: the seqnums.
	nseq := uint64(1)
	if excise {
		nseq = 2
	}
	slot, wait, err := d.ingestTakeSeqnums(spans, nseq)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	seq, ticket := slot.seq, slot.ticket
	// From here the seqnums are taken: every path ends the gate and
	// publishes or fails the ticket, or writers behind wait forever.
	// failTicket says the ingestion may be (or must be treated as) part of
	// the recovered state while it is not visible: nothing after it may
	// become visible then.
	published, failTicket := false, false
	defer func() {
		if !published {
			d.ingestAbandon(ticket, failTicket || errors.Is(err, errIngestUncertain))
		}
	}()
	if wait != nil {
		if err := d.waitFlushed(wait); err != nil {
			return fmt.Errorf("%s: flushing the memtable that overlaps the ingested keys: %w", op, err)
		}
	}
	// Step 5: the WAL holds everything before the ingestion.
	if slot.walW != nil {
		if err := slot.walW.SyncTo(slot.walEnd); err != nil && !errors.Is(err, base.ErrClosed) {
			failTicket = true // stays invisible with everything after
			return d.walFailed(err)
		}
	}
	// Step 6: one edit for every file.
	fileSeq := seq + nseq - 1
	desc, err := d.ingestEdit(op, files, tomb, seq, fileSeq)
	if err == nil || errors.Is(err, errIngestUncertain) {
		linked = nil // the edit is (or may be) durable: the files stay
	}
	if err != nil {
		return err
	}

	// Step 7: visible.
	published = true
	if err := d.pub.publish(ticket, &d.visibleSeq); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	d.log.Infof("%s of %d file(s) at seq %d in %v: %v", op, len(files), fileSeq, time.Since(began), desc)
	return nil
}

// ingestLink is step 2: the files into the DB directory under new numbers
// (and, excising, the table of the range tombstone), the directory synced.
// It returns what it placed even on error, for the caller to remove.
func (d *DB) ingestLink(op string, files []*ingestFile, excise bool, start, end []byte) (linked []*ingestFile, tomb *ingestFile, err error) {
	if linked, err = d.linkExternalTables(op, files); err != nil {
		return linked, nil, err
	}
	if excise {
		if tomb, err = d.writeExciseTable(start, end); err != nil {
			return linked, nil, fmt.Errorf("%s: %w", op, err)
		}
		linked = append(linked, tomb)
	}
	if err := d.dataDir.Sync(); err != nil {
		return linked, tomb, fmt.Errorf("%s: syncing directory %s: %w", op, d.dirname, err)
	}
	return linked, tomb, nil
}

// ingestAbandon ends an ingestion that took seqnums (ticket) and will not
// publish them: the flush gate opens, and the ticket is published empty,
// or, if the ingestion may be (or must be treated as) part of the recovered
// state while it is not visible (uncertain: the MANIFEST edit may be
// durable, or the WAL failed), failed, so that nothing after it becomes
// visible before a reopen says.
func (d *DB) ingestAbandon(ticket uint64, uncertain bool) {
	d.mu.Lock()
	d.ingestSeq = 0
	d.stallCond.Broadcast()
	d.mu.Unlock()
	if uncertain {
		d.pub.fail(ticket)
		return
	}
	_ = d.pub.publish(ticket, &d.visibleSeq)
}

// ingestSpans checks an excising ingestion's files against the excised
// range and returns the spans the memtables must not hold keys of (none:
// nothing to ingest).
func ingestSpans(cmp *base.Comparer, op string, files []*ingestFile, excise bool, start, end []byte) ([]keySpan, error) {
	if excise {
		exciseSpan := keySpan{cmp: cmp, start: start, end: end, endExcl: true}
		for _, f := range files {
			if s := spanOf(cmp, f.smallest, f.largest); cmp.Cmp(s.start, start) < 0 || !s.before(keySpan{cmp: cmp, start: end, end: end}) {
				return nil, base.InvalidArgumentErrorf("%s: %s holds keys %s outside the excised range %s", op, f.path, s, exciseSpan)
			}
		}
		return []keySpan{exciseSpan}, nil
	}
	var spans []keySpan
	for _, f := range files {
		spans = append(spans, spanOf(cmp, f.smallest, f.largest))
	}
	return spans, nil
}

// ingestEdit is step 6: one MANIFEST edit placing the excise tombstone's
// table (tomb, if any, at seq) and every file (at fileSeq), each at the
// deepest level it fits; then the flush gate opens. It returns the
// placement, for the LOG. An error wrapping errIngestUncertain means the
// edit may be durable: the DB is read-only then.
func (d *DB) ingestEdit(op string, files []*ingestFile, tomb *ingestFile, seq, fileSeq uint64) ([]string, error) {
	var placed []manifest.NewFile
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bgErr != nil {
		return nil, fmt.Errorf("%s: %w: %w", op, ErrReadOnly, d.bgErr)
	}
	err := d.vs.logAndApplyFunc(func(v *manifest.Version) (*manifest.VersionEdit, error) {
		placed = placed[:0]
		if tomb != nil {
			m := tomb.meta(seq)
			placed = append(placed, manifest.NewFile{Level: ingestLevel(v, placed, m), Meta: m})
		}
		for _, f := range files {
			m := f.meta(fileSeq)
			placed = append(placed, manifest.NewFile{Level: ingestLevel(v, placed, m), Meta: m})
		}
		return &manifest.VersionEdit{Added: placed}, nil
	})
	if err != nil {
		d.setBackgroundErrorLocked(err, op+": MANIFEST update")
		return nil, fmt.Errorf("%s: %w: %w", op, errIngestUncertain, err)
	}
	d.ingestSeq = 0
	d.updateReadStateLocked()
	d.stallCond.Broadcast()
	d.maybeScheduleFlushLocked()
	d.maybeScheduleCompactionLocked()
	var desc []string
	for _, p := range placed {
		desc = append(desc, fmt.Sprintf("%06d.sst to L%d", p.Meta.FileNum, p.Level))
	}
	return desc, nil
}

// errIngestUncertain marks an ingestion whose MANIFEST edit failed: it may
// or may not be durable.
var errIngestUncertain = errors.New("the ingestion's MANIFEST edit failed and may or may not be durable")

// meta returns the file's metadata with global seqnum seq.
func (f *ingestFile) meta(seq uint64) *manifest.FileMetadata {
	largest := f.largest
	if !largest.IsExclusiveSentinel() {
		largest = base.MakeInternalKey(largest.UserKey, seq, largest.Kind())
	}
	return &manifest.FileMetadata{
		FileNum:      f.fileNum,
		Size:         f.size,
		Smallest:     base.MakeInternalKey(f.smallest.UserKey, seq, f.smallest.Kind()),
		Largest:      largest,
		SmallestSeq:  seq,
		LargestSeq:   seq,
		NumEntries:   f.numEntries,
		NumDeletions: f.numDeletions,
		NumRangeDels: f.numRangeDels,
		FileChecksum: f.fileChecksum,
		ChecksumType: f.checksumType,
		GlobalSeqNum: seq,
		Identity:     f.identity,
	}
}

// loadExternalTables verifies every file (step 1) and returns the
// non-empty ones sorted by key, or an error naming the first bad file.
func (d *DB) loadExternalTables(op string, paths []string) ([]*ingestFile, error) {
	var files []*ingestFile
	for _, p := range paths {
		f, err := verifyExternalTable(d.fs, p, d.cmp)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		if f.numEntries+f.numRangeDels > 0 {
			files = append(files, f)
		}
	}
	slices.SortFunc(files, func(a, b *ingestFile) int { return d.cmp.CompareInternal(a.smallest, b.smallest) })
	for i := 1; i < len(files); i++ {
		a, b := files[i-1], files[i]
		if sa, sb := spanOf(d.cmp, a.smallest, a.largest), spanOf(d.cmp, b.smallest, b.largest); !sa.before(sb) {
			return nil, base.InvalidArgumentErrorf("%s: %s (keys %s) and %s (keys %s) overlap", op, a.path, sa, b.path, sb)
		}
	}
	return files, nil
}

// verifyExternalTable opens the table at path and checks all of it: every
// block's checksum, the order of every entry and tombstone, the whole-file
// checksum (sst.Reader.Verify), and that it is an external table (entries
// at seqnum 0, one per user key, disjoint tombstones). Errors name the
// file. A table whose keys are ordered by another comparer than cmp, the
// DB's, is refused (ErrInvalidArgument naming both).
func verifyExternalTable(fs vfs.FS, path string, cmp *base.Comparer) (*ingestFile, error) {
	r, err := sst.OpenFile(fs, path, sst.ReaderOptions{Comparer: cmp})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	p := r.Properties()
	if !p.External {
		return nil, base.InvalidArgumentErrorf("%s is not an external table (its entries carry their own seqnums; write it with NewExternalWriter)", path)
	}
	if err := r.Verify(); err != nil {
		if !errors.Is(err, ErrCorruption) {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &ingestFile{
		path: path, smallest: p.SmallestKey.Clone(), largest: p.LargestKey.Clone(),
		size: uint64(r.Size()), numEntries: p.NumEntries, numDeletions: p.NumDeletions,
		numRangeDels: p.NumRangeDels, fileChecksum: p.FileChecksum, checksumType: p.ChecksumType,
		identity: p.Identity,
	}, nil
}

// linkExternalTables hard-links (or copies) each file into the DB
// directory under a new number and syncs it (step 2; the caller syncs the
// directory). A copy is verified again: it is new bytes. It returns the
// files placed so far even on error, for the caller to remove.
func (d *DB) linkExternalTables(op string, files []*ingestFile) ([]*ingestFile, error) {
	var done []*ingestFile
	for _, f := range files {
		d.mu.Lock()
		f.fileNum = d.vs.allocFileNum()
		d.mu.Unlock()
		dst := makeFilename(d.fs, d.dirname, fileTypeTable, f.fileNum)
		copied := false
		err := d.fs.Link(f.path, dst)
		if err != nil && !errors.Is(err, os.ErrExist) && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrPermission) {
			copied = true
			err = vfs.Copy(d.fs, f.path, dst)
		}
		if err != nil {
			return done, fmt.Errorf("%s: linking %s to %s: %w", op, f.path, dst, err)
		}
		done = append(done, f)
		if err := vfsutil.SyncFile(d.fs, dst); err != nil {
			return done, fmt.Errorf("%s: %w (linked from %s)", op, err, f.path)
		}
		if copied {
			c, err := verifyExternalTable(d.fs, dst, d.cmp)
			if err == nil && (c.size != f.size || c.fileChecksum != f.fileChecksum) {
				err = base.CorruptionErrorf("the copy differs from %s (%d bytes, file checksum %#x; the copy has %d, %#x)",
					f.path, f.size, f.fileChecksum, c.size, c.fileChecksum)
			}
			if err != nil {
				return done, fmt.Errorf("%s: copying %s to %s: %w", op, f.path, dst, err)
			}
		}
	}
	return done, nil
}

// writeExciseTable writes the external table holding IngestAndExcise's
// range tombstone [start, end) into the DB directory.
func (d *DB) writeExciseTable(start, end []byte) (*ingestFile, error) {
	d.mu.Lock()
	num := d.vs.allocFileNum()
	d.mu.Unlock()
	name := makeFilename(d.fs, d.dirname, fileTypeTable, num)
	f, err := d.fs.Create(name)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", name, err)
	}
	o := d.sstWriterOptions(num, 0) // a range tombstone alone: nothing to compress
	o.External = true
	w := sst.NewWriter(f, o)
	if err := w.AddRangeDel(start, end, 0); err != nil {
		w.Abort()
		_ = d.fs.Remove(name)
		return nil, fmt.Errorf("writing %s: %w", name, err)
	}
	m, err := w.Close()
	if err != nil {
		_ = d.fs.Remove(name)
		return nil, fmt.Errorf("writing %s: %w", name, err)
	}
	return &ingestFile{
		path: name, smallest: m.Smallest, largest: m.Largest, size: m.Size, numRangeDels: 1,
		fileChecksum: m.FileChecksum, checksumType: m.ChecksumType, fileNum: num, identity: m.Identity,
	}, nil
}

// memtablesOverlap reports whether a memtable (mutable or immutable) holds
// a key or a range tombstone in one of the spans: a hint, taken without
// commitMu while writers go on (step 3); ingestTakeSeqnums asks again,
// exactly.
func (d *DB) memtablesOverlap(spans []keySpan) (bool, error) {
	rs := d.loadReadState()
	if rs == nil {
		return false, ErrClosed
	}
	defer rs.unref()
	for _, e := range append([]*memTableEntry{rs.mem}, rs.imms...) {
		over, err := memtableOverlaps(e, spans)
		if err != nil {
			return false, d.memCorruption(err)
		}
		if over {
			return true, nil
		}
	}
	return false, nil
}

// memtableOverlaps reports whether e holds a key or tombstone in a span.
// The caller holds a reference to e (through a read state).
func memtableOverlaps(e *memTableEntry, spans []keySpan) (bool, error) {
	if err := e.readable(); err != nil {
		return false, err
	}
	it := e.t.NewIter(memtable.IterOptions{})
	for _, s := range spans {
		if it.SeekGE(s.start) && s.containsKey(it.Key().UserKey) {
			it.Close()
			return true, nil
		}
		if err := it.Error(); err != nil {
			it.Close()
			return false, err
		}
	}
	if err := it.Close(); err != nil {
		return false, err
	}
	if e.rangeDels.Load() == 0 {
		return false, nil
	}
	ts, err := e.t.RangeDels(base.SeqNumMax)
	if err != nil {
		return false, err
	}
	for _, t := range ts {
		ts := keySpan{cmp: e.cmp, start: t.Start, end: t.End, endExcl: true}
		for _, s := range spans {
			if ts.overlaps(s) {
				return true, nil
			}
		}
	}
	return false, nil
}

// ingestTakeSeqnums is step 4. Under commitMu it waits for the writers
// still applying batches to the memtables (no new ones come) and checks
// them again, now exactly; if the mutable one overlaps the spans it is
// rotated. Then it takes n seqnums, writes the ingestion record to the
// WAL, takes a publisher ticket and sets the flush gate (d.ingestSeq).
// wait is the newest memtable that overlaps the spans, which must be
// flushed before the edit (nil if none). compactionMu is held.
func (d *DB) ingestTakeSeqnums(spans []keySpan, n uint64) (slot commitSlot, wait *memTableEntry, err error) {
	var newest *memTableEntry
	room := func() (string, error) {
		// d.mem changes only under commitMu, so rs.mem is d.mem; the
		// reference keeps the immutable ones alive while we read them.
		rs := d.loadReadState()
		if rs == nil {
			return "", ErrClosed
		}
		// Flush order: the immutables oldest first, then the mutable one.
		order := append(slices.Clone(rs.imms), rs.mem)
		slices.Reverse(order[:len(order)-1])
		newest = nil
		for _, e := range order {
			e.writers.wait()
			over, err := memtableOverlaps(e, spans)
			if err != nil {
				rs.unref()
				return "", d.memCorruption(err)
			}
			if over {
				newest = e
			}
		}
		rs.unref()
		d.mu.Lock() // kept on success
		if newest != nil && newest == d.mem {
			// A write into the spans came in since step 3: rotate, and
			// flush it while the seqnums are held.
			if err := d.rotateMemtableLocked(0); err != nil {
				if !errors.Is(err, errNoSpareWAL) {
					d.setBackgroundErrorLocked(err, "memtable rotation")
					d.mu.Unlock()
					return "", err
				}
				d.mu.Unlock()
				return stallNoSpareWAL, nil
			}
		}
		return "", nil
	}
	if err := d.enterCommit(room, d.rotationClearedLocked); err != nil {
		return commitSlot{}, nil, err
	}
	// commitMu and d.mu are held.
	defer d.commitMu.Unlock()
	defer d.mu.Unlock()
	seq := d.sequence(n)
	d.mem.lastSeq.Store(seq + n - 1)
	slot, err = d.logCommit(seq, n, encodeWALIngest(seq, seq+n-1), false)
	if err != nil {
		return commitSlot{}, nil, d.walFailedLocked(err)
	}
	d.ingestSeq = slot.seq
	if newest != nil {
		d.maybeScheduleFlushLocked()
	}
	return slot, newest, nil
}

// waitFlushed waits until memtable e is flushed (the flush goroutine takes
// the memtables oldest first, and none of those up to e waits for the
// ingestion's gate: their seqnums are all below it).
func (d *DB) waitFlushed(e *memTableEntry) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.waitFlushedLocked(e, false)
}

// ingestLevel returns the level for m (step 6): the deepest level such
// that neither it nor a level above it holds a file overlapping m's key
// range, among v's files and those already placed by the same edit; L0 if
// an L0 file overlaps.
func ingestLevel(v *manifest.Version, placed []manifest.NewFile, m *manifest.FileMetadata) int {
	span := spanOf(v.Cmp, m.Smallest, m.Largest)
	overlaps := func(l int) bool {
		for _, f := range v.Levels[l] {
			if span.overlaps(spanOf(v.Cmp, f.Smallest, f.Largest)) {
				return true
			}
		}
		for _, p := range placed {
			if p.Level == l && span.overlaps(spanOf(v.Cmp, p.Meta.Smallest, p.Meta.Largest)) {
				return true
			}
		}
		return false
	}
	level := 0
	for l := 0; l < manifest.NumLevels && !overlaps(l); l++ {
		level = l
	}
	return level
}

// maxTableSeq returns the largest seqnum in any table of v.
func maxTableSeq(v *manifest.Version) uint64 {
	var m uint64
	for _, files := range v.Levels {
		for _, f := range files {
			m = max(m, f.LargestSeq)
		}
	}
	return m
}
