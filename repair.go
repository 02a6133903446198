package vigil

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/lockfile"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/sst"
	"github.com/vigildb/vigil/wal"
)

// Repair: salvaging a damaged DB that is not open.
//
// Vigil reports damage; Repair is what to do about it when there is no
// backup to heal from (HealFromBackup loses nothing, and is the first
// choice). It never invents data: everything it keeps verified, and
// everything it could not keep is named in the report.
//
//   - The MANIFEST (or CURRENT) missing or damaged: the LSM is rebuilt from
//     the tables. The records of every MANIFEST file that still verify say
//     which tables were deleted (those stay out), the log number, the last
//     seqnum, the DB's id and ingested tables' seqnums. Every other table
//     in the directory goes into L0 (their levels cannot be trusted with an
//     edit missing), and when two tables that overlap could hold versions
//     out of L0's order (interleaved seqnums), a full compaction merges
//     everything by seqnum before Repair returns.
//   - A damaged table: every data block that verifies, and its range
//     tombstones if they verify, is copied into a new table at the same
//     level (sst.Salvage); the damaged file is moved to lost/. The report
//     names, per damaged block, the user-key range whose data may be lost
//     (the neighbouring index separators); lost tombstones put the whole
//     table's range in doubt. A table whose footer or index is damaged, or
//     that is missing, is lost whole: its range comes from the MANIFEST.
//   - A damaged WAL: every record that verifies is replayed
//     (WALSkipAnyCorrupted), the damaged WAL is linked into lost/ first,
//     and the report counts the records and bytes dropped. Which keys
//     those held cannot be known.
//   - With Options.HealFrom naming a backup directory, a damaged or missing
//     table the MANIFEST records is first replaced by the backup's verified
//     copy of it (as HealFromBackup does): nothing is lost. Salvage is for
//     the tables the backup lacks.
//   - Set aside, never deleted: damaged tables, old MANIFESTs and damaged
//     WALs are linked (or copied) into lost/ before anything else changes;
//     the originals go only once the new MANIFEST no longer needs them.
//
// After Repair, Open succeeds with the options given (in any recovery
// mode: the damaged WALs are flushed and obsolete), Verify passes, and
// every key outside the reported ranges reads its last value that reached
// a table or a verified WAL record.
//
// Limits: a rebuilt MANIFEST cannot tell a live table from an obsolete
// one that a crash left undeleted if the edit that deleted it is the
// damaged one; such a table's versions can reappear (under newer versions
// where they exist). An ingested table whose MANIFEST record is lost has
// no known seqnum: it is moved to lost/ and its range reported.

// RepairReport is what Repair found and did.
type RepairReport struct {
	// ManifestRebuilt is set when the MANIFEST was rebuilt from the
	// tables; ManifestDamage says why (the error that Open would give).
	ManifestRebuilt bool   `json:"manifest_rebuilt"`
	ManifestDamage  string `json:"manifest_damage,omitempty"`
	// ManifestRecordsDropped counts MANIFEST records that did not verify
	// or decode during the rebuild.
	ManifestRecordsDropped int64 `json:"manifest_records_dropped,omitempty"`
	// Tables lists every table that was damaged, missing or set aside.
	Tables []RepairedTable `json:"tables,omitempty"`
	// WALs lists every WAL with records that did not verify.
	WALs []RepairedWAL `json:"wals,omitempty"`
	// Lost are the user-key ranges whose data may be lost or older than it
	// was, from every table above; keys outside them read their last value.
	Lost []LostRange `json:"lost,omitempty"`
	// EntriesSaved counts the entries copied out of damaged tables;
	// EntriesLost the entries of damaged or missing tables that were not
	// (as the MANIFEST counted them; 0 where it is unknown).
	EntriesSaved uint64 `json:"entries_saved"`
	EntriesLost  uint64 `json:"entries_lost"`
	// WALRecordsSkipped counts what the WAL replay stepped over besides
	// the damaged records (missing batches, undecodable ones).
	WALRecordsSkipped int64 `json:"wal_records_skipped,omitempty"`
	// Compacted is set when a full compaction merged tables whose order
	// the rebuilt MANIFEST could not know.
	Compacted bool `json:"compacted,omitempty"`
	// MovedToLost names the copies set aside in dir/lost (hard links
	// where the file system has them).
	MovedToLost []string `json:"moved_to_lost,omitempty"`
}

