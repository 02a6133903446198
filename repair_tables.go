package vigil

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/sst"
)

// Repair's tables: each table the MANIFEST names is checked (opened with
// the MANIFEST's record of it and verified whole); with a rebuilt MANIFEST
// so is every other table in the directory that no verified record
// deleted. What fails is salvaged (see repair.go).

// checkTables checks every table Repair will keep and salvages the
// damaged ones.
func (rp *repairer) checkTables() error {
	d := rp.d
	names, err := d.fs.List(d.dirname)
	if err != nil {
		return fmt.Errorf("vigil: repair: listing %s: %w", d.dirname, err)
	}
	present := map[uint64]bool{}
	for _, n := range names {
		ft, num, ok := parseFilename(n)
		if !ok {
			continue
		}
		if ft == fileTypeTable {
			present[num] = true
		}
		d.vs.nextFileNum = max(d.vs.nextFileNum, num+1)
	}
	for _, num := range sortedNums(rp.known) {
		nf := rp.known[num]
		if !present[num] {
			// With a rebuilt MANIFEST a missing table may be obsolete
			// (deleted by the lost record): healing it could bring back
			// deleted keys.
			if !rp.intact || !rp.heal(nf, base.CorruptionErrorf("table %06d is missing", num)) {
				rp.missing(nf)
			}
			continue
		}
		if err := rp.checkKnown(nf); err != nil {
			return err
		}
	}
	if rp.intact {
		return nil
	}
	for _, num := range sortedNums(present) {
		if _, ok := rp.known[num]; ok || rp.deleted[num] {
			continue
		}
		if err := rp.checkUnknown(num); err != nil {
			return err
		}
	}
	return nil
}

