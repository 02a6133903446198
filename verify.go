package vigil

import (
	"errors"
	"fmt"
)

// Verify re-reads every live SST from disk, bypassing the block cache, and
// checks every block checksum, the footer checksum and the whole-file
// checksum recorded in the MANIFEST. It also validates the memtables (order,
// per-KV checksums, entry counts), holding writes off while it does. It returns every problem found, joined;
// each wraps ErrCorruption (or the I/O error that stopped a read).
func (d *DB) Verify() error {
	if d.closed.Load() {
		return ErrClosed
	}
	// Validation needs quiescent memtables: hold new writes off and wait
	// for the ones being applied.
	d.commitMu.Lock()
	rs := d.loadReadState()
	if rs == nil {
		d.commitMu.Unlock()
		return ErrClosed
	}
	defer rs.unref()
	var errs []error
	for i := -1; i < len(rs.imms); i++ {
		e := rs.mem
		if i >= 0 {
			e = rs.imms[i]
		}
		e.writers.Wait()
		if err := e.readable(); err != nil {
			errs = append(errs, err)
		}
		if err := e.mt.Validate(); err != nil {
			errs = append(errs, d.memCorruption(err))
		}
	}
	d.commitMu.Unlock()
	for level, files := range rs.v.levels {
		for _, f := range files {
			if err := d.verifyTable(f); err != nil {
				errs = append(errs, fmt.Errorf("L%d: %w", level, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (d *DB) verifyTable(f *fileMetadata) error {
	h, err := d.tableCache.get(f)
	if err != nil {
		return err
	}
	defer h.release()
	if err := h.reader.Verify(); err != nil {
		return fmt.Errorf("table %06d: %w", f.fileNum, err)
	}
	if got := h.reader.Properties().FileChecksum; got != f.fileChecksum {
		return fmt.Errorf("%w: table %06d: whole-file checksum %#016x, the MANIFEST recorded %#016x", ErrCorruption, f.fileNum, got, f.fileChecksum)
	}
	return nil
}