// Clean reports whether Repair found nothing to repair.
func (r *RepairReport) Clean() bool {
	return !r.ManifestRebuilt && len(r.Tables) == 0 && len(r.WALs) == 0 && r.WALRecordsSkipped == 0
}

// MayHaveLost reports whether user key k lies in a reported lost range.
// Writes in dropped WAL records are not covered: their keys are unknown.
func (r *RepairReport) MayHaveLost(k []byte) bool {
	for _, lr := range r.Lost {
		if lr.Contains(k) {
			return true
		}
	}
	return false
}

// RepairedTable is one table Repair could not keep as it was.
type RepairedTable struct {
	FileNum uint64 `json:"file_num"`
	Level   int    `json:"level"`
	// Missing: the MANIFEST names the table but the directory lacks it.
	Missing bool `json:"missing,omitempty"`
	// PossiblyObsolete: with a rebuilt MANIFEST, a missing table may have
	// been deleted by a compaction whose record was the damaged one (its
	// data then lives on in the tables that compaction wrote). Repair
	// cannot tell, so its range is reported as lost all the same.
	PossiblyObsolete bool `json:"possibly_obsolete,omitempty"`
	// Problem is what was wrong (the check's error).
	Problem string `json:"problem"`
	// Healed: the backup in Options.HealFrom held the identical table,
	// which replaced it (nothing lost; the fields below stay zero).
	Healed bool `json:"healed,omitempty"`
	// NewFileNum is the table holding what was salvaged (0: nothing was).
	NewFileNum uint64 `json:"new_file_num,omitempty"`
	// DataBlocks and LostBlocks count the table's data blocks and those
	// that did not verify (0, 0 when the index could not be read).
	DataBlocks int `json:"data_blocks"`
	LostBlocks int `json:"lost_blocks"`
	// EntriesSaved are the entries copied; EntriesBefore the MANIFEST's
	// count (0 if unknown).
	EntriesSaved  uint64 `json:"entries_saved"`
	EntriesBefore uint64 `json:"entries_before"`
	// RangeDelsLost: the table's range tombstones could not be read.
	RangeDelsLost bool `json:"range_dels_lost,omitempty"`
}

// RepairedWAL is one WAL with records that did not verify.
type RepairedWAL struct {
	LogNum uint64 `json:"log_num"`
	// DroppedRecords is -1 when the WAL's header did not verify: the
	// whole file was set aside, its record count unknown.
	DroppedRecords int64 `json:"dropped_records"`
	DroppedBytes   int64 `json:"dropped_bytes"`
	// Damage is the first problem the reader found.
	Damage string `json:"damage"`
}

// LostRange is a user-key range whose data may be lost: First and Last
// are both inclusive; nil means unbounded on that side.
type LostRange struct {
	FileNum     uint64 `json:"file_num"`
	First, Last []byte
	// Why says what was lost there.
	Why string `json:"why"`
}

// Contains reports whether user key k lies in the range, in the bytewise
// order (DefaultComparer); see ContainsUnder.
func (lr LostRange) Contains(k []byte) bool { return lr.ContainsUnder(nil, k) }

// ContainsUnder reports whether user key k lies in the range in c's order
// (nil: DefaultComparer), the DB's Options.Comparer.
func (lr LostRange) ContainsUnder(c *Comparer, k []byte) bool {
	if c == nil {
		c = DefaultComparer
	}
	return (lr.First == nil || c.Compare(k, lr.First) >= 0) && (lr.Last == nil || c.Compare(k, lr.Last) <= 0)
}

// String renders the range with its bounds in hex.
func (lr LostRange) String() string {
	show := func(b []byte, unbounded string) string {
		if b == nil {
			return unbounded
		}
		return base.HexKey(b)
	}
	return fmt.Sprintf("[%s, %s] (table %06d: %s)", show(lr.First, "-inf"), show(lr.Last, "+inf"), lr.FileNum, lr.Why)
}

