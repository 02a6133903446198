package manifest

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/sst"
)

// FileMetadata describes one live SST file. Immutable once the file is in a
// version, except for refs (atomic) and compacting (guarded by DB.mu).
//
// Bounds: smallest and largest are internal keys covering every point key and
// range tombstone of the file. A range tombstone's end is exclusive, so a
// file whose largest bound comes from one has largest = end#SeqNumMax,RANGEDEL,
// which sorts before every real entry of the user key end.
type FileMetadata struct {
	FileNum                  uint64
	Size                     uint64
	Smallest, Largest        base.InternalKey
	SmallestSeq, LargestSeq  uint64
	NumEntries, NumDeletions uint64
	NumRangeDels             uint64
	// FileChecksum is the whole-file checksum of ChecksumType, recorded
	// when the table was written and checked by DB.Verify. ChecksumType is
	// the table's (resolved, as its writer reports it in sst.Meta); it is
	// stored as its Code, so a zero value is recorded as XXH3: metadata of
	// a table without checksums must say checksum.None.
	FileChecksum uint64
	ChecksumType checksum.Type
	// GlobalSeqNum is 0 for a table the DB wrote; for an ingested
	// (external) table it is the sequence number of every entry, which the
	// file stores as 0 (see package sst, "External tables"): readers open
	// it with sst.ReaderOptions.GlobalSeqNum. Then SmallestSeq, LargestSeq
	// and the bounds' seqnums equal it (the exclusive tombstone-end bound
	// keeps SeqNumMax).
	GlobalSeqNum uint64
	// Identity is the identity the table's properties hold (see
	// base.TableIdentity), recorded when it was written or ingested;
	// opening the table checks it. Zero for tables written before
	// identities existed.
	Identity base.TableIdentity
	refs     atomic.Int32 // versions holding the file
	// damaged is set when the scrubber found the file damaged (in memory
	// only: the next pass after a restart finds it again).
	damaged atomic.Bool
	// seeks counts the seeks charged to the file (ChargeSeek; in memory
	// only, from 0 at every Open).
	seeks atomic.Int64
}

// ChargeSeek counts a seek that read this file and another one below it
// (read amplification a compaction of this file would remove), and
// reports whether the count just reached allowed: the file is then due for
// a seek compaction. It reports true once per file and level (see
// ResetSeeks); past allowed it only reads the count, so a hot table's
// readers do not keep writing its cache line. Safe for concurrent use
// (readers charge from their own goroutines).
func (m *FileMetadata) ChargeSeek(allowed int64) bool {
	if m.seeks.Load() >= allowed {
		return false
	}
	return m.seeks.Add(1) == allowed
}

// ResetSeeks starts the file's seek count again, for the level a trivial
// move put it in.
func (m *FileMetadata) ResetSeeks() { m.seeks.Store(0) }

// Seeks returns the file's seek count (ChargeSeek).
func (m *FileMetadata) Seeks() int64 { return m.seeks.Load() }

// MarkDamaged records that the file failed a check: compactions no longer
// take it as an input.
func (m *FileMetadata) MarkDamaged() { m.damaged.Store(true) }

// ClearDamaged undoes MarkDamaged: the file was replaced by a verified
// copy.
func (m *FileMetadata) ClearDamaged() { m.damaged.Store(false) }

// Damaged reports whether MarkDamaged was called.
func (m *FileMetadata) Damaged() bool { return m.damaged.Load() }

// Expected is what the MANIFEST records of the file, for opening it with
// sst.ReaderOptions.Expect: a table that is not this one (another DB's,
// another number's, another state's, or merely the same size) then fails
// to open with ErrCorruption naming both.
func (m *FileMetadata) Expected() *sst.Expected {
	return &sst.Expected{Size: m.Size, Identity: m.Identity, FileChecksum: m.FileChecksum, ChecksumType: m.ChecksumType}
}

// LargestIsExclusive reports whether the file's largest bound is a range
// tombstone's exclusive end.
func (m *FileMetadata) LargestIsExclusive() bool {
	return m.Largest.IsExclusiveSentinel()
}

