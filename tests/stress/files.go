package stress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/wal"
)

// Bit flips in files (--corrupt-files).
//
// A flip models a bad disk sector or a bad write: one bit of one file of
// the closed DB, between a close (clean, failed, or a crash) and the next
// Open. At a share of the reopen points (FileFlipPct, from the seed) the
// runner picks, from the seed, a kind among those present (WAL *.log,
// MANIFEST-*, CURRENT), a non-empty file of that kind, a byte and a bit,
// and flips it. Then it opens the DB as usual, and:
//
//   - Open fails with ErrCorruption: detected. The bit is flipped back and
//     the DB opened again, which must succeed and pass the usual
//     verification. (A strict WAL recovery mode refuses the torn tail of a
//     crash anyway; when it refuses the restored files too, the runner
//     counts the refusal as usual and judges the flip under point-in-time
//     recovery, as it recovers then.)
//   - Open fails with anything else, or fails again after the bit was
//     flipped back: a divergence.
//   - Open succeeds: the DB is verified with the runner's usual rule (the
//     crash checker: every acknowledged write present, the rest a prefix of
//     the commit order). If it passes, the flip had no effect (it hit an
//     obsolete file, or bytes a crash could have torn anyway and whose loss
//     lost nothing acknowledged). If not, the flip was missed — a
//     divergence reported with the seed, the file, the offset and the bit —
//     with two documented exceptions:
//   - tail: the flip is in the last record of the newest WAL (the highest
//     numbered one holding a record: a spare WAL created ahead of time is
//     not in the chain yet) of a DB that was not closed cleanly (or in the
//     bytes after that record), and
//     recovery dropped that record (Metrics counts dropped bytes): damage
//     there is indistinguishable from a crash that cut the record. The
//     state must then pass the check with only that record's batch (the
//     operation it identifies by its keys and versions) excused from its
//     synced acknowledgement.
//   - skip-any: WALSkipAnyCorrupted recovery skipped records (Metrics
//     counts them) of a flipped WAL: that mode may drop records, so the
//     state need only hold, for every key, its state at the last
//     verification or one some write since left.
//
// --corrupt-files forces a checksum type other than none: without one a
// flipped WAL or MANIFEST payload goes unnoticed by design (see package
// wal). In kill mode the parent flips a bit after each kill, before its own
// Open; children never flip (a kill could come between a flip and its
// undo).

// fileKind is a kind of DB file the runner flips bits in.
type fileKind int

const (
	fileWAL fileKind = iota
	fileManifest
	fileCurrent
	numFileKinds
)

func (k fileKind) String() string {
	switch k {
	case fileWAL:
		return "WAL"
	case fileManifest:
		return "MANIFEST"
	case fileCurrent:
		return "CURRENT"
	}
	return fmt.Sprintf("fileKind(%d)", int(k))
}

// classifyFile returns the kind of a file of a DB directory (its base
// name), and the number of a WAL.
func classifyFile(name string) (fileKind, uint64, bool) {
	switch {
	case name == "CURRENT":
		return fileCurrent, 0, true
	case strings.HasPrefix(name, "MANIFEST-"):
		n, err := strconv.ParseUint(name[len("MANIFEST-"):], 10, 64)
		return fileManifest, n, err == nil
	case strings.HasSuffix(name, ".log"):
		n, err := strconv.ParseUint(strings.TrimSuffix(name, ".log"), 10, 64)
		return fileWAL, n, err == nil
	}
	return 0, 0, false
}

// FileFlipCounts are the outcomes of the flips in the files of one kind.
type FileFlipCounts struct {
	Injected int64
	// Detected: Open failed with ErrCorruption.
	Detected int64
	// NoEffect: Open succeeded and the DB held every acknowledged write.
	NoEffect int64
	// Tail: Open succeeded without the last record of the newest WAL,
	// flipped after a crash: indistinguishable from a crash-cut tail.
	Tail int64
	// SkipAny: WALSkipAnyCorrupted recovery skipped damaged records,
	// acknowledged writes among them: allowed in that mode.
	SkipAny int64
	// Missed: Open succeeded but an acknowledged write was missing or a
	// value wrong (fails the run).
	Missed int64
	// OpenErrors: Open failed with an error other than ErrCorruption, or
	// failed again after the bit was flipped back (fails the run).
	OpenErrors int64
}

