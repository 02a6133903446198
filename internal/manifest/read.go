package manifest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/wal"
)

// The one reader of CURRENT and the MANIFEST: Open (through the root
// package's version set), backups and tools replay a DB's LSM shape here,
// with the checks every one of them needs, and differ only in how strict
// they are about a torn last edit (the recovery mode).

// CurrentName is the name of the file that names the live MANIFEST.
const CurrentName = "CURRENT"

// maxCurrentSize bounds what is read of CURRENT ("MANIFEST-" and a number).
const maxCurrentSize = 4096

// ParseManifestName returns the number of a MANIFEST's file name,
// "MANIFEST-" and decimal digits.
func ParseManifestName(name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, "MANIFEST-")
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// ReadCurrent reads dir's CURRENT and returns the name and number of the
// MANIFEST it names. CURRENT must hold exactly that name and a newline;
// anything else is ErrCorruption.
func ReadCurrent(fs vfs.FS, dir string) (name string, num uint64, err error) {
	f, err := fs.Open(fs.PathJoin(dir, CurrentName))
	if err != nil {
		return "", 0, fmt.Errorf("opening CURRENT: %w", err)
	}
	content, err := io.ReadAll(io.LimitReader(f, maxCurrentSize))
	f.Close()
	if err != nil {
		return "", 0, fmt.Errorf("reading CURRENT: %w", err)
	}
	name, ok := strings.CutSuffix(string(content), "\n")
	if num, valid := ParseManifestName(name); ok && valid {
		return name, num, nil
	}
	return "", 0, base.CorruptionErrorf("CURRENT: %q does not name a MANIFEST", content)
}

// State is the LSM shape a MANIFEST records.
type State struct {
	// Version holds the live tables (with one reference, the caller's).
	Version *Version
	// LogNumber, NextFileNum and LastSeq are the last values the edits
	// set; DBID is the DB's id (zero for a DB from before ids).
	LogNumber, NextFileNum, LastSeq uint64
	DBID                            [16]byte
	// FormatVersion is the DB's format version (1 if the MANIFEST does
	// not record one).
	FormatVersion uint64
	// Merger is the merge operator's name the DB records ("": none).
	Merger string
	// Comparer is the comparer's name the DB records.
	Comparer string
	// ManifestName and ManifestNum name the MANIFEST CURRENT named.
	ManifestName string
	ManifestNum  uint64
	// Stats are the record reader's: TailDroppedBytes > 0 says a torn
	// last edit was dropped (in a mode that tolerates one).
	Stats wal.ReaderStats
}

// Load replays the MANIFEST that dir's CURRENT names, in recovery mode
// mode, into a State. It checks what every reader relies on: CURRENT
// names an existing MANIFEST whose header carries the same number (a
// missing one is damage, not a crash: CURRENT is replaced only after the
// MANIFEST it names is synced), every record decodes, the first record
// names the comparer (which must be cmp's: another is ErrInvalidArgument
// naming both) and the next file number, and every live file is numbered
// below it. cmp is the DB's comparer, resolved (nil: the default;
// AnyComparer: whatever the DB records, see AnyComparer). onObsolete is
// handed to the version's builder (nil: none).
func Load(fs vfs.FS, dir string, mode wal.RecoveryMode, cmp *base.Comparer, onObsolete func([]*FileMetadata)) (*State, error) {
	if cmp == nil {
		cmp = base.DefaultComparer
	}
	name, num, err := ReadCurrent(fs, dir)
	if err != nil {
		return nil, err
	}
	path := fs.PathJoin(dir, name)
	mf, err := fs.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, base.MarkCorruption(fmt.Errorf("CURRENT names %s, which does not exist: %w", name, err))
		}
		return nil, fmt.Errorf("opening %s named by CURRENT: %w", name, err)
	}
	defer mf.Close()
	r, err := wal.NewReader(mf, path, mode)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	// The MANIFEST's header carries its own number (RocksDB checks the
	// same): a CURRENT pointing at the wrong file, or a file renamed.
	if err := r.CheckLogNumber(num); err != nil {
		return nil, fmt.Errorf("reading %s named by CURRENT: %w", name, err)
	}
	st := &State{ManifestName: name, ManifestNum: num}
	if err := st.replay(r, path, cmp, onObsolete); err != nil {
		return nil, err
	}
	st.Stats = r.Stats()
	return st, nil
}

// ReadVersion is Load's version alone, for readers that only need the live
// tables (a backup reading a checkpoint it made), under AnyComparer.
func ReadVersion(fs vfs.FS, dir string, mode wal.RecoveryMode) (*Version, error) {
	st, err := Load(fs, dir, mode, AnyComparer, nil)
	if err != nil {
		return nil, err
	}
	return st.Version, nil
}

// replay applies every edit r reads to st.
func (st *State) replay(r *wal.Reader, path string, cmp *base.Comparer, onObsolete func([]*FileMetadata)) error {
	name := st.ManifestName
	b := NewBuilder(cmp, nil)
	var haveNext, haveComparer bool
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		e, err := DecodeVersionEdit(rec, path)
		if err != nil {
			return err
		}
		if e.Comparer != "" {
			if e.Comparer != cmp.Name && cmp != AnyComparer {
				return base.InvalidArgumentErrorf("%s: the DB's keys are ordered by comparer %q, but it was opened with comparer %q", name, e.Comparer, cmp.Name)
			}
			st.Comparer, haveComparer = e.Comparer, true
		}
		if err := b.Apply(e); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if e.HasLogNumber {
			st.LogNumber = e.LogNumber
		}
		if e.HasNextFileNum {
			st.NextFileNum, haveNext = e.NextFileNum, true
		}
		if e.HasLastSeq {
			st.LastSeq = e.LastSeq
		}
		if e.HasDBID {
			st.DBID = e.DBID
		}
		if e.FormatVersion != 0 {
			st.FormatVersion = e.FormatVersion
		}
		if e.Merger != "" {
			st.Merger = e.Merger
		}
	}
	if st.FormatVersion == 0 {
		st.FormatVersion = 1
	}
	if !haveNext || !haveComparer {
		return base.CorruptionErrorf("%s: no complete initial record (next file number or comparer missing)", name)
	}
	v, err := b.Build(onObsolete)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, files := range v.Levels {
		for _, f := range files {
			if f.FileNum >= st.NextFileNum {
				v.Release()
				return base.CorruptionErrorf("%s: file %06d is not below the next file number %d", name, f.FileNum, st.NextFileNum)
			}
		}
	}
	v.Ref()
	st.Version = v
	return nil
}
