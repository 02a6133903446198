package vigil

import (
	"bytes"
	"fmt"
	"io"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/sst"
	"github.com/vigildb/vigil/wal"
)

// salvage copies what verifies of damaged table num (m: the MANIFEST's
// record of it, nil if none) into a new table at level, reports what was
// lost, and sets the damaged file aside in lost/.
func (rp *repairer) salvage(num uint64, m *manifest.FileMetadata, level int, problem error) error {
	d := rp.d
	rt := RepairedTable{FileNum: num, Level: level, Problem: problem.Error()}
	var first, last []byte // the table's whole range, if known
	if m != nil {
		rt.EntriesBefore = m.NumEntries
		first, last = m.Smallest.UserKey, m.Largest.UserKey
	}
	newNum := d.vs.allocFileNum()
	res, meta, err := rp.copyVerified(num, newNum, level, m)
	if err != nil && !base.IsCorruption(err) {
		return err
	}
	if res != nil && res.Properties != nil && m == nil {
		first, last = res.Properties.SmallestKey.UserKey, res.Properties.LargestKey.UserKey
	}
	switch {
	case err != nil:
		rt.Problem = err.Error()
		rp.lose(num, first, last, "table unreadable (footer or index)")
	default:
		rt.DataBlocks, rt.LostBlocks, rt.EntriesSaved = res.DataBlocks, len(res.Lost), res.Entries
		for _, lb := range res.Lost {
			lo := lb.First
			if lo == nil {
				lo = first
			}
			rp.lose(num, lo, lb.Last, fmt.Sprintf("data block at offset %d (%d bytes) did not verify", lb.Offset, lb.Size))
		}
		if res.RangeDelsErr != nil {
			rt.RangeDelsLost = true
			rp.lose(num, first, last, "range tombstones unreadable (older data below may show)")
		}
	}
	if meta != nil {
		rt.NewFileNum = newNum
		rp.files = append(rp.files, manifest.NewFile{Level: level, Meta: meta})
	}
	rp.report.EntriesSaved += rt.EntriesSaved
	if rt.EntriesBefore > rt.EntriesSaved {
		rp.report.EntriesLost += rt.EntriesBefore - rt.EntriesSaved
	}
	rp.report.Tables = append(rp.report.Tables, rt)
	rp.changed = true
	return rp.setAsideFile(rp.baseName(fileTypeTable, num), false)
}

