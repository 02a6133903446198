package vigil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/cache"
	"github.com/vigildb/vigil/memtable"
	"github.com/vigildb/vigil/wal"
)

// Open opens the DB in dir, creating the directory and an empty DB if
// needed (unless ReadOnly). A nil opts means the defaults. Open validates
// the options and reports every problem at once (ErrInvalidArgument), takes
// the LOCK file so that a second Open of the same directory fails, replays
// the WALs left by the last run according to WALRecoveryMode, flushes what
// they held to L0, and starts a new WAL.
func Open(dir string, opts *Options) (db *DB, err error) {
	if opts == nil {
		opts = &Options{}
	}
	opts = opts.Clone().EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	fs := opts.FS
	d := &DB{
		dirname:      dir,
		opts:         opts,
		fs:           fs,
		cksum:        opts.ChecksumType.Type(),
		flushPending: make(chan struct{}, 1),
		compactKick:  make(chan struct{}, 1),
		closing:      make(chan struct{}),
	}
	d.stallCond = sync.NewCond(&d.mu)
	// On failure, release what was taken, in reverse.
	defer func() {
		if err != nil {
			d.abortOpen()
			db = nil
		}
	}()

	if !opts.ReadOnly {
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("vigil: creating directory %s: %w", dir, err)
		}
		// Make the directory entry itself durable (matters for new DBs).
		if parent := fs.PathDir(dir); parent != "" && parent != dir {
			if pd, err := fs.OpenDir(parent); err == nil {
				_ = pd.Sync()
				pd.Close()
			}
		}
	}
	if opts.ReadOnly {
		if _, err := fs.Stat(dir); err != nil {
			return nil, base.InvalidArgumentErrorf("DB %s does not exist (ReadOnly open needs an existing DB): %v", dir, err)
		}
	}
	if d.dataDir, err = fs.OpenDir(dir); err != nil {
		return nil, fmt.Errorf("vigil: opening directory %s: %w", dir, err)
	}
	lockName := makeFilename(fs, dir, fileTypeLock, 0)
	if d.fileLock, err = fs.Lock(lockName); err != nil {
		return nil, fmt.Errorf("vigil: cannot lock %s (is the DB open in another process or another DB handle?): %w", lockName, err)
	}
	exists, err := dbExists(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("vigil: %w", err)
	}
	switch {
	case exists && opts.ErrorIfExists:
		return nil, base.InvalidArgumentErrorf("DB %s already exists (ErrorIfExists)", dir)
	case !exists && opts.ReadOnly:
		return nil, base.InvalidArgumentErrorf("DB %s does not exist (ReadOnly open needs an existing DB)", dir)
	}
	if opts.ReadOnly {
		d.log = nil
	} else {
		d.log = openEventLog(fs, dir)
	}
	d.vs = versionSet{fs: fs, dirname: dir, dataDir: d.dataDir, cksum: d.cksum, log: d.log, onObsolete: d.onObsoleteTables}
	if exists {
		if err := d.vs.load(); err != nil {
			return nil, fmt.Errorf("vigil: opening %s: %w", dir, err)
		}
	} else {
		d.vs.nextFileNum = 1
		v, _ := newVersionBuilder(nil).build(d.vs.onObsolete)
		v.ref()
		d.vs.current = v
	}
	d.log.Infof("opening %s (exists=%v): next file %d, last seq %d, log number %d\n%s%s",
		dir, exists, d.vs.nextFileNum, d.vs.lastSeq, d.vs.logNumber, opts.String(), d.vs.current)

	if opts.BlockCacheSize > 0 {
		d.blockCache = cache.New(opts.BlockCacheSize)
	}
	d.tableCache = newTableCache(d, opts.MaxOpenFiles)

	if err := d.replayWALs(); err != nil {
		return nil, err
	}
	if !opts.ReadOnly {
		if err := d.writeOptionsFile(); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	d.updateReadStateLocked()
	d.opening = true
	d.deleteObsoleteFilesLocked()
	d.opening = false
	d.mu.Unlock()
	d.log.Infof("opened %s: visible seq %d\n%s", dir, d.visibleSeq.Load(), d.vs.current)
	if !opts.ReadOnly {
		d.bgWG.Add(2)
		go d.flushLoop()
		go d.compactionLoop()
		d.mu.Lock()
		d.maybeScheduleCompactionLocked()
		d.mu.Unlock()
	}
	return d, nil
}

// abortOpen releases what a failed Open had taken.
func (d *DB) abortOpen() {
	d.closed.Store(true)
	if d.walW != nil {
		d.walW.Close()
	}
	d.vs.close()
	if d.tableCache != nil {
		d.tableCache.close()
	}
	d.log.Close()
	if d.dataDir != nil {
		d.dataDir.Close()
	}
	if d.fileLock != nil {
		d.fileLock.Close()
	}
}

