package vigil

import (
	"errors"
	"os"

	"github.com/vigildb/vigil/internal/bgsys"
	"github.com/vigildb/vigil/internal/manifest"
)

// Obsolete files: tables no version references, WALs below the log
// number, MANIFESTs replaced by newer ones, and the leftovers of a crash
// (temporary files, tables no MANIFEST names). They are deleted here, and
// only here, off the commit path and never under d.mu during the I/O.

// onObsoleteTables is called (from version.unref, possibly on a reader's
// goroutine) with files no version references any more. It wakes
// obsoleteLoop.
func (d *DB) onObsoleteTables(files []*manifest.FileMetadata) {
	d.obsoleteMu.Lock()
	d.obsoleteTables = append(d.obsoleteTables, files...)
	d.obsoleteMu.Unlock()
	select {
	case d.obsoleteKick <- struct{}{}:
	default:
	}
}

// obsoleteLoop deletes obsolete files as tables go obsolete, until the DB
// closes. Why not the compaction loop, which deletes them after each
// compaction: a compaction's inputs go obsolete when the last reader of
// the version before it lets go, which may come just after the loop
// looked, and the loop then ran the next compaction first. After a 10M-key
// fill, the 23 inputs of an L0 -> L1 compaction stayed open beside its 48
// outputs, index and filter in memory (some 6 MiB), while the next
// compaction ran; that was the process's peak RSS.
func (d *DB) obsoleteLoop() {
	defer d.bgWG.Done()
	for {
		select {
		case <-d.obsoleteKick:
			d.deleteObsoleteFiles()
		case <-d.closing:
			return
		}
	}
}

// deleteObsoleteFiles deletes the tables no version references any more,
// the WALs below the log number and the MANIFESTs replaced since the last
// call. It decides under d.mu, from what the DB tracks (no directory scan),
// and removes the files without it: no file I/O under the DB mutex.
// Read-only DBs delete nothing. d.mu must not be held.
func (d *DB) deleteObsoleteFiles() {
	if d.opts.ReadOnly {
		return
	}
	d.deleteMu.Lock()
	defer d.deleteMu.Unlock()
	d.obsoleteMu.Lock()
	tables := d.obsoleteTables
	d.obsoleteTables = nil
	d.obsoleteMu.Unlock()
	d.mu.Lock()
	wals := d.wal.takeObsoleteLocked(d.vs.logNumber, d.opts.WALRecycleFiles)
	d.maybePrepareWALLocked(false) // one may have waited for a WAL to recycle
	manifests := d.vs.obsoleteManifests
	d.vs.obsoleteManifests = nil
	d.mu.Unlock()

	// Every table leaves the cache (closing it, and freeing its index and
	// filter, once no reader holds it) before any file is removed: the
	// removals take milliseconds each, and a compaction's tens of inputs
	// kept their memory that long beside the outputs readers open.
	for _, f := range tables {
		d.tableCache.evict(f.FileNum)
	}
	for _, f := range tables {
		d.removeObsolete(makeFilename(d.fs, d.dirname, fileTypeTable, f.FileNum))
	}
	for _, n := range wals {
		d.removeObsolete(makeFilename(d.fs, d.dirname, fileTypeLog, n))
	}
	for _, n := range manifests {
		d.removeObsolete(makeFilename(d.fs, d.dirname, fileTypeManifest, n))
	}
}

func (d *DB) removeObsolete(path string) {
	// Yield first (bgsys.Yield): unlinking a 64 MiB WAL or a large table
	// takes ext4 several milliseconds (7 ms on average in a 3M-key
	// fillrandom), during which this goroutine keeps its processor, and a
	// trace of a 10M-key fillrandom caught the writer queued behind the
	// flush goroutine's unlink for 20 ms. Not through bgsys.Do, whose one
	// slot (on 2 cores) the memtable's fault-ahead worker needs.
	bgsys.Yield()
	if err := d.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.log.Errorf("deleting obsolete file %s: %v", path, err)
	} else {
		d.log.Infof("deleted obsolete file %s", path)
	}
}

// removeLeftovers is Open's cleanup, the one directory scan: tables no
// version references (a flush or compaction that crashed before its
// MANIFEST edit), WALs below the log number, MANIFESTs but the live one,
// OPTIONS files but the newest, and temp files. Open calls it before any
// background work starts, without d.mu.
func (d *DB) removeLeftovers() {
	if d.opts.ReadOnly {
		return
	}
	names, err := d.fs.List(d.dirname)
	if err != nil {
		d.log.Errorf("listing %s: %v", d.dirname, err)
		return
	}
	live := make(map[uint64]bool)
	for _, files := range d.vs.current.Levels {
		for _, f := range files {
			live[f.FileNum] = true
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
			obsolete = num < d.vs.logNumber && num != d.wal.liveNum
		case fileTypeManifest:
			obsolete = num < d.vs.manifestNum
		case fileTypeOptions:
			obsolete = num < newestOptions
		case fileTypeTemp:
			obsolete = true
		case fileTypeTable:
			obsolete = !live[num]
		}
		if obsolete {
			d.removeObsolete(d.fs.PathJoin(d.dirname, n))
		}
	}
	d.obsoleteMu.Lock()
	d.obsoleteTables = nil // deleted by the scan
	d.obsoleteMu.Unlock()
	d.vs.obsoleteManifests = nil
}
