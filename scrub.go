package vigil

import (
	"errors"
	"fmt"
	"time"

	"github.com/vigildb/vigil/internal/manifest"
)

// The scrubber re-reads every live table in the background, one pass per
// Options.ScrubInterval, checking every block checksum, the blocks'
// structure and the whole-file checksum (sst.Reader.VerifyPaced, the check
// Verify makes), so that damage in a table no read touches is found while
// a backup still holds a good copy, not months later by a compaction. It
// reads the files directly, not through the block cache, at
// Options.ScrubBytesPerSec. A table found damaged is marked
// (FileMetadata.MarkDamaged): reads that need its damaged blocks fail with
// ErrCorruption as they would anyway, the rest of the DB keeps working, and
// compactions leave it alone until it is repaired; the finding goes to
// EventListener.CorruptionFound, the LOG and Metrics.Scrub.
//
// Concurrency: one pass at a time (scrubMu): the background loop's and
// DB.Scrub's. A pass holds a reference to the version it started with, so
// its tables stay on disk until it is done with them; it takes no DB lock
// while it reads.

// DefaultScrubBytesPerSec is the scrubber's read rate when
// Options.ScrubBytesPerSec is 0: a DB of 10 GB is re-read in about 40
// minutes, a small share of a disk's bandwidth.
const DefaultScrubBytesPerSec = 4 << 20

// scrubLoop runs a pass every ScrubInterval until the DB closes. Runs on
// its own goroutine (counted in bgWG).
func (d *DB) scrubLoop() {
	defer d.bgWG.Done()
	t := time.NewTimer(d.opts.ScrubInterval)
	defer t.Stop()
	for {
		select {
		case <-d.closing:
			return
		case <-t.C:
		}
		_ = d.scrubPass() // findings are reported as they are made
		t.Reset(d.opts.ScrubInterval)
	}
}

// Scrub runs one scrubber pass now, at Options.ScrubBytesPerSec, and
// returns every problem it found, joined (each wraps ErrCorruption, or is
// the I/O error that stopped a table's read). Unlike Verify it leaves the
// memtables alone and never holds writes off. `vigil db scrub` runs it.
func (d *DB) Scrub() error {
	if d.closed.Load() {
		return ErrClosed
	}
	return d.scrubPass()
}

// scrubPass re-reads every table of the current version.
func (d *DB) scrubPass() error {
	d.scrubMu.Lock()
	defer d.scrubMu.Unlock()
	d.mu.Lock()
	v := d.vs.current
	v.Ref()
	d.mu.Unlock()
	defer v.Unref()
	pace := d.newScrubPacer()
	var errs []error
	for level, files := range v.Levels {
		for _, f := range files {
			select {
			case <-d.closing:
				return errors.Join(errs...)
			default:
			}
			if err := d.scrubTable(f, pace); err != nil {
				if err = d.scrubFound(level, f, err); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	d.stats.scrubPasses.Add(1)
	d.stats.scrubLastPass.Store(time.Now().UnixNano())
	return errors.Join(errs...)
}

// scrubFound reports what scrubTable found in table f of level, heals the
// table from Options.HealFrom if it is damaged and the DB can write, and
// marks it damaged otherwise. It returns the problem that remains (nil if
// healed).
func (d *DB) scrubFound(level int, f *manifest.FileMetadata, err error) error {
	err = fmt.Errorf("scrub: in level %d: %w", level, err)
	if !errors.Is(err, ErrCorruption) {
		d.log.Errorf("%v", err)
		return err
	}
	d.stats.scrubCorruptions.Add(1)
	d.emitCorruption(err)
	if d.opts.HealFrom != "" && !d.opts.ReadOnly {
		herr := d.heal(d.opts.HealFrom, f)
		if herr == nil {
			d.log.Errorf("%v (healed)", err)
			return nil
		}
		err = errors.Join(err, herr)
	}
	f.MarkDamaged()
	d.log.Errorf("%v", err)
	return err
}

// scrubTable verifies one table, its reads paced.
func (d *DB) scrubTable(f *manifest.FileMetadata, pace func(int64)) error {
	h, err := d.tableCache.get(f)
	if err != nil {
		return err
	}
	defer h.release()
	if err := h.reader.VerifyPaced(pace); err != nil {
		return fmt.Errorf("table %06d: %w", f.FileNum, err)
	}
	d.stats.scrubFiles.Add(1)
	if got := h.reader.Properties().FileChecksum; got != f.FileChecksum {
		return fmt.Errorf("%w: table %06d: whole-file checksum %#016x, the MANIFEST recorded %#016x", ErrCorruption, f.FileNum, got, f.FileChecksum)
	}
	return nil
}

// newScrubPacer returns the pace function of one pass: it counts the bytes
// read and sleeps (until the DB closes) whenever the pass runs ahead of
// ScrubBytesPerSec; negative means no limit.
func (d *DB) newScrubPacer() func(int64) {
	rate := d.opts.ScrubBytesPerSec
	start, total := time.Now(), int64(0)
	return func(n int64) {
		d.stats.scrubBytes.Add(n)
		if rate < 0 {
			return
		}
		total += n
		due := start.Add(time.Duration(float64(total) / float64(rate) * float64(time.Second)))
		if wait := time.Until(due); wait > time.Millisecond {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-d.closing:
				t.Stop()
			}
		}
	}
}
