package vigil

import (
	"fmt"
	"sync"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/cache"
	"github.com/vigildb/vigil/internal/lockfile"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/internal/private"
	"github.com/vigildb/vigil/internal/vfsutil"
	"github.com/vigildb/vigil/sst"
)

// Open opens the DB in dir, creating the directory and an empty DB if
// needed (unless ReadOnly). A nil opts means the defaults. Open validates
// the options and reports every problem at once (ErrInvalidArgument), takes
// the LOCK file so that a second Open of the same directory fails, replays
// the WALs left by the last run according to WALRecoveryMode, flushes what
// they held to L0, and starts a new WAL.
//
// Each step is a call, and the error path of every step undoes exactly
// the steps before it, which abortOpen does.
func Open(dir string, opts *Options) (db *DB, err error) {
	if opts == nil {
		opts = &Options{}
	}
	opts = opts.Clone().EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	d := newDB(dir, opts)
	// On failure, release what was taken, in reverse.
	defer func() {
		if err != nil {
			d.abortOpen()
			db = nil
		}
	}()
	exists, err := d.lockDir()
	if err != nil {
		return nil, err
	}
	if err := d.loadVersions(exists); err != nil {
		return nil, err
	}
	d.openCaches()
	if err := d.replayWALs(); err != nil {
		return nil, err
	}
	if err := d.recordMerger(); err != nil {
		return nil, err
	}
	if !opts.ReadOnly {
		if err := d.writeOptionsFile(); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	d.updateReadStateLocked()
	d.mu.Unlock()
	d.removeLeftovers()
	d.log.Infof("opened %s: visible seq %d\n%s", dir, d.visibleSeq.Load(), d.vs.current)
	if !opts.ReadOnly {
		d.startBackground()
	}
	return d, nil
}

// newDB is the DB of Open's options (defaulted and valid), before it has
// touched the file system.
func newDB(dir string, opts *Options) *DB {
	d := &DB{
		dirname:      dir,
		opts:         opts,
		picker:       newLeveledPicker(opts),
		fs:           opts.FS,
		cksum:        opts.ChecksumType.Resolve(),
		cmp:          opts.Comparer.Resolve(),
		userReads:    sst.ReadOptions{SkipChecksums: opts.SkipReadChecksums, Filter: new(sst.FilterStats)},
		session:      base.NewRandomID(),
		flushPending: make(chan struct{}, 1),
		compactKick:  make(chan struct{}, 1),
		obsoleteKick: make(chan struct{}, 1),
		closing:      make(chan struct{}),
	}
	d.stallCond = sync.NewCond(&d.mu)
	if opts.SeekCompactionBytes > 0 && !opts.ReadOnly && !opts.DisableAutomaticCompactions {
		d.seekAllowance = opts.SeekCompactionBytes
	}
	return d
}

// lockDir creates the DB's directory (durably, unless ReadOnly), opens it
// and takes its LOCK, and reports whether a DB is there, refusing an
// existing one with ErrorIfExists and a missing one with ReadOnly.
func (d *DB) lockDir() (exists bool, err error) {
	fs, dir, opts := d.fs, d.dirname, d.opts
	if !opts.ReadOnly {
		if err := vfsutil.MkdirAllSynced(fs, dir); err != nil {
			return false, fmt.Errorf("vigil: creating directory %s: %w", dir, err)
		}
	} else if _, err := fs.Stat(dir); err != nil {
		return false, base.InvalidArgumentErrorf("DB %s does not exist (ReadOnly open needs an existing DB): %v", dir, err)
	}
	if d.dataDir, err = fs.OpenDir(dir); err != nil {
		return false, fmt.Errorf("vigil: opening directory %s: %w", dir, err)
	}
	lockName := makeFilename(fs, dir, fileTypeLock, 0)
	lock, err := lockfile.Acquire(fs, dir, lockName)
	if err != nil {
		return false, fmt.Errorf("vigil: cannot lock %s (is the DB open in another process or another DB handle?): %w", lockName, err)
	}
	d.fileLock = lock
	if exists, err = dbExists(fs, dir); err != nil {
		return false, fmt.Errorf("vigil: %w", err)
	}
	switch {
	case exists && opts.ErrorIfExists:
		return false, base.InvalidArgumentErrorf("DB %s already exists (ErrorIfExists)", dir)
	case !exists && opts.ReadOnly:
		return false, base.InvalidArgumentErrorf("DB %s does not exist (ReadOnly open needs an existing DB)", dir)
	}
	return exists, nil
}

// loadVersions starts the info log and the version set: the MANIFEST's
// state for an existing DB, an empty LSM with a new DB id otherwise.
func (d *DB) loadVersions(exists bool) error {
	fs, dir, opts := d.fs, d.dirname, d.opts
	switch {
	case opts.Logger != nil:
		d.log = userLogger{opts.Logger}
	case opts.ReadOnly:
		d.log = discardLogger{}
	default:
		d.log = openInfoLog(fs, dir)
	}
	d.events = newEventQueue()
	d.vs = versionSet{fs: fs, dirname: dir, dataDir: d.dataDir, cksum: d.cksum, cmp: d.cmp, log: d.log, onObsolete: d.onObsoleteTables,
		mu: &d.mu, cond: sync.NewCond(&d.mu)}
	if exists {
		if err := d.vs.load(); err != nil {
			return fmt.Errorf("vigil: opening %s: %w", dir, err)
		}
	} else {
		d.vs.nextFileNum = 1
		d.vs.dbID = base.NewRandomID()
		d.vs.formatVersion = uint64(opts.FormatVersion)
		if opts.Merger != nil {
			d.vs.merger = opts.Merger.Name
		}
		v, _ := manifest.NewBuilder(d.cmp, nil).Build(d.vs.onObsolete)
		v.Ref()
		d.vs.current = v
	}
	if err := d.checkMerger(); err != nil {
		return err
	}
	d.log.Infof("opening %s (exists=%v): format version %d, next file %d, last seq %d, log number %d\n%s%s",
		dir, exists, d.vs.formatVersion, d.vs.nextFileNum, d.vs.lastSeq, d.vs.logNumber, opts.String(), d.vs.current)
	return nil
}

// checkMerger compares Options.Merger with the merger the DB records: a
// DB whose operands another operator wrote is refused. Without a Merger,
// a DB that records a built-in one (BuiltinMerger) gets it; one that
// records another opens (tools read it), but every read that meets an
// operand fails, and flushes and compactions keep operands as they are.
func (d *DB) checkMerger() error {
	rec, m := d.vs.merger, d.opts.Merger
	switch {
	case rec != "" && m != nil && m.Name != rec:
		return base.InvalidArgumentErrorf("vigil: opening %s: the DB's merge operands were written by merger %q, Options.Merger is %q", d.dirname, rec, m.Name)
	case rec != "" && m == nil:
		if d.opts.Merger = BuiltinMerger(rec); d.opts.Merger != nil {
			d.log.Infof("the DB records merger %q: using the built-in one", rec)
		} else {
			d.log.Infof("the DB records merger %q but Options.Merger is nil: reads of merge operands will fail", rec)
		}
	}
	return nil
}

// recordMerger records Options.Merger's name in the MANIFEST of a DB that
// records none yet, raising its format version to the first with merges:
// from then on it opens only with that merger, and not at all in a build
// that predates merges.
func (d *DB) recordMerger() error {
	m := d.opts.Merger
	if m == nil || d.opts.ReadOnly {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.vs.merger == m.Name {
		return nil // recorded, or a new DB's first MANIFEST will record it
	}
	e := &manifest.VersionEdit{Merger: m.Name, FormatVersion: max(d.vs.formatVersion, manifest.FormatVersionMerges)}
	if err := d.vs.logAndApply(e); err != nil {
		return fmt.Errorf("vigil: recording merger %q: %w", m.Name, err)
	}
	d.vs.merger, d.vs.formatVersion = m.Name, e.FormatVersion
	return nil
}

// openCaches makes the block cache (sized by BlockCacheSize, or sharing
// MemoryBudget with the memtables) and the table cache.
func (d *DB) openCaches() {
	opts := d.opts
	switch {
	case opts.MemoryBudget > 0 && opts.BlockCacheSize > 0:
		// One limit for memtables and cache: the cache starts with the
		// whole budget and shrinks as memtables take their share.
		d.blockCache = cache.New(opts.MemoryBudget)
		d.stats.memtableBytes.budget, d.stats.memtableBytes.cache = opts.MemoryBudget, d.blockCache
	case opts.BlockCacheSize > 0:
		d.blockCache = cache.New(opts.BlockCacheSize)
	}
	d.tableCache = newTableCache(tableCacheOptions{fs: d.fs, dirname: d.dirname, cmp: d.cmp, blockCache: private.WrapBlockCache(d.blockCache).(*sst.Cache),
		paranoidCacheChecks: opts.ParanoidMemoryChecks}, opts.MaxOpenFiles)
}

// startBackground starts the flush and compaction goroutines and schedules
// what the opened state already calls for.
func (d *DB) startBackground() {
	d.bgWG.Add(3)
	go d.flushLoop()
	go d.compactionLoop()
	go d.obsoleteLoop()
	if d.opts.ScrubInterval > 0 && !d.opts.ReadOnly {
		d.bgWG.Add(1)
		go d.scrubLoop()
	}
	d.mu.Lock()
	d.maybeScheduleCompactionLocked()
	d.maybePrepareWALLocked(false)
	d.mu.Unlock()
}

// abortOpen releases what a failed Open had taken.
func (d *DB) abortOpen() {
	d.closed.Store(true)
	d.releaseMemtables()
	if d.wal.live != nil {
		d.wal.live.Close()
	}
	d.vs.close()
	if d.tableCache != nil {
		d.tableCache.close()
	}
	if d.log != nil {
		d.log.Close()
	}
	if d.events != nil {
		d.events.close()
	}
	if d.dataDir != nil {
		d.dataDir.Close()
	}
	if d.fileLock != nil {
		d.fileLock.Close()
	}
}

// writeOptionsFile writes OPTIONS-NNNNNN, the text form of the options, so
// tools can read the settings of a DB.
func (d *DB) writeOptionsFile() error {
	num := d.vs.allocFileNum()
	name := makeFilename(d.fs, d.dirname, fileTypeOptions, num)
	content := fmt.Sprintf("# Vigil options, written at open\n%s", d.opts.String())
	if err := vfsutil.WriteFile(d.fs, name, []byte(content)); err != nil {
		return fmt.Errorf("vigil: %w", err)
	}
	return d.dataDir.Sync()
}
