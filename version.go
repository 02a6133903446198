package vigil

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// fileMetadata describes one live SST file. Immutable once the file is in a
// version, except for refs (atomic) and compacting (guarded by DB.mu).
//
// Bounds: smallest and largest are internal keys covering every point key and
// range tombstone of the file. A range tombstone's end is exclusive, so a
// file whose largest bound comes from one has largest = end#SeqNumMax,RANGEDEL,
// which sorts before every real entry of the user key end.
type fileMetadata struct {
	fileNum                   uint64
	size                      uint64
	smallest, largest         base.InternalKey
	smallestSeq, largestSeq   uint64
	numEntries, numDeletions  uint64
	numRangeDels              uint64
	fileChecksum              uint64
	checksumType              checksum.Type
	refs                      atomic.Int32 // versions holding the file
	compacting                bool         // an ongoing compaction reads it (DB.mu)
	markedForCompactionReason string
}

// largestIsExclusive reports whether the file's largest bound is a range
// tombstone's exclusive end.
func (m *fileMetadata) largestIsExclusive() bool {
	return m.largest.Kind() == base.KindRangeDelete && m.largest.SeqNum() == base.SeqNumMax
}

// overlapsUserRange reports whether the file may hold keys in [start, end]
// (end inclusive; nil = unbounded).
func (m *fileMetadata) overlapsUserRange(start, end []byte) bool {
	if end != nil && bytes.Compare(m.smallest.UserKey, end) > 0 {
		return false
	}
	if start != nil {
		c := bytes.Compare(m.largest.UserKey, start)
		if c < 0 || (c == 0 && m.largestIsExclusive()) {
			return false
		}
	}
	return true
}

// containsUserKey reports whether key lies within the file's bounds.
func (m *fileMetadata) containsUserKey(key []byte) bool {
	return m.overlapsUserRange(key, key)
}

func (m *fileMetadata) String() string {
	return fmt.Sprintf("%06d:[%s-%s]", m.fileNum, m.smallest, m.largest)
}

// version is an immutable snapshot of the LSM shape: the files of each
// level. L0 files may overlap and are ordered newest first (by largest
// seqnum); files of L1..L6 do not overlap and are ordered by key.
//
// Reference counting: the DB's current version holds one reference, and each
// read state using it holds one. When the count drops to zero the version's
// files are unreferenced; a file no version references is obsolete and is
// deleted.
type version struct {
	levels [numLevels][]*fileMetadata
	refs   atomic.Int32
	// onObsolete is called with files whose refcount reached zero when this
	// version is released.
	onObsolete func([]*fileMetadata)
}

func (v *version) ref() { v.refs.Add(1) }

func (v *version) unref() {
	if v.refs.Add(-1) != 0 {
		return
	}
	var obsolete []*fileMetadata
	for _, files := range v.levels {
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

// numFiles returns the total number of files.
func (v *version) numFiles() int {
	n := 0
	for _, l := range v.levels {
		n += len(l)
	}
	return n
}

// levelSize returns the total bytes of a level.
func (v *version) levelSize(level int) uint64 {
	var s uint64
	for _, f := range v.levels[level] {
		s += f.size
	}
	return s
}

// overlaps returns the files of level that may hold keys in [start, end]
// (inclusive, nil = unbounded). For L1+ the result is a contiguous run.
func (v *version) overlaps(level int, start, end []byte) []*fileMetadata {
	var out []*fileMetadata
	for _, f := range v.levels[level] {
		if f.overlapsUserRange(start, end) {
			out = append(out, f)
		}
	}
	return out
}

// findFile returns the index of the first file in a sorted level (L1+) whose
// largest bound is >= key, i.e. the only file that can contain key.
func findFile(files []*fileMetadata, key []byte) int {
	return sort.Search(len(files), func(i int) bool {
		c := bytes.Compare(files[i].largest.UserKey, key)
		return c > 0 || (c == 0 && !files[i].largestIsExclusive())
	})
}

// checkOrdering verifies the level invariants; a violation means a bug or a
// corrupt MANIFEST, and is reported as corruption.
func (v *version) checkOrdering() error {
	for i := 1; i < len(v.levels[0]); i++ {
		a, b := v.levels[0][i-1], v.levels[0][i]
		if a.largestSeq < b.largestSeq {
			return base.CorruptionErrorf("L0 files out of seqnum order: %06d (largest seq %d) before %06d (largest seq %d)",
				a.fileNum, a.largestSeq, b.fileNum, b.largestSeq)
		}
	}
	for level := 1; level < numLevels; level++ {
		files := v.levels[level]
		for i, f := range files {
			if base.CompareInternal(f.smallest, f.largest) > 0 {
				return base.CorruptionErrorf("L%d file %06d: smallest %s > largest %s", level, f.fileNum, f.smallest, f.largest)
			}
			if i == 0 {
				continue
			}
			p := files[i-1]
			c := bytes.Compare(p.largest.UserKey, f.smallest.UserKey)
			if c > 0 || (c == 0 && !p.largestIsExclusive()) {
				return base.CorruptionErrorf("L%d files overlap: %s and %s", level, p, f)
			}
		}
	}
	return nil
}

// versionBuilder applies edits to a base version.
type versionBuilder struct {
	levels [numLevels]map[uint64]*fileMetadata
}

func newVersionBuilder(v *version) *versionBuilder {
	b := &versionBuilder{}
	for l := range b.levels {
		b.levels[l] = make(map[uint64]*fileMetadata)
		if v != nil {
			for _, f := range v.levels[l] {
				b.levels[l][f.fileNum] = f
			}
		}
	}
	return b
}

// apply folds an edit in. Deleting a file that is not there, or adding one
// twice, is corruption (of the MANIFEST or of our own bookkeeping).
func (b *versionBuilder) apply(e *versionEdit) error {
	for _, d := range e.deleted {
		if _, ok := b.levels[d.level][d.fileNum]; !ok {
			return base.CorruptionErrorf("version edit deletes file %06d from L%d, which does not hold it", d.fileNum, d.level)
		}
		delete(b.levels[d.level], d.fileNum)
	}
	for _, a := range e.added {
		for l := range b.levels {
			if _, ok := b.levels[l][a.meta.fileNum]; ok {
				return base.CorruptionErrorf("version edit adds file %06d to L%d, but L%d already holds it", a.meta.fileNum, a.level, l)
			}
		}
		b.levels[a.level][a.meta.fileNum] = a.meta
	}
	return nil
}

// build produces the new version, sorted, and checks its invariants. Each
// file gains a reference from the new version.
func (b *versionBuilder) build(onObsolete func([]*fileMetadata)) (*version, error) {
	v := &version{onObsolete: onObsolete}
	for l := range b.levels {
		files := make([]*fileMetadata, 0, len(b.levels[l]))
		for _, f := range b.levels[l] {
			files = append(files, f)
		}
		if l == 0 {
			sort.Slice(files, func(i, j int) bool {
				if files[i].largestSeq != files[j].largestSeq {
					return files[i].largestSeq > files[j].largestSeq
				}
				return files[i].fileNum > files[j].fileNum
			})
		} else {
			sort.Slice(files, func(i, j int) bool {
				return base.CompareInternal(files[i].smallest, files[j].smallest) < 0
			})
		}
		v.levels[l] = files
	}
	if err := v.checkOrdering(); err != nil {
		return nil, err
	}
	for _, files := range v.levels {
		for _, f := range files {
			f.refs.Add(1)
		}
	}
	return v, nil
}

// String renders the LSM shape for the LOG and debugging.
func (v *version) String() string {
	var b strings.Builder
	for l, files := range v.levels {
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