func (c *FileFlipCounts) add(o FileFlipCounts) {
	c.Injected += o.Injected
	c.Detected += o.Detected
	c.NoEffect += o.NoEffect
	c.Tail += o.Tail
	c.SkipAny += o.SkipAny
	c.Missed += o.Missed
	c.OpenErrors += o.OpenErrors
}

// FileFlipStats counts the flips of --corrupt-files per file kind.
type FileFlipStats struct {
	WAL, Manifest, Current FileFlipCounts
}

func (s *FileFlipStats) of(k fileKind) *FileFlipCounts {
	switch k {
	case fileWAL:
		return &s.WAL
	case fileManifest:
		return &s.Manifest
	}
	return &s.Current
}

// Total sums the kinds.
func (s FileFlipStats) Total() FileFlipCounts {
	var t FileFlipCounts
	t.add(s.WAL)
	t.add(s.Manifest)
	t.add(s.Current)
	return t
}

// fileOutcome is what became of one flip.
type fileOutcome int

const (
	fileDetected fileOutcome = iota
	fileNoEffect
	fileTail
	fileSkipAny
	fileMissed
	fileOpenError
)

var fileOutcomeNames = [...]string{"detected at open", "no effect", "tail (indistinguishable from a crash)", "dropped by skip-any recovery", "MISSED", "open error"}

func (o fileOutcome) String() string { return fileOutcomeNames[o] }

// fileFlipper decides, makes and counts the flips of a run.
//
// Concurrency: rng is used by one event at a time (the runner's events
// hold eventMu and the gate; the kill parent is one goroutine); mu guards
// stats and recent, which progress lines read concurrently.
type fileFlipper struct {
	pct int
	rng *rand.Rand

	mu     sync.Mutex
	stats  FileFlipStats
	recent []string
}

func newFileFlipper(seed uint64, pct int) *fileFlipper {
	return &fileFlipper{pct: pct, rng: rand.New(rand.NewPCG(seed, 0xf11ef11e))}
}

// due draws whether this reopen point gets a flip.
func (f *fileFlipper) due() bool { return f != nil && f.rng.IntN(100) < f.pct }