// OverlapsUserRange reports whether the file may hold keys in [start, end]
// (end inclusive; nil = unbounded) under c, the DB's (resolved) comparer.
func (m *FileMetadata) OverlapsUserRange(c *base.Comparer, start, end []byte) bool {
	if c.IsBytewise() {
		// Every Get asks every level: bytes.Compare inline.
		if end != nil && bytes.Compare(m.Smallest.UserKey, end) > 0 {
			return false
		}
		if start != nil {
			r := bytes.Compare(m.Largest.UserKey, start)
			if r < 0 || (r == 0 && m.LargestIsExclusive()) {
				return false
			}
		}
		return true
	}
	if end != nil && c.Cmp(m.Smallest.UserKey, end) > 0 {
		return false
	}
	if start != nil {
		r := c.Cmp(m.Largest.UserKey, start)
		if r < 0 || (r == 0 && m.LargestIsExclusive()) {
			return false
		}
	}
	return true
}

// ContainsUserKey reports whether key lies within the file's bounds under c.
func (m *FileMetadata) ContainsUserKey(c *base.Comparer, key []byte) bool {
	return m.OverlapsUserRange(c, key, key)
}

func (m *FileMetadata) String() string {
	return fmt.Sprintf("%06d:[%s-%s]", m.FileNum, m.Smallest, m.Largest)
}

// Version is an immutable snapshot of the LSM shape: the files of each
// level. L0 files may overlap and are ordered newest first (by largest
// seqnum); files of L1..L6 do not overlap and are ordered by key.
//
// Reference counting: the DB's current version holds one reference, and each
// read state using it holds one. When the count drops to zero the version's
// files are unreferenced; a file no version references is obsolete and is
// deleted.
type Version struct {
	// Levels holds the files of L0..L6.
	Levels [NumLevels][]*FileMetadata
	// Cmp is the order of the files' keys (the builder's). Under
	// AnyComparer the levels L1+ are in file-number order, not key order.
	Cmp  *base.Comparer
	refs atomic.Int32
	// onObsolete is called with files whose refcount reached zero when this
	// version is released.
	onObsolete func([]*FileMetadata)
}

// Ref takes a reference.
func (v *Version) Ref() { v.refs.Add(1) }

// Unref drops a reference; at zero the version's files lose theirs, and
// files no version references any more are handed to onObsolete.
func (v *Version) Unref() {
	if v.refs.Add(-1) != 0 {
		return
	}
	var obsolete []*FileMetadata
	for _, files := range v.Levels {
		for _, f := range files {
			if f.refs.Add(-1) == 0 {
				obsolete = append(obsolete, f)
			}
		}
	}
	if len(obsolete) > 0 && v.onObsolete != nil {
		v.onObsolete(obsolete)
	}
}

// NumFiles returns the total number of files.
func (v *Version) NumFiles() int {
	n := 0
	for _, l := range v.Levels {
		n += len(l)
	}
	return n
}

// LevelSize returns the total bytes of a level.
func (v *Version) LevelSize(level int) uint64 {
	var s uint64
	for _, f := range v.Levels[level] {
		s += f.Size
	}
	return s
}

// Overlaps returns the files of level that may hold keys in [start, end]
// (inclusive, nil = unbounded). For L1+ the result is a contiguous run.
func (v *Version) Overlaps(level int, start, end []byte) []*FileMetadata {
	var out []*FileMetadata
	for _, f := range v.Levels[level] {
		if f.OverlapsUserRange(v.Cmp, start, end) {
			out = append(out, f)
		}
	}
	return out
}

// FindFile returns the index of the first file in a sorted level (L1+) whose
// largest bound is >= key under c, i.e. the only file that can contain key.
func FindFile(c *base.Comparer, files []*FileMetadata, key []byte) int {
	if c.IsBytewise() {
		// Every Get searches every level: bytes.Compare inline
		// (Comparer.Cmp is a call).
		return sort.Search(len(files), func(i int) bool {
			r := bytes.Compare(files[i].Largest.UserKey, key)
			return r > 0 || (r == 0 && !files[i].LargestIsExclusive())
		})
	}
	return sort.Search(len(files), func(i int) bool {
		r := c.Cmp(files[i].Largest.UserKey, key)
		return r > 0 || (r == 0 && !files[i].LargestIsExclusive())
	})
}