// MarshalJSON writes the bounds in hex (null: unbounded).
func (lr LostRange) MarshalJSON() ([]byte, error) {
	hexOrNil := func(b []byte) *string {
		if b == nil {
			return nil
		}
		s := hex.EncodeToString(b)
		return &s
	}
	return json.Marshal(struct {
		FileNum uint64  `json:"file_num"`
		First   *string `json:"first_hex"`
		Last    *string `json:"last_hex"`
		Why     string  `json:"why"`
	}{lr.FileNum, hexOrNil(lr.First), hexOrNil(lr.Last), lr.Why})
}

// lostDirName is the directory, inside the DB's, where Repair moves what it
// set aside.
const lostDirName = "lost"

// Repair repairs the DB in dir, which must not be open (Repair takes its
// LOCK), with opts (nil: defaults; ReadOnly and ErrorIfExists are
// ignored). See the comment above for what it does. It returns the report
// and nil when the DB opens and verifies afterwards; an error (with the
// report so far) when it could not get there.
func Repair(dir string, opts *Options) (*RepairReport, error) {
	if opts == nil {
		opts = &Options{}
	}
	o := opts.Clone().EnsureDefaults()
	o.ReadOnly, o.ErrorIfExists = false, false
	if err := o.Validate(); err != nil {
		return nil, err
	}
	fs := o.FS
	if exists, err := dbExists(fs, dir); err != nil {
		return nil, fmt.Errorf("vigil: repair: %w", err)
	} else if !exists && !hasTables(fs, dir) {
		return nil, base.InvalidArgumentErrorf("repair: %s holds no DB (no CURRENT and no tables)", dir)
	}
	rp := &repairer{d: newDB(dir, o), report: &RepairReport{}}
	rp.d.log = discardLogger{}
	if o.Logger != nil {
		rp.d.log = userLogger{o.Logger}
	}
	if err := rp.offline(); err != nil {
		return rp.report, err
	}
	if err := rp.online(); err != nil {
		return rp.report, err
	}
	return rp.report, nil
}

// hasTables reports whether dir holds any table file.
func hasTables(fs vfs.FS, dir string) bool {
	names, _ := fs.List(dir)
	for _, n := range names {
		if ft, _, ok := parseFilename(n); ok && ft == fileTypeTable {
			return true
		}
	}
	return false
}

// repairer is the state of one Repair. d is a DB that is never opened: it
// lends Repair its options, file names and table writer options.
type repairer struct {
	d      *DB
	report *RepairReport
	// intact: the MANIFEST loaded as Open would load it.
	intact bool
	// files are the tables of the repaired LSM with their levels.
	files []manifest.NewFile
	// deleted are tables a verified MANIFEST record deleted (obsolete).
	deleted map[uint64]bool
	// known are the tables the (salvaged) MANIFEST records name as live.
	known map[uint64]manifest.NewFile
	// changed: the MANIFEST must be written anew.
	changed bool
	// walLastSeq is the seqnum the oldest WAL to replay says was written
	// before it (0: unknown).
	walLastSeq uint64
}

// offline does what needs the DB closed and locked: the MANIFEST, the
// tables, the WALs' inspection, and a new MANIFEST if anything changed.
func (rp *repairer) offline() (err error) {
	d := rp.d
	if d.dataDir, err = d.fs.OpenDir(d.dirname); err != nil {
		return fmt.Errorf("vigil: repair: opening directory %s: %w", d.dirname, err)
	}
	defer d.dataDir.Close()
	lock, err := lockfile.Acquire(d.fs, d.dirname, makeFilename(d.fs, d.dirname, fileTypeLock, 0))
	if err != nil {
		return fmt.Errorf("vigil: repair: cannot lock %s (is the DB open?): %w", d.dirname, err)
	}
	defer lock.Close()
	if err := rp.loadManifest(); err != nil {
		return err
	}
	if err := rp.checkTables(); err != nil {
		return err
	}
	if err := rp.inspectWALs(); err != nil {
		return err
	}
	if !rp.changed {
		return nil
	}
	return rp.writeManifest()
}