func (f *fileFlipper) snapshot() FileFlipStats {
	if f == nil {
		return FileFlipStats{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// note remembers a flip's description (mu held).
func (f *fileFlipper) note(s string) {
	if len(f.recent) == 6 {
		f.recent = append(f.recent[:0], f.recent[1:]...)
	}
	f.recent = append(f.recent, s)
}

// context describes the last flips, for a divergence report.
func (f *fileFlipper) context() string {
	if f == nil {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.recent) == 0 {
		return ""
	}
	return "last file bit flips before this:\n  " + strings.Join(f.recent, "\n  ")
}

// record files the outcome of a flip.
func (f *fileFlipper) record(ff *fileFlip, o fileOutcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.stats.of(ff.kind)
	c.Injected++
	switch o {
	case fileDetected:
		c.Detected++
	case fileNoEffect:
		c.NoEffect++
	case fileTail:
		c.Tail++
	case fileSkipAny:
		c.SkipAny++
	case fileMissed:
		c.Missed++
	case fileOpenError:
		c.OpenErrors++
	}
	f.note(fmt.Sprintf("%s -> %s", ff, o))
}

// fileFlip is one bit flipped in a file of a closed DB.
type fileFlip struct {
	fs   vfs.FS
	kind fileKind
	path string
	size int64
	off  int64
	bit  uint
	// at says when the flip was made, for reports.
	at string
	// clean: the DB was closed cleanly (Close returned nil).
	clean bool
	// newest: the file is the newest WAL: the highest numbered one that
	// holds a record (a spare WAL the DB created ahead of time, empty or
	// with only its file header, is not part of the chain).
	newest bool
	// tail: the newest WAL of a DB not closed cleanly, and the flip is in
	// its last record (which starts at tailFrom) or in the bytes after it.
	tail     bool
	tailFrom int64
	// tailOps matches the operation whose batch that last record holds;
	// nil if it holds none (the WAL's preamble) or none could be decoded.
	tailOps  func(*opRec) bool
	tailDesc string
	// openErr is the error of the Open that refused the flipped file.
	openErr error
}

func (ff *fileFlip) String() string {
	var b strings.Builder
	if ff.at != "" {
		fmt.Fprintf(&b, "%s: ", ff.at)
	}
	fmt.Fprintf(&b, "%s file %s: bit %d of byte %d (of %d)", ff.kind, ff.path, ff.bit, ff.off, ff.size)
	if ff.newest {
		b.WriteString(", the newest WAL")
		if !ff.clean {
			b.WriteString(", not closed cleanly")
		}
	}
	if ff.tail {
		fmt.Fprintf(&b, ", in its last record (from offset %d: %s)", ff.tailFrom, ff.tailDesc)
	}
	if ff.openErr != nil {
		fmt.Fprintf(&b, "; Open said: %v", ff.openErr)
	}
	return b.String()
}

// toggle flips the bit and syncs the file: making the flip and undoing it
// are the same operation.
func (ff *fileFlip) toggle() error {
	f, err := ff.fs.OpenReadWrite(ff.path)
	if err != nil {
		return fmt.Errorf("opening %s to flip a bit: %w", ff.path, err)
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], ff.off); err != nil {
		f.Close()
		return fmt.Errorf("reading byte %d of %s: %w", ff.off, ff.path, err)
	}
	b[0] ^= 1 << ff.bit
	if _, err := f.WriteAt(b[:], ff.off); err != nil {
		f.Close()
		return fmt.Errorf("writing byte %d of %s: %w", ff.off, ff.path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", ff.path, err)
	}
	return f.Close()
}

// flip picks a file of dir (a closed DB) and a bit from the seed, flips
// it, and returns the flip, or nil if dir has no file to flip. at says
// when, for reports.
func (f *fileFlipper) flip(fs vfs.FS, dir string, clean bool, kc keyCodec, vc valueCodec, at string) (*fileFlip, error) {
	names, err := fs.List(dir)
	if errors.Is(err, os.ErrNotExist) {
		// A kill before the first child created the DB: nothing to flip.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s to flip a bit: %w", dir, err)
	}
	sort.Strings(names)
	var cands [numFileKinds][]string
	sizes := map[string]int64{}
	var wals []walFile
	for _, n := range names {
		k, num, ok := classifyFile(n)
		if !ok {
			continue
		}
		path := fs.PathJoin(dir, n)
		st, err := fs.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("stat of %s: %w", path, err)
		}
		if k == fileWAL {
			wals = append(wals, walFile{path, num})
		}
		if st.Size() > 0 {
			sizes[path] = st.Size()
			cands[k] = append(cands[k], path)
		}
	}
	var kinds []fileKind
	for k := range cands {
		if len(cands[k]) > 0 {
			kinds = append(kinds, fileKind(k))
		}
	}
	if len(kinds) == 0 {
		return nil, nil
	}
	k := kinds[f.rng.IntN(len(kinds))]
	path := cands[k][f.rng.IntN(len(cands[k]))]
	span := sizes[path]
	if k == fileWAL {
		// A WAL keeps a zero reserve past its records (wal.Writer.SetReserve),
		// often far larger than they are: flip within what was written and
		// the first bytes of the reserve, so that flips test the records.
		if span, err = walFlipSpan(fs, path); err != nil {
			return nil, err
		}
	}
	ff := &fileFlip{fs: fs, kind: k, path: path, size: sizes[path], off: f.rng.Int64N(span),
		bit: uint(f.rng.IntN(8)), at: at, clean: clean}
	if k == fileWAL {
		newest, err := newestWAL(fs, wals)
		if err != nil {
			return nil, err
		}
		ff.newest = path == newest
	}
	if ff.newest && !clean {
		if err := ff.findTail(kc, vc); err != nil {
			return nil, err
		}
	}
	if err := ff.toggle(); err != nil {
		return nil, err
	}
	return ff, nil
}

// walFile is a WAL of a DB directory.
type walFile struct {
	path string
	num  uint64
}

// walReserveFlips is how many bytes of a WAL's zero reserve, past its last
// non-zero byte, a flip may land in.
const walReserveFlips = 64

// walFlipSpan returns the prefix of WAL path that flips land in: what was
// written (up to its last non-zero byte), plus walReserveFlips bytes of the zeros after it.
func walFlipSpan(fs vfs.FS, path string) (int64, error) {
	data, err := readFile(fs, path)
	if err != nil {
		return 0, err
	}
	return int64(min(len(data), max(dataEnd(data)+walReserveFlips, 1))), nil
}

func dataEnd(data []byte) int {
	end := len(data)
	for end > 0 && data[end-1] == 0 {
		end--
	}
	return end
}

// newestWAL returns the path of the highest numbered WAL that holds a
// record, or "" if none does.
func newestWAL(fs vfs.FS, wals []walFile) (string, error) {
	sort.Slice(wals, func(i, j int) bool { return wals[i].num > wals[j].num })
	for _, w := range wals {
		data, err := readFile(fs, w.path)
		if err != nil {
			return "", err
		}
		r, err := wal.NewReader(bytes.NewReader(data), w.path, wal.PointInTime)
		if err != nil {
			continue
		}
		if _, err := r.Next(); err == nil {
			return w.path, nil
		}
	}
	return "", nil
}

// findTail reads the WAL (before the flip) to find where its last record
// begins, and decodes that record to know which operation a recovery that
// dropped it lost.
func (ff *fileFlip) findTail(kc keyCodec, vc valueCodec) error {
	data, err := readFile(ff.fs, ff.path)
	if err != nil {
		return err
	}
	r, err := wal.NewReader(bytes.NewReader(data), ff.path, wal.PointInTime)
	if err != nil {
		// A bad header: no record, and a flip anywhere is damage before
		// any record; Open must refuse the file.
		ff.tailFrom = int64(len(data))
		return nil
	}
	start := r.Offset()
	var last []byte
	have := false
	for {
		from := r.Offset()
		rec, err := r.Next()
		if err != nil {
			break // the end, or what a crash left: no record after
		}
		start, last, have = from, append(last[:0], rec...), true
	}
	ff.tailFrom = start
	ff.tail = ff.off >= start
	if !ff.tail {
		return nil
	}
	switch {
	case !have:
		ff.tailDesc = "no record, only the file header"
	case bytes.HasPrefix(last, []byte(walMetaMagic)):
		ff.tailDesc = "a meta record (the preamble), no batch"
	default:
		match, desc, err := batchOps(kc, vc, last)
		if err != nil {
			ff.tailDesc = "a batch the runner cannot decode: " + err.Error()
		} else {
			ff.tailOps, ff.tailDesc = match, desc
		}
	}
	return nil
}

// walMetaMagic starts every WAL meta record (preamble, clean close), as
// opposed to a batch; the root package's walmeta.go pins the format.
const walMetaMagic = "VGLMETA\xff"

// batchOps decodes a WAL batch record (the root package's batch.go pins
// the format: seqnum u64 | count u32 | records of kind u8 | uvarint key
// length | key | [uvarint value length | value]) and returns a matcher for
// the operation that wrote it: the logged operation that touched exactly
// the record's keys, with the versions its values carry.
func batchOps(kc keyCodec, vc valueCodec, rec []byte) (func(*opRec) bool, string, error) {
	if len(rec) < 12 {
		return nil, "", fmt.Errorf("batch record of %d bytes", len(rec))
	}
	seq := binary.LittleEndian.Uint64(rec[0:8])
	count := binary.LittleEndian.Uint32(rec[8:12])
	b := rec[12:]
	varstring := func() ([]byte, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, fmt.Errorf("bad length at byte %d", len(rec)-len(b))
		}
		s := b[k : k+int(n)]
		b = b[k+int(n):]
		return s, nil
	}
	// A range's end may be the key one past the key space.
	bound := keyCodec{n: kc.n + 1, pad: kc.pad}
	keys := map[int]bool{}
	sets := map[int]uint32{}
	for i := uint32(0); i < count; i++ {
		if len(b) == 0 {
			return nil, "", fmt.Errorf("batch of %d records ends after %d", count, i)
		}
		kind := base.Kind(b[0])
		b = b[1:]
		key, err := varstring()
		if err != nil {
			return nil, "", err
		}
		k, err := kc.decode(key)
		if err != nil {
			return nil, "", err
		}
		switch kind {
		case base.KindSet:
			v, err := varstring()
			if err != nil {
				return nil, "", err
			}
			dv, err := vc.decodeValue(v)
			if err != nil {
				return nil, "", err
			}
			if dv.key != k {
				return nil, "", valueMismatch(dv, k)
			}
			keys[k], sets[k] = true, dv.version
		case base.KindDelete:
			keys[k] = true
		case base.KindRangeDelete:
			e, err := varstring()
			if err != nil {
				return nil, "", err
			}
			end, err := bound.decode(e)
			if err != nil {
				return nil, "", err
			}
			for x := k; x < end; x++ {
				keys[x] = true
			}
		default:
			return nil, "", fmt.Errorf("record of kind %d", kind)
		}
	}
	match := func(o *opRec) bool {
		if o.name.barrier() || len(o.writes) != len(keys) {
			return false
		}
		for _, w := range o.writes {
			if !keys[int(w.key)] {
				return false
			}
			if v, ok := sets[int(w.key)]; ok && w.st.ver != v {
				return false
			}
		}
		return true
	}
	return match, fmt.Sprintf("a batch at seq %d, %d records over %d keys", seq, count, len(keys)), nil
}

// openHow says how openDB came by its DB.
type openHow int

const (
	// openPlain: no flip.
	openPlain openHow = iota
	// openFlipped: Open accepted the flipped file; the verification judges.
	openFlipped
	// openDetected: Open refused the flipped file with ErrCorruption; the
	// DB is open on the restored bytes.
	openDetected
	// openFlipError: Open failed on the flipped file with an error that
	// is not ErrCorruption (the bit is flipped back).
	openFlipError
	// openRestoredFailed: Open failed on the restored files.
	openRestoredFailed
	// openMachinery: the runner could not flip the bit back.
	openMachinery
)

// openResult is what openDB did.
type openResult struct {
	how openHow
	// mode is the WAL recovery mode of the Open that returned the DB.
	mode vigil.WALRecoveryMode
}

// openDB opens the DB in dir. lenient allows a strict WAL recovery mode
// (absolute consistency, tolerate corrupted tail) to refuse the WALs, as
// documented after a crash: onRefusal is told, and the DB is recovered
// point in time. With ff (a bit flipped in a file of the closed DB) it
// finds out whether Open noticed, restoring the bit if it did (see the
// top of this file).
func openDB(dir string, opts *vigil.Options, lenient bool, ff *fileFlip, onRefusal func(error)) (*vigil.DB, openResult, error) {
	strict := opts.WALRecoveryMode == vigil.WALAbsoluteConsistency || opts.WALRecoveryMode == vigil.WALTolerateCorruptedTail
	refused := func(mode vigil.WALRecoveryMode, err error) bool {
		return lenient && strict && mode != vigil.WALRecoverPointInTime && errors.Is(err, vigil.ErrCorruption)
	}
	open := func(mode vigil.WALRecoveryMode) (*vigil.DB, error) {
		o := opts.Clone()
		o.WALRecoveryMode = mode
		return vigil.Open(dir, o)
	}
	mode := opts.WALRecoveryMode
	if ff == nil {
		db, err := open(mode)
		if err != nil && refused(mode, err) {
			onRefusal(err)
			mode = vigil.WALRecoverPointInTime
			db, err = open(mode)
		}
		if err != nil {
			return nil, openResult{how: openRestoredFailed, mode: mode}, err
		}
		return db, openResult{how: openPlain, mode: mode}, nil
	}
	db, err := open(mode)
	for {
		if err == nil {
			return db, openResult{how: openFlipped, mode: mode}, nil
		}
		ff.openErr = err
		if terr := ff.toggle(); terr != nil {
			return nil, openResult{how: openMachinery, mode: mode}, terr
		}
		if !errors.Is(err, vigil.ErrCorruption) {
			return nil, openResult{how: openFlipError, mode: mode}, err
		}
		db2, err2 := open(mode)
		if err2 == nil {
			return db2, openResult{how: openDetected, mode: mode}, nil
		}
		if !refused(mode, err2) {
			return nil, openResult{how: openRestoredFailed, mode: mode}, err2
		}
		// The strict mode refuses the crash's torn tail with or without
		// the flip: judge the flip under point-in-time recovery, which the
		// runner recovers with then.
		onRefusal(err2)
		mode = vigil.WALRecoverPointInTime
		ff.openErr = nil
		if terr := ff.toggle(); terr != nil {
			return nil, openResult{how: openMachinery, mode: mode}, terr
		}
		db, err = open(mode)
	}
}

// openFailure describes an Open that failed, and files the flip, if any.
func (f *fileFlipper) openFailure(op string, ff *fileFlip, res openResult, err error) *Divergence {
	div := &Divergence{Op: op, Got: err.Error(), Detail: "the DB did not open again"}
	if ff == nil {
		return div
	}
	switch res.how {
	case openMachinery:
		return &Divergence{Op: "stress runner failure (not a DB divergence)", Detail: fmt.Sprintf("undoing a bit flip: %v (%v)", err, ff)}
	case openFlipError:
		f.record(ff, fileOpenError)
		div.Expected = "ErrCorruption, or a DB holding every acknowledged write"
		div.Detail = "Open failed with an error that is not ErrCorruption after a bit flip in a file: " + ff.String()
	default:
		f.record(ff, fileOpenError)
		div.Detail = "Open refused a file with a flipped bit, then failed again after the bit was flipped back: " + ff.String()
	}
	return div
}

// alternatives returns the weaker rules under which the state recovered
// from a flipped file may still be correct (see the top of this file),
// with the outcome each stands for. m is the DB's metrics after Open.
func (ff *fileFlip) alternatives(d durability, mode vigil.WALRecoveryMode, m *vigil.Metrics) ([]durability, []fileOutcome) {
	if ff == nil || ff.kind != fileWAL {
		return nil, nil
	}
	rm := m.Recovery
	if rm.DroppedRecords == 0 && rm.DroppedBytes == 0 && rm.Skipped == 0 {
		return nil, nil // recovery says it dropped nothing: no excuse
	}
	var alts []durability
	var outs []fileOutcome
	if ff.tail && ff.tailOps != nil {
		t := d
		t.excused = ff.tailOps
		t.what = d.what + ", the flipped last WAL record dropped as a torn tail"
		alts, outs = append(alts, t), append(outs, fileTail)
	}
	if mode == vigil.WALSkipAnyCorrupted {
		s := d
		s.statesOnly = true
		s.what = d.what + ", skip-any WAL recovery having skipped damaged records"
		alts, outs = append(alts, s), append(outs, fileSkipAny)
	}
	return alts, outs
}

// outcomeOf classifies a flip whose DB opened (see judge).
func outcomeOf(res openResult, outs []fileOutcome, which int, div *Divergence) fileOutcome {
	switch {
	case res.how == openDetected:
		return fileDetected
	case div != nil:
		return fileMissed
	case which > 0:
		return outs[which-1]
	}
	return fileNoEffect
}

// judge files the outcome of a flip once the DB opened on it was verified:
// div is the verification's divergence (nil: it passed), which the rule
// that explained the state (0 the usual one, i alts[i-1], see
// solveWith). It returns the divergence to report, if any.
func (f *fileFlipper) judge(ff *fileFlip, res openResult, outs []fileOutcome, which int, div *Divergence) *Divergence {
	if ff == nil {
		return div
	}
	o := outcomeOf(res, outs, which, div)
	f.record(ff, o)
	switch o {
	case fileDetected:
		if div != nil {
			div.Detail = strings.TrimLeft(div.Detail+"\n(the DB was opened after flipping back a bit Open had refused: "+ff.String()+")", "\n")
		}
	case fileMissed:
		div.Op += fmt.Sprintf(" (bit flip in a %s file missed)", ff.kind)
		div.Detail = strings.TrimLeft(div.Detail+"\nOpen accepted a file with a flipped bit, and the DB does not read back what was acknowledged"+
			" (a flip must be detected at Open as ErrCorruption, or be harmless): "+ff.String(), "\n")
	}
	return div
}

// solveWith runs the crash checker under d and, if rec breaks d, under
// each alternative in turn. It returns the index of the rule that
// explained rec (0 for d, i for alts[i-1]), or d's violation.
func solveWith(kc keyCodec, base, rec []kstate, ops []*opRec, d durability, alts []durability) (solveStats, int, error) {
	st, err := solveCrash(kc, base, rec, ops, d)
	if err == nil {
		return st, 0, nil
	}
	for i, a := range alts {
		if a.statesOnly {
			if statesWritten(kc, base, rec, ops, a) == nil {
				return solveStats{}, i + 1, nil
			}
			continue
		}
		if st2, err2 := solveCrash(kc, base, rec, ops, a); err2 == nil {
			return st2, i + 1, nil
		}
	}
	return st, 0, err
}

// statesWritten checks the weakest rule: every key holds its state at the
// last verification or one that a logged write left.
func statesWritten(kc keyCodec, base, rec []kstate, ops []*opRec, d durability) error {
	written := map[uint32][]kstate{}
	for _, o := range ops {
		for _, w := range o.writes {
			written[w.key] = append(written[w.key], w.st)
		}
	}
	for k := range rec {
		if rec[k].same(base[k]) {
			continue
		}
		ok := false
		for _, st := range written[uint32(k)] {
			if st.same(rec[k]) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("after %s: key %s holds %v, which is neither its state at the last verification (%v) nor one a write since left",
				d.what, kc.keyName(k), rec[k], base[k])
		}
	}
	return nil
}
