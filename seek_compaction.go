package vigil

import (
	"slices"

	"github.com/vigildb/vigil/internal/manifest"
)

// Seek compactions: a table that seeks keep reading together with tables
// below it is compacted into the next level, so that those seeks read one
// table less. LevelDB's allowed_seeks, for iterators.
//
// Why: a seek cannot skip a level by its filter unless another level holds
// the key itself, so a seek to an absent key reads a data block in every
// L0 table and every level. Score-based compaction leaves up to
// L0CompactionTrigger-1 L0 tables and a full Lbase above the last level for
// as long as no write comes; after a 10M-key random fill (a DB ten times
// the cache), three L0 tables, L1 and L2 made five block reads per such
// seek, and seekrandom ran at 45k/s against 102k/s once the DB was one
// level. Pebble removes the same read amplification by its read-triggered
// compactions.
//
// How: mergingIter.chargeSeek charges the newest table a seek left
// positioned when it left two or more; DB.chargeSeek counts the charges in
// the table's metadata, and the table whose count reaches one seek per
// SeekCompactionBytes of its size (at least minAllowedSeeks) is queued for
// the compaction loop, which runs its compaction when no level's score
// calls for one. A seek of a merging iterator pays a look over its heap;
// one that leaves two tables or more positioned also a division and an
// atomic load, and an atomic add until the table is queued (once per table
// and level: a trivial move starts the count again).
//
// What counts as a seek is every positioning of the merging iterator by
// key: SeekGE, SeekLT and SeekPrefixGE, and so also First and Last within
// bounds and an Iterator's change of direction, each of which seeks.

// DefaultSeekCompactionBytes is the default Options.SeekCompactionBytes:
// LevelDB's, a seek costing about what compacting 16 KiB does.
const DefaultSeekCompactionBytes = 16 << 10

// reasonSeeks is the reason of seek compactions (compaction.reason,
// CompactionInfo.Reason).
const reasonSeeks = "seeks"

// minAllowedSeeks is the allowance of a small table, so that a few seeks
// do not rewrite it (LevelDB's floor).
const minAllowedSeeks = 100

// seekCandidate is a table whose seeks reached its allowance, and its
// level when they did.
type seekCandidate struct {
	f     *manifest.FileMetadata
	level int
}

// chargeSeek is mergingIter.onSeek: it charges f, at level, for one seek,
// and queues it for a seek compaction when its allowance is reached. Called
// on readers' goroutines.
func (d *DB) chargeSeek(f *manifest.FileMetadata, level int) {
	allowed := max(int64(f.Size)/d.seekAllowance, minAllowedSeeks)
	if !f.ChargeSeek(allowed) {
		return
	}
	d.seekMu.Lock()
	d.seekDue = append(d.seekDue, seekCandidate{f, level})
	d.seekMu.Unlock()
	select {
	case d.compactKick <- struct{}{}:
	default:
	}
}

// pickSeekCompactionLocked returns the compaction of the first queued table
// still at its level in v, dropping those that are not (compacted or moved
// since), or nil. d.mu is held.
func (d *DB) pickSeekCompactionLocked(v *manifest.Version) *compaction {
	d.seekMu.Lock()
	defer d.seekMu.Unlock()
	for len(d.seekDue) > 0 {
		sc := d.seekDue[0]
		d.seekDue = d.seekDue[1:]
		if sc.level >= manifest.NumLevels-1 || !slices.Contains(v.Levels[sc.level], sc.f) {
			continue
		}
		if c := seekCompaction(v, sc.level, sc.f); c != nil {
			return c
		}
	}
	d.seekDue = nil
	return nil
}