// loadManifest loads the MANIFEST as Open does; if that fails, it salvages
// what verifies of every MANIFEST file.
func (rp *repairer) loadManifest() error {
	d := rp.d
	d.vs = versionSet{fs: d.fs, dirname: d.dirname, dataDir: d.dataDir, cksum: d.cksum, cmp: d.cmp, log: d.log}
	rp.known, rp.deleted = map[uint64]manifest.NewFile{}, map[uint64]bool{}
	// Strictly: a damaged last edit is not taken for a torn one here (the
	// tables it added would be dropped as leftovers); a rebuild keeps them.
	st, err := manifest.Load(d.fs, d.dirname, wal.AbsoluteConsistency, d.cmp, nil)
	if err == nil {
		rp.intact = true
		d.vs.logNumber, d.vs.nextFileNum, d.vs.lastSeq, d.vs.dbID = st.LogNumber, st.NextFileNum, st.LastSeq, st.DBID
		d.vs.formatVersion, d.vs.manifestNum, d.vs.merger = st.FormatVersion, st.ManifestNum, st.Merger
		for l, files := range st.Version.Levels {
			for _, f := range files {
				rp.known[f.FileNum] = manifest.NewFile{Level: l, Meta: f}
			}
		}
		if d.vs.dbID == [16]byte{} {
			d.vs.dbID = base.NewRandomID()
		}
		return nil
	}
	if !base.IsCorruption(err) && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("vigil: repair: loading the MANIFEST: %w", err)
	}
	rp.report.ManifestRebuilt, rp.report.ManifestDamage = true, err.Error()
	rp.changed = true
	return rp.salvageManifests()
}