// CheckOrdering verifies the level invariants; a violation means a bug or a
// corrupt MANIFEST, and is reported as corruption.
func (v *Version) CheckOrdering() error {
	for i := 1; i < len(v.Levels[0]); i++ {
		a, b := v.Levels[0][i-1], v.Levels[0][i]
		if a.LargestSeq < b.LargestSeq {
			return base.CorruptionErrorf("L0 files out of seqnum order: %06d (largest seq %d) before %06d (largest seq %d)",
				a.FileNum, a.LargestSeq, b.FileNum, b.LargestSeq)
		}
	}
	if v.Cmp == AnyComparer {
		return nil // no order to check the key ranges in
	}
	for level := 1; level < NumLevels; level++ {
		files := v.Levels[level]
		for i, f := range files {
			if v.Cmp.CompareInternal(f.Smallest, f.Largest) > 0 {
				return base.CorruptionErrorf("L%d file %06d: smallest %s > largest %s", level, f.FileNum, f.Smallest, f.Largest)
			}
			if i == 0 {
				continue
			}
			p := files[i-1]
			c := v.Cmp.Cmp(p.Largest.UserKey, f.Smallest.UserKey)
			if c > 0 || (c == 0 && !p.LargestIsExclusive()) {
				return base.CorruptionErrorf("L%d files overlap: %s and %s", level, p, f)
			}
		}
	}
	return nil
}

// Builder applies edits to a base version.
type Builder struct {
	cmp    *base.Comparer
	levels [NumLevels]map[uint64]*FileMetadata
}

// AnyComparer, given to NewBuilder or Load, builds versions without a key
// order: for readers that need the set of live tables and not their order
// (a backup), whatever comparer the DB has. Their levels L1+ are in
// file-number order and their key ranges unchecked: never read keys
// through such a version.
var AnyComparer = &base.Comparer{Compare: func(a, b []byte) int { panic("manifest: AnyComparer orders nothing") }, Name: "(any)"}

// NewBuilder returns a builder of versions in c's key order (resolved; nil:
// the default), starting from v (nil: empty).
func NewBuilder(c *base.Comparer, v *Version) *Builder {
	if c == nil {
		c = base.DefaultComparer
	}
	b := &Builder{cmp: c}
	for l := range b.levels {
		b.levels[l] = make(map[uint64]*FileMetadata)
		if v != nil {
			for _, f := range v.Levels[l] {
				b.levels[l][f.FileNum] = f
			}
		}
	}
	return b
}

// Apply folds an edit in. Deleting a file that is not there, or adding one
// twice, is corruption (of the MANIFEST or of our own bookkeeping).
func (b *Builder) Apply(e *VersionEdit) error {
	for _, d := range e.Deleted {
		if _, ok := b.levels[d.Level][d.FileNum]; !ok {
			return base.CorruptionErrorf("version edit deletes file %06d from L%d, which does not hold it", d.FileNum, d.Level)
		}
		delete(b.levels[d.Level], d.FileNum)
	}
	for _, a := range e.Added {
		for l := range b.levels {
			if _, ok := b.levels[l][a.Meta.FileNum]; ok {
				return base.CorruptionErrorf("version edit adds file %06d to L%d, but L%d already holds it", a.Meta.FileNum, a.Level, l)
			}
		}
		b.levels[a.Level][a.Meta.FileNum] = a.Meta
	}
	return nil
}

// Build produces the new version, sorted, and checks its invariants. Each
// file gains a reference from the new version.
func (b *Builder) Build(onObsolete func([]*FileMetadata)) (*Version, error) {
	v := &Version{Cmp: b.cmp, onObsolete: onObsolete}
	for l := range b.levels {
		files := make([]*FileMetadata, 0, len(b.levels[l]))
		for _, f := range b.levels[l] {
			files = append(files, f)
		}
		if l == 0 {
			sort.Slice(files, func(i, j int) bool {
				if files[i].LargestSeq != files[j].LargestSeq {
					return files[i].LargestSeq > files[j].LargestSeq
				}
				return files[i].FileNum > files[j].FileNum
			})
		} else if b.cmp == AnyComparer {
			sort.Slice(files, func(i, j int) bool { return files[i].FileNum < files[j].FileNum })
		} else {
			sort.Slice(files, func(i, j int) bool {
				return b.cmp.CompareInternal(files[i].Smallest, files[j].Smallest) < 0
			})
		}
		v.Levels[l] = files
	}
	if err := v.CheckOrdering(); err != nil {
		return nil, err
	}
	for _, files := range v.Levels {
		for _, f := range files {
			f.refs.Add(1)
		}
	}
	return v, nil
}

// Release drops the file references of a version that was built but never
// installed, without reporting its files obsolete.
func (v *Version) Release() {
	for _, files := range v.Levels {
		for _, f := range files {
			f.refs.Add(-1)
		}
	}
}

// String renders the LSM shape for the LOG and debugging.
func (v *Version) String() string {
	var b strings.Builder
	for l, files := range v.Levels {
		if len(files) == 0 {
			continue
		}
		fmt.Fprintf(&b, "L%d:", l)
		for _, f := range files {
			fmt.Fprintf(&b, " %s", f)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