// replayWALs rebuilds the memtable from the WALs numbered at or above the
// MANIFEST's log number, then (unless ReadOnly) flushes what they held to L0,
// starts a new WAL and records both in a new MANIFEST. The replayed WALs
// then become obsolete.
func (d *DB) replayWALs() error {
	names, err := d.fs.List(d.dirname)
	if err != nil {
		return fmt.Errorf("vigil: listing %s: %w", d.dirname, err)
	}
	var logs []uint64
	for _, n := range names {
		ft, num, ok := parseFilename(n)
		if ok && ft == fileTypeLog && num >= d.vs.logNumber {
			logs = append(logs, num)
		}
		if ok && num >= d.vs.nextFileNum {
			d.vs.nextFileNum = num + 1
		}
	}
	sort.Slice(logs, func(i, j int) bool { return logs[i] < logs[j] })

	mode := walModeOf(d.opts.WALRecoveryMode)
	maxSeq := d.vs.lastSeq
	var mt *memtable.MemTable
	var rangeDels int64
	var flushed []*fileMetadata
	newMem := func(size int) error {
		m, err := d.newMemTable(d.memtableSizeFor(size))
		mt, rangeDels = m, 0
		return err
	}
	if err := newMem(0); err != nil {
		return err
	}
	stopped := false
	for _, num := range logs {
		name := makeFilename(d.fs, d.dirname, fileTypeLog, num)
		if stopped {
			d.log.Errorf("WAL %s not replayed: an earlier WAL ended at a corruption (point-in-time recovery)", name)
			continue
		}
		f, err := d.fs.Open(name)
		if err != nil {
			return fmt.Errorf("vigil: opening WAL %s: %w", name, err)
		}
		r, err := wal.NewReader(f, name, mode)
		if err != nil {
			f.Close()
			return fmt.Errorf("vigil: replaying WAL %s: %w", name, err)
		}
		if err := r.CheckLogNumber(num); err != nil {
			f.Close()
			return fmt.Errorf("vigil: replaying WAL %s: %w", name, err)
		}
		var batches int
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				return fmt.Errorf("vigil: replaying WAL %s: %w", name, err)
			}
			br, err := newBatchReader(rec, name)
			if err != nil {
				if mode == wal.SkipAnyCorruptedRecords {
					d.log.Errorf("WAL %s: skipping undecodable batch: %v", name, err)
					continue
				}
				f.Close()
				return fmt.Errorf("vigil: replaying WAL %s: %w", name, err)
			}
			last := br.seq + uint64(br.count) - 1
			if br.count == 0 || last <= d.vs.lastSeq {
				continue // already in an SST
			}
			// Decode fully first: a batch is applied whole or not at all.
			type rec3 struct {
				kind       base.Kind
				key, value []byte
			}
			var recs []rec3
			size := 0
			for {
				kind, key, value, ok, err := br.next(name)
				if err != nil {
					f.Close()
					return fmt.Errorf("vigil: replaying WAL %s: %w", name, err)
				}
				if !ok {
					break
				}
				recs = append(recs, rec3{kind, key, value})
				size += memtable.EntrySize(len(key)+base.TrailerLen, len(value))
			}
			if !mt.Reserve(size) {
				if !d.opts.ReadOnly && !mt.Empty() {
					m, err := d.flushRecovered(mt)
					if err != nil {
						f.Close()
						return err
					}
					if m != nil {
						flushed = append(flushed, m)
					}
				}
				if d.opts.ReadOnly && !mt.Empty() {
					// Keep the full memtable as an immutable one.
					d.imm = append(d.imm, &memTableEntry{mt: mt, flushed: make(chan struct{})})
					d.imm[len(d.imm)-1].rangeDels.Store(rangeDels)
				}
				if err := newMem(size); err != nil {
					f.Close()
					return err
				}
				if !mt.Reserve(size) {
					f.Close()
					return fmt.Errorf("vigil: replaying WAL %s: batch of %d bytes does not fit a new memtable", name, size)
				}
			}
			for i, rc := range recs {
				if err := mt.Add(br.seq+uint64(i), rc.kind, rc.key, rc.value); err != nil {
					f.Close()
					return fmt.Errorf("vigil: replaying WAL %s: %w", name, err)
				}
				if rc.kind == base.KindRangeDelete {
					rangeDels++
				}
			}
			if last > maxSeq {
				maxSeq = last
			}
			batches++
		}
		f.Close()
		st := r.Stats()
		d.log.Infof("replayed WAL %s: %d batches, %d records, dropped %d records / %d bytes", name, batches, st.Records, st.DroppedRecords, st.DroppedBytes)
		if err := r.Stopped(); err != nil {
			d.log.Errorf("WAL %s: recovery stopped at: %v", name, err)
			stopped = true
		}
	}
	d.nextSeq = maxSeq + 1
	d.visibleSeq.Store(maxSeq)

	if d.opts.ReadOnly {
		d.mem = &memTableEntry{mt: mt, flushed: make(chan struct{})}
		d.mem.rangeDels.Store(rangeDels)
		return nil
	}
	if !mt.Empty() {
		m, err := d.flushRecovered(mt)
		if err != nil {
			return err
		}
		if m != nil {
			flushed = append(flushed, m)
		}
		// A fresh memtable for new writes; an unused replay memtable is
		// kept, saving the allocation (and zeroing) of a large arena.
		if err := newMem(0); err != nil {
			return err
		}
	}
	var logNum uint64
	if !d.opts.DisableWAL {
		logNum = d.vs.allocFileNum()
		w, err := d.createWAL(logNum)
		if err != nil {
			return err
		}
		d.walW, d.walNum = w, logNum
	} else {
		// Every replayed WAL is in an SST now.
		logNum = d.vs.nextFileNum
	}
	d.mem = &memTableEntry{mt: mt, logNum: logNum, flushed: make(chan struct{})}
	e := &versionEdit{}
	e.setLogNumber(logNum)
	e.setLastSeq(maxSeq)
	for _, m := range flushed {
		e.added = append(e.added, newFileEntry{level: 0, meta: m})
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.vs.logAndApply(e); err != nil {
		return fmt.Errorf("vigil: recording recovery in the MANIFEST: %w", err)
	}
	return nil
}