// copyVerified writes what sst.Salvage hands over of table num (m: the
// MANIFEST's record of it, nil if none) into table newNum. A file that is
// not table m (its properties, or an entry, contradict m's record), or
// that names another DB or number in its identity, is not copied: an
// error wrapping ErrCorruption, as for a file nothing can be read of. It returns the new table's metadata, or nil when nothing was
// salvaged (the new file is then removed). An external table whose seqnum
// is unknown (globalSeq 0) is not copied: its entries would read as the
// oldest of their keys. An error wrapping ErrCorruption means nothing
// could be read.
func (rp *repairer) copyVerified(num, newNum uint64, level int, m *manifest.FileMetadata) (*sst.SalvageResult, *manifest.FileMetadata, error) {
	d := rp.d
	name := makeFilename(d.fs, d.dirname, fileTypeTable, num)
	f, err := d.fs.Open(name)
	if err != nil {
		return nil, nil, fmt.Errorf("vigil: repair: opening %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("vigil: repair: stat of %s: %w", name, err)
	}
	outName := makeFilename(d.fs, d.dirname, fileTypeTable, newNum)
	out, err := d.fs.Create(outName)
	if err != nil {
		return nil, nil, fmt.Errorf("vigil: repair: creating %s: %w", outName, err)
	}
	w := sst.NewWriter(out, d.sstWriterOptions(newNum, level))
	abort := func() { w.Abort(); _ = d.fs.Remove(outName) }
	var globalSeq uint64
	if m != nil {
		globalSeq = m.GlobalSeqNum
	}
	res, err := sst.Salvage(f, name, st.Size(), sst.ReaderOptions{FileNum: num, GlobalSeqNum: globalSeq, Comparer: rp.d.cmp}, func(k sst.InternalKey, v []byte) error {
		if why := outsideRecord(rp.d.cmp, m, k); why != "" {
			return base.CorruptionErrorf("vigil: repair: %s is not the table the MANIFEST names: %s", name, why)
		}
		return w.Add(k, v)
	})
	switch {
	case err != nil:
	case res.Properties != nil && res.Properties.External && globalSeq == 0:
		err = base.CorruptionErrorf("vigil: repair: %s is an ingested table whose seqnum only the lost MANIFEST record held", name)
	case res.Properties != nil && m != nil && mismatch(m, res.Properties) != "":
		err = base.CorruptionErrorf("vigil: repair: %s is not the table the MANIFEST names: %s", name, mismatch(m, res.Properties))
	case res.Properties != nil && m == nil && res.Properties.Identity != (base.TableIdentity{}) &&
		(res.Properties.Identity.DB != d.vs.dbID || res.Properties.Identity.FileNum != num):
		err = base.CorruptionErrorf("vigil: repair: %s is a table of another DB or number (identity %v)", name, res.Properties.Identity)
	}
	if err == nil && res.RangeDelsErr == nil {
		for _, t := range res.RangeDels {
			if err = w.AddRangeDel(t.Start, t.End, t.Seq); err != nil {
				break
			}
		}
	}
	if err != nil || (res.Entries == 0 && (res.RangeDelsErr != nil || len(res.RangeDels) == 0)) {
		abort()
		return res, nil, err
	}
	sm, err := w.Close()
	if err != nil {
		_ = d.fs.Remove(outName)
		return res, nil, fmt.Errorf("vigil: repair: writing %s: %w", outName, err)
	}
	if err := d.dataDir.Sync(); err != nil {
		return res, nil, fmt.Errorf("vigil: repair: syncing %s: %w", d.dirname, err)
	}
	meta := metaFromSST(newNum, sm)
	if err := d.checkNewTable(meta); err != nil {
		return res, nil, fmt.Errorf("vigil: repair: %w", err)
	}
	return res, meta, nil
}

// writeManifest writes a new MANIFEST holding rp.files and points CURRENT
// at it; the MANIFESTs it replaces, when rebuilt, are moved to lost/.
func (rp *repairer) writeManifest() error {
	d := rp.d
	vs := &d.vs
	b := manifest.NewBuilder(d.cmp, nil)
	if err := b.Apply(&manifest.VersionEdit{Added: rp.files}); err != nil {
		return fmt.Errorf("vigil: repair: %w", err)
	}
	v, err := b.Build(nil)
	if err != nil {
		return fmt.Errorf("vigil: repair: the repaired LSM: %w", err)
	}
	vs.current = v
	if !rp.intact {
		// A record lost with the MANIFEST may have raised the last seqnum:
		// it is at least what the oldest WAL to replay says was written
		// before it. Not the tables' largest seqnum: an ingested table (or
		// a compaction output holding its entries) may be above batches
		// that are only in a WAL, which replay would then skip.
		vs.lastSeq = max(vs.lastSeq, rp.walLastSeq)
	}
	if !rp.intact {
		// The MANIFESTs the new one replaces go to lost/ first.
		names, _ := d.fs.List(d.dirname)
		for _, n := range names {
			if _, ok := manifest.ParseManifestName(n); ok {
				if err := rp.setAsideFile(n, false); err != nil {
					return err
				}
			}
		}
	}
	manifestNum, tempNum := vs.allocFileNum(), vs.allocFileNum()
	w, err := vs.writeManifest(manifestNum, tempNum, vs.snapshotEdit().Encode(nil))
	if err != nil {
		return fmt.Errorf("vigil: repair: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("vigil: repair: closing the new MANIFEST: %w", err)
	}
	return nil
}

// inspectWALs reads every WAL at or above the log number with the reader
// Open's replay will use (skip-any mode): one with records that do not
// verify is reported and set aside in lost/. A torn tail is not damage.
// It notes what the oldest WAL's preamble says was written before it
// (walLastSeq, for a rebuilt MANIFEST), and reports the WAL being written
// missing (liveWALMissing).
func (rp *repairer) inspectWALs() error {
	d := rp.d
	names, err := d.fs.List(d.dirname)
	if err != nil {
		return fmt.Errorf("vigil: repair: listing %s: %w", d.dirname, err)
	}
	var logs []uint64
	for _, n := range names {
		if ft, num, ok := parseFilename(n); ok && ft == fileTypeLog && num >= d.vs.logNumber {
			logs = append(logs, num)
		}
	}
	logs = sortedNums(setOf(logs))
	seen := make([]walSeen, len(logs))
	for i, num := range logs {
		if seen[i], err = rp.inspectWAL(num); err != nil {
			return err
		}
	}
	if len(logs) > 0 && seen[0].preamble != nil {
		rp.walLastSeq = seen[0].preamble.lastSeq
	}
	if why := rp.liveWALMissing(logs, seen); why != "" {
		rp.report.WALs = append(rp.report.WALs, RepairedWAL{LogNum: d.vs.logNumber, DroppedRecords: -1,
			Damage: "missing: " + why + "; the writes after the last flush are lost"})
	}
	return nil
}

func setOf(nums []uint64) map[uint64]bool {
	m := make(map[uint64]bool, len(nums))
	for _, n := range nums {
		m[n] = true
	}
	return m
}

// walSeen is what inspectWAL read of a WAL: whether its header verified,
// whether records were damaged, and its preamble, if its first record is
// one.
type walSeen struct {
	headerOK, damaged bool
	preamble          *walPreamble
}

// inspectWAL reads WAL num to its end in skip-any mode.
func (rp *repairer) inspectWAL(num uint64) (walSeen, error) {
	d := rp.d
	name := makeFilename(d.fs, d.dirname, fileTypeLog, num)
	f, err := d.fs.Open(name)
	if err != nil {
		return walSeen{}, fmt.Errorf("vigil: repair: opening %s: %w", name, err)
	}
	defer f.Close()
	r, err := wal.NewReader(f, name, wal.SkipAnyCorruptedRecords)
	if err == nil {
		err = r.CheckLogNumber(num)
	}
	if err != nil {
		if !base.IsCorruption(err) {
			return walSeen{}, fmt.Errorf("vigil: repair: reading %s: %w", name, err)
		}
		// The header: nothing of the WAL can be read, and Open would
		// refuse it. It goes to lost/ whole.
		var size int64
		if fi, serr := f.Stat(); serr == nil {
			size = fi.Size()
		}
		rp.report.WALs = append(rp.report.WALs, RepairedWAL{LogNum: num, DroppedRecords: -1, DroppedBytes: size, Damage: err.Error()})
		return walSeen{}, rp.setAsideFile(rp.baseName(fileTypeLog, num), true)
	}
	seen := walSeen{headerOK: true}
	for first := true; ; first = false {
		rec, err := r.Next()
		if err != nil {
			break // io.EOF, or an I/O error Open's replay will meet too
		}
		if first && isWALMeta(rec) {
			if m, err := decodeWALMeta(rec, name); err == nil && m.kind == walMetaPreamble {
				seen.preamble = &m.preamble
			}
		}
	}
	st := r.Stats()
	if st.Corruptions == 0 {
		return seen, nil
	}
	seen.damaged = true
	damage := r.LastCorruption()
	if damage == nil {
		damage = base.CorruptionErrorf("%d records dropped", st.DroppedRecords)
	}
	rp.report.WALs = append(rp.report.WALs, RepairedWAL{LogNum: num, DroppedRecords: st.DroppedRecords,
		DroppedBytes: st.DroppedBytes, Damage: damage.Error()})
	return seen, rp.setAsideFile(rp.baseName(fileTypeLog, num), false)
}

// liveWALMissing says why the WAL the DB was writing is gone, or "": with
// the WAL on (the newest OPTIONS says so), the log number names the WAL of
// the oldest unflushed memtable, created before the MANIFEST named it and
// deleted only after a later number replaced it; and the WAL being written
// starts with a preamble, which only the spare made ahead of a rotation
// lacks. logs are the WALs at or above the log number, oldest first, and
// seen what inspectWAL read of each.
func (rp *repairer) liveWALMissing(logs []uint64, seen []walSeen) string {
	d := rp.d
	if !rp.walExpected() {
		return ""
	}
	// A rebuilt MANIFEST's log number may be stale (its WAL rightly
	// deleted): only an intact one's must exist.
	if rp.intact && d.vs.logNumber > 0 && (len(logs) == 0 || logs[0] != d.vs.logNumber) {
		return fmt.Sprintf("the MANIFEST's log number names WAL %06d and the DB ran with its WAL on", d.vs.logNumber)
	}
	for _, w := range seen {
		if w.preamble != nil || !w.headerOK || w.damaged {
			return "" // written to, or damaged (reported as such)
		}
	}
	return "no WAL at or above the log number was ever written to (only a spare made ahead is left), and the DB ran with its WAL on"
}

// walExpected reports whether the DB last ran with its WAL on, as the
// newest OPTIONS file says (false if none says: a DB without a WAL, or
// no OPTIONS file to tell).
func (rp *repairer) walExpected() bool {
	d := rp.d
	names, err := d.fs.List(d.dirname)
	if err != nil {
		return false
	}
	var newest uint64
	for _, n := range names {
		if ft, num, ok := parseFilename(n); ok && ft == fileTypeOptions && num > newest {
			newest = num
		}
	}
	if newest == 0 {
		return false
	}
	f, err := d.fs.Open(makeFilename(d.fs, d.dirname, fileTypeOptions, newest))
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	return err == nil && bytes.Contains(b, []byte("\ndisable_wal=false\n"))
}

// outsideRecord says how entry k contradicts the MANIFEST's record m of its
// table (a key outside its bounds, a seqnum outside its range), or "".
func outsideRecord(c *base.Comparer, m *manifest.FileMetadata, k sst.InternalKey) string {
	switch {
	case m == nil:
		return ""
	case c.Cmp(k.UserKey, m.Smallest.UserKey) < 0 || c.Cmp(k.UserKey, m.Largest.UserKey) > 0:
		return fmt.Sprintf("key %s outside %s..%s", base.HexKey(k.UserKey), base.HexKey(m.Smallest.UserKey), base.HexKey(m.Largest.UserKey))
	case m.GlobalSeqNum == 0 && (k.SeqNum() < m.SmallestSeq || k.SeqNum() > m.LargestSeq):
		return fmt.Sprintf("seqnum %d outside %d..%d", k.SeqNum(), m.SmallestSeq, m.LargestSeq)
	}
	return ""
}