func sortedNums[V any](m map[uint64]V) []uint64 {
	out := make([]uint64, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// level is where a table goes: its own level with a MANIFEST that loaded,
// L0 with a rebuilt one (see repair.go).
func (rp *repairer) level(l int) int {
	if rp.intact {
		return l
	}
	return 0
}

// missing records a table the MANIFEST names that the directory lacks.
func (rp *repairer) missing(nf manifest.NewFile) {
	m := nf.Meta
	why := "missing from the directory"
	if !rp.intact {
		why += " (or obsolete, if the damaged MANIFEST record deleted it)"
	}
	rp.report.Tables = append(rp.report.Tables, RepairedTable{FileNum: m.FileNum, Level: nf.Level, Missing: true,
		PossiblyObsolete: !rp.intact, Problem: why, EntriesBefore: m.NumEntries})
	rp.report.EntriesLost += m.NumEntries
	rp.lose(m.FileNum, m.Smallest.UserKey, m.Largest.UserKey, "table "+why)
	rp.changed = true
}

// lose adds a lost range (bounds copied; nil stays unbounded).
func (rp *repairer) lose(fileNum uint64, first, last []byte, why string) {
	rp.report.Lost = append(rp.report.Lost, LostRange{FileNum: fileNum, First: cloneOrNil(first), Last: cloneOrNil(last), Why: why})
}

// verifyTable opens table num (with the MANIFEST's record of it, if
// known) and verifies it whole. A damaged table is an error wrapping
// ErrCorruption; r is nil then.
func (rp *repairer) verifyTable(num uint64, m *manifest.FileMetadata) (*sst.Reader, error) {
	d := rp.d
	o := sst.ReaderOptions{FileNum: num, Comparer: d.cmp}
	if m != nil {
		o.GlobalSeqNum, o.Expect = m.GlobalSeqNum, m.Expected()
	}
	r, err := sst.OpenFile(d.fs, makeFilename(d.fs, d.dirname, fileTypeTable, num), o)
	if err != nil {
		return nil, err
	}
	if err := r.Verify(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// checkKnown checks a table the MANIFEST names: kept as it is if it
// verifies, else salvaged.
func (rp *repairer) checkKnown(nf manifest.NewFile) error {
	r, err := rp.verifyTable(nf.Meta.FileNum, nf.Meta)
	if err == nil {
		r.Close()
		rp.files = append(rp.files, manifest.NewFile{Level: rp.level(nf.Level), Meta: nf.Meta})
		return nil
	}
	if !base.IsCorruption(err) {
		return fmt.Errorf("vigil: repair: checking table %06d: %w", nf.Meta.FileNum, err)
	}
	if rp.heal(nf, err) {
		return nil
	}
	if why := rp.foreign(nf.Meta); why != "" {
		return rp.notTheTable(nf, why)
	}
	return rp.salvage(nf.Meta.FileNum, nf.Meta, rp.level(nf.Level), err)
}

// foreign says why the file under table m's number is not table m (another
// DB's, another number's, another state's: its properties name another
// identity, seqnums or bounds), or "" if it may be m, damaged. A file
// whose properties cannot be read is judged entry by entry by salvage.
func (rp *repairer) foreign(m *manifest.FileMetadata) string {
	d := rp.d
	r, err := sst.OpenFile(d.fs, makeFilename(d.fs, d.dirname, fileTypeTable, m.FileNum), sst.ReaderOptions{FileNum: m.FileNum, Comparer: d.cmp})
	if err != nil {
		return ""
	}
	defer r.Close()
	return mismatch(m, r.Properties())
}

// mismatch says how properties p contradict the MANIFEST's record m, or "".
func mismatch(m *manifest.FileMetadata, p *sst.Properties) string {
	switch {
	case m.Identity != (base.TableIdentity{}) && p.Identity != m.Identity:
		return fmt.Sprintf("its identity is %v, the MANIFEST's %v", p.Identity, m.Identity)
	case !bytes.Equal(p.SmallestKey.UserKey, m.Smallest.UserKey) || !bytes.Equal(p.LargestKey.UserKey, m.Largest.UserKey):
		return fmt.Sprintf("its keys span %s..%s, the MANIFEST's %s..%s", base.HexKey(p.SmallestKey.UserKey), base.HexKey(p.LargestKey.UserKey),
			base.HexKey(m.Smallest.UserKey), base.HexKey(m.Largest.UserKey))
	case m.GlobalSeqNum == 0 && (p.SmallestSeq != m.SmallestSeq || p.LargestSeq != m.LargestSeq):
		return fmt.Sprintf("its seqnums are %d..%d, the MANIFEST's %d..%d", p.SmallestSeq, p.LargestSeq, m.SmallestSeq, m.LargestSeq)
	}
	return ""
}

// notTheTable records that the file under table nf's number is another
// table: nf is lost whole (a backup could have healed it), the file is set
// aside.
func (rp *repairer) notTheTable(nf manifest.NewFile, why string) error {
	m := nf.Meta
	why = "the file is not the table the MANIFEST names: " + why
	rp.report.Tables = append(rp.report.Tables, RepairedTable{FileNum: m.FileNum, Level: nf.Level, Problem: why, EntriesBefore: m.NumEntries})
	rp.report.EntriesLost += m.NumEntries
	rp.lose(m.FileNum, m.Smallest.UserKey, m.Largest.UserKey, why)
	rp.changed = true
	return rp.setAsideFile(rp.baseName(fileTypeTable, m.FileNum), false)
}

// heal replaces damaged or missing table nf by the verified copy the
// backup in Options.HealFrom holds, if any, and reports whether it did.
// A copy that fails is as good as none: salvage follows.
func (rp *repairer) heal(nf manifest.NewFile, problem error) bool {
	d := rp.d
	if d.opts.HealFrom == "" {
		return false
	}
	if err := healTable(d.fs, d.dirname, d.dataDir, d.opts.HealFrom, nf.Meta, d.cmp); err != nil {
		d.log.Errorf("repair: healing table %06d: %v", nf.Meta.FileNum, err)
		return false
	}
	rp.report.Tables = append(rp.report.Tables, RepairedTable{FileNum: nf.Meta.FileNum, Level: nf.Level, Problem: problem.Error(), Healed: true})
	rp.files = append(rp.files, manifest.NewFile{Level: rp.level(nf.Level), Meta: nf.Meta})
	return true
}

// checkUnknown checks a table no verified MANIFEST record names (rebuilt
// MANIFEST only): it goes into L0 if it verifies, else it is salvaged. An
// ingested table is set aside: its seqnum was in the lost record.
func (rp *repairer) checkUnknown(num uint64) error {
	r, err := rp.verifyTable(num, nil)
	if err != nil {
		if !base.IsCorruption(err) {
			return fmt.Errorf("vigil: repair: checking table %06d: %w", num, err)
		}
		return rp.salvage(num, nil, 0, err)
	}
	defer r.Close()
	p := r.Properties()
	switch {
	case p.External:
		return rp.setAside(num, p, "an ingested table whose seqnum only the lost MANIFEST record held")
	case p.Identity != (base.TableIdentity{}) && (p.Identity.DB != rp.d.vs.dbID || p.Identity.FileNum != num):
		return rp.setAside(num, p, fmt.Sprintf("a table of another DB or number (identity %v)", p.Identity))
	case p.NumEntries == 0 && p.NumRangeDels == 0:
		return nil // holds nothing; Open removes it
	}
	m := &manifest.FileMetadata{FileNum: num, Size: r.Size(), Smallest: p.SmallestKey.Clone(), Largest: p.LargestKey.Clone(),
		SmallestSeq: p.SmallestSeq, LargestSeq: p.LargestSeq, NumEntries: p.NumEntries, NumDeletions: p.NumDeletions,
		NumRangeDels: p.NumRangeDels, FileChecksum: p.FileChecksum, ChecksumType: r.ChecksumType(), Identity: p.Identity}
	rp.files = append(rp.files, manifest.NewFile{Level: 0, Meta: m})
	return nil
}

// setAside moves a table that verifies but cannot be placed to lost/.
func (rp *repairer) setAside(num uint64, p *sst.Properties, why string) error {
	rp.report.Tables = append(rp.report.Tables, RepairedTable{FileNum: num, Problem: why, EntriesBefore: p.NumEntries})
	rp.report.EntriesLost += p.NumEntries
	rp.lose(num, p.SmallestKey.UserKey, p.LargestKey.UserKey, why)
	rp.changed = true
	return rp.setAsideFile(rp.baseName(fileTypeTable, num), false)
}

// baseName is the name of file num of type ft inside the DB directory.
func (rp *repairer) baseName(ft fileType, num uint64) string {
	d := rp.d
	return d.fs.PathBase(makeFilename(d.fs, d.dirname, ft, num))
}
