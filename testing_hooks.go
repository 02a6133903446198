package vigil

import "github.com/vigildb/vigil/internal/private"

// testingHooks let tests of this package intercept internal steps. They are
// nil in production.
type testingHooks struct {
	// beforeFlush runs on the flush goroutine with the memtable about to be
	// flushed, after its writers finished.
	beforeFlush func(t flushable)
	// beforeApply runs on a writer's goroutine once its batch is assigned
	// to a memtable (commitMu released), before it is inserted.
	beforeApply func()
	// pacedYield runs on a writer's goroutine before paceBehindFlush
	// yields.
	pacedYield func()
}

// The fault-injection hooks (see internal/private): tests/ and tests/stress
// reach the bytes Vigil guards through them, to flip bits as bad RAM would.
// Nothing else should call them; writing to the slices races with readers
// by design.
func init() {
	private.MemtableEntryKind = func(db any, key []byte, fn func(k, v []byte, rangeDel bool)) bool {
		return db.(*DB).memtableEntryKind(key, fn)
	}
	private.ForEachMemtableArena = func(db any, fn func([]byte)) { db.(*DB).forEachMemtableArena(fn) }
	private.ForEachCachedBlock = func(db any, fn func([]byte)) { db.(*DB).blockCache.ForEachBlock(fn) }
	private.BatchBuffer = func(b any) []byte { return b.(*Batch).bufferForTesting() }
}

// bufferForTesting returns the batch's buffer, header included, made the
// batch's own (init copies a buffer lent to a flushable batch), so that
// writing to it cannot reach what the DB committed.
func (b *Batch) bufferForTesting() []byte {
	b.init()
	return b.data
}

// memtableEntryKind finds the newest entry of key in the memtables (mutable
// first, then immutable, newest first) and calls fn with slices aliasing
// that entry's user-key bytes and value bytes in the arena, and whether the
// entry is a range tombstone (valueBytes is then its end key). It reports
// whether an entry was found. Reads use a checked copy of a memtable's range
// tombstones (see rangedel.Cache), so a flip in a tombstone's arena
// bytes does not reach reads at all; flush validation and DB.Verify catch it.
func (d *DB) memtableEntryKind(key []byte, fn func(keyBytes, valueBytes []byte, rangeDel bool)) bool {
	rs := d.loadReadState()
	if rs == nil {
		return false
	}
	defer rs.unref()
	for i := -1; i < len(rs.imms); i++ {
		e := rs.mem
		if i >= 0 {
			e = rs.imms[i]
		}
		if e.mt == nil {
			continue // a flushable batch
		}
		ko, kl, vo, vl, rangeDel, ok := private.MemtableEntry(e.mt, key)
		if !ok {
			continue
		}
		arena := private.MemtableArena(e.mt)
		fn(arena[ko:ko+kl:ko+kl], arena[vo:vo+vl:vo+vl], rangeDel)
		return true
	}
	return false
}

// forEachMemtableArena calls fn with the used bytes of every memtable's
// arena.
func (d *DB) forEachMemtableArena(fn func(arena []byte)) {
	rs := d.loadReadState()
	if rs == nil {
		return
	}
	defer rs.unref()
	for i := -1; i < len(rs.imms); i++ {
		e := rs.mem
		if i >= 0 {
			e = rs.imms[i]
		}
		if e.mt != nil {
			fn(private.MemtableArena(e.mt))
		}
	}
}