// salvageManifests replays every record that verifies and decodes of
// every MANIFEST file, oldest first, leniently: adds and deletes by file
// number, the last log number, next file number, last seqnum, id and
// format version seen.
func (rp *repairer) salvageManifests() error {
	d := rp.d
	names, err := d.fs.List(d.dirname)
	if err != nil {
		return fmt.Errorf("vigil: repair: listing %s: %w", d.dirname, err)
	}
	var nums []uint64
	for _, n := range names {
		if num, ok := manifest.ParseManifestName(n); ok {
			nums = append(nums, num)
		}
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	d.vs.formatVersion = 1
	for _, num := range nums {
		rp.salvageManifest(num)
		d.vs.manifestNum = max(d.vs.manifestNum, num)
	}
	if d.vs.dbID == [16]byte{} {
		// No verified record kept the DB's id: the tables' identities
		// name it (the most common one), else a new one is made.
		d.vs.dbID = rp.dbIDFromTables()
	}
	return nil
}

// dbIDFromTables returns the DB id most of the directory's tables name in
// their identities, or a new random id if none names one.
func (rp *repairer) dbIDFromTables() [16]byte {
	d := rp.d
	names, _ := d.fs.List(d.dirname)
	counts := map[[16]byte]int{}
	var best [16]byte
	for _, n := range names {
		ft, num, ok := parseFilename(n)
		if !ok || ft != fileTypeTable {
			continue
		}
		r, err := sst.OpenFile(d.fs, makeFilename(d.fs, d.dirname, fileTypeTable, num), sst.ReaderOptions{FileNum: num, Comparer: d.cmp})
		if err != nil {
			continue
		}
		if id := r.Properties().Identity.DB; id != ([16]byte{}) {
			counts[id]++
			if counts[id] > counts[best] {
				best = id
			}
		}
		r.Close()
	}
	if best == ([16]byte{}) {
		return base.NewRandomID()
	}
	return best
}

// salvageManifest folds the verified records of MANIFEST-num into rp.
func (rp *repairer) salvageManifest(num uint64) {
	d := rp.d
	name := makeFilename(d.fs, d.dirname, fileTypeManifest, num)
	f, err := d.fs.Open(name)
	if err != nil {
		return
	}
	defer f.Close()
	r, err := wal.NewReader(f, name, wal.SkipAnyCorruptedRecords)
	if err != nil {
		rp.report.ManifestRecordsDropped++
		return
	}
	for {
		rec, err := r.Next()
		if err != nil {
			break // io.EOF, or a read error: what came before stands
		}
		e, err := manifest.DecodeVersionEdit(rec, name)
		if err != nil {
			rp.report.ManifestRecordsDropped++
			continue
		}
		rp.foldEdit(e)
	}
	rp.report.ManifestRecordsDropped += r.Stats().DroppedRecords
}

// foldEdit applies one salvaged edit.
func (rp *repairer) foldEdit(e *manifest.VersionEdit) {
	vs := &rp.d.vs
	if e.FormatVersion != 0 {
		vs.formatVersion = e.FormatVersion
	}
	if e.Merger != "" {
		vs.merger = e.Merger
	}
	if e.HasDBID {
		vs.dbID = e.DBID
	}
	if e.HasLogNumber {
		vs.logNumber = max(vs.logNumber, e.LogNumber)
	}
	if e.HasNextFileNum {
		vs.nextFileNum = max(vs.nextFileNum, e.NextFileNum)
	}
	if e.HasLastSeq {
		vs.lastSeq = max(vs.lastSeq, e.LastSeq)
	}
	for _, df := range e.Deleted {
		delete(rp.known, df.FileNum)
		rp.deleted[df.FileNum] = true
	}
	for _, a := range e.Added {
		rp.known[a.Meta.FileNum] = a
		delete(rp.deleted, a.Meta.FileNum)
	}
}

// setAsideFile puts a copy of a file of the DB directory into lost/ (a
// hard link where the file system has them), under a name no earlier
// Repair used, and syncs lost/. The original stays where it is until the
// new MANIFEST no longer names it, when Open removes it with the other
// leftovers: a Repair that stops midway (an error, a crash) has lost
// nothing, and a second one finds the same damage again. With remove, the
// original is removed at once (a WAL Open must not read) and the DB
// directory synced.
func (rp *repairer) setAsideFile(name string, remove bool) error {
	d := rp.d
	lostDir := d.fs.PathJoin(d.dirname, lostDirName)
	if err := d.fs.MkdirAll(lostDir, 0o755); err != nil {
		return fmt.Errorf("vigil: repair: creating %s: %w", lostDir, err)
	}
	from := d.fs.PathJoin(d.dirname, name)
	base := name
	for i := 1; ; i++ {
		if _, err := d.fs.Stat(d.fs.PathJoin(lostDir, base)); errors.Is(err, os.ErrNotExist) {
			break
		}
		base = fmt.Sprintf("%s.%d", name, i)
	}
	to := d.fs.PathJoin(lostDir, base)
	err := d.fs.Link(from, to)
	if err != nil {
		err = vfs.Copy(d.fs, from, to)
	}
	if err == nil {
		err = syncDir(d.fs, lostDir)
	}
	if err == nil && remove {
		if err = d.fs.Remove(from); err == nil {
			err = d.dataDir.Sync()
		}
	}
	if err != nil {
		return fmt.Errorf("vigil: repair: setting %s aside in %s: %w", from, lostDir, err)
	}
	rp.report.MovedToLost = append(rp.report.MovedToLost, d.fs.PathJoin(lostDirName, base))
	return nil
}

// syncDir fsyncs directory dir.
func syncDir(fs vfs.FS, dir string) error {
	f, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// online opens the repaired DB, replaying every WAL record that verifies
// (WALSkipAnyCorrupted), which flushes them and makes the damaged WALs
// obsolete; compacts a rebuilt LSM whole, merging by seqnum the tables
// whose levels were lost; and verifies every table.
func (rp *repairer) online() error {
	o := rp.d.opts.Clone()
	o.WALRecoveryMode = WALSkipAnyCorrupted
	db, err := Open(rp.d.dirname, o)
	if err != nil {
		return fmt.Errorf("vigil: repair: opening the repaired DB: %w", err)
	}
	rp.report.WALRecordsSkipped = db.stats.recovery.skipped
	if rp.report.ManifestRebuilt {
		if err := db.Compact(nil, nil); err != nil {
			db.Close()
			return fmt.Errorf("vigil: repair: compacting the rebuilt LSM: %w", err)
		}
		rp.report.Compacted = true
	}
	if err := db.Verify(); err != nil {
		db.Close()
		return fmt.Errorf("vigil: repair: the repaired DB does not verify: %w", err)
	}
	return db.Close()
}