// walModeOf maps the option to the wal package's mode.
func walModeOf(m WALRecoveryMode) wal.RecoveryMode {
	switch m {
	case WALTolerateCorruptedTail:
		return wal.TolerateCorruptedTailRecords
	case WALAbsoluteConsistency:
		return wal.AbsoluteConsistency
	case WALSkipAnyCorrupted:
		return wal.SkipAnyCorruptedRecords
	}
	return wal.PointInTime
}

// flushRecovered writes a memtable rebuilt from WALs to an L0 table during
// Open, with the same validation as a normal flush.
func (d *DB) flushRecovered(mt *memtable.MemTable) (*fileMetadata, error) {
	fileNum := d.vs.allocFileNum()
	m, err := d.writeMemtableTable(mt, fileNum, "recovery flush")
	if err != nil {
		return nil, fmt.Errorf("vigil: flushing recovered WAL data: %w", err)
	}
	return m, nil
}

// writeOptionsFile writes OPTIONS-NNNNNN, the text form of the options, so
// tools can read the settings of a DB.
func (d *DB) writeOptionsFile() error {
	num := d.vs.allocFileNum()
	name := makeFilename(d.fs, d.dirname, fileTypeOptions, num)
	f, err := d.fs.Create(name)
	if err != nil {
		return fmt.Errorf("vigil: creating %s: %w", name, err)
	}
	content := fmt.Sprintf("# Vigil options, written at open\n%s", d.opts.String())
	if _, err := io.WriteString(f, content); err != nil {
		f.Close()
		return fmt.Errorf("vigil: writing %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("vigil: syncing %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("vigil: closing %s: %w", name, err)
	}
	return d.dataDir.Sync()
}

// onObsoleteTables is called (from version.unref, possibly on a reader's
// goroutine) with files no version references any more.
func (d *DB) onObsoleteTables(files []*fileMetadata) {
	d.obsoleteMu.Lock()
	d.obsoleteTables = append(d.obsoleteTables, files...)
	d.obsoleteMu.Unlock()
	select {
	case d.compactKick <- struct{}{}:
	default:
	}
}

// deleteObsoleteFilesLocked deletes tables no version references, WALs
// below the log number, and MANIFEST / OPTIONS / temp files other than the
// live ones. Read-only DBs delete nothing. d.mu is held.
func (d *DB) deleteObsoleteFilesLocked() {
	if d.opts.ReadOnly {
		return
	}
	d.obsoleteMu.Lock()
	tables := d.obsoleteTables
	d.obsoleteTables = nil
	d.obsoleteMu.Unlock()
	for _, f := range tables {
		d.tableCache.evict(f.fileNum)
		name := makeFilename(d.fs, d.dirname, fileTypeTable, f.fileNum)
		if err := d.fs.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Errorf("deleting obsolete table %s: %v", name, err)
		} else {
			d.log.Infof("deleted obsolete table %s", name)
		}
	}
	names, err := d.fs.List(d.dirname)
	if err != nil {
		d.log.Errorf("listing %s: %v", d.dirname, err)
		return
	}
	live := make(map[uint64]bool)
	for _, files := range d.vs.current.levels {
		for _, f := range files {
			live[f.fileNum] = true
		}
	}
	var newestOptions uint64
	for _, n := range names {
		if ft, num, ok := parseFilename(n); ok && ft == fileTypeOptions && num > newestOptions {
			newestOptions = num
		}
	}
	for _, n := range names {
		ft, num, ok := parseFilename(n)
		if !ok {
			continue
		}
		obsolete := false
		switch ft {
		case fileTypeLog:
			obsolete = num < d.vs.logNumber && num != d.walNum
		case fileTypeManifest:
			obsolete = num < d.vs.manifestNum
		case fileTypeOptions:
			obsolete = num < newestOptions
		case fileTypeTemp:
			obsolete = true
		case fileTypeTable:
			// Only at Open: later, tables become obsolete through
			// version reference counts, and a table being written by a
			// flush or compaction is not yet in any version.
			obsolete = d.opening && !live[num]
		}
		if obsolete {
			path := d.fs.PathJoin(d.dirname, n)
			if err := d.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				d.log.Errorf("deleting obsolete file %s: %v", path, err)
			} else {
				d.log.Infof("deleted obsolete file %s", path)
			}
		}
	}
}
