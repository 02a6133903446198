package vigil

// testingHooks let tests of this package intercept internal steps. They are
// nil in production.
type testingHooks struct {
	// beforeFlush runs on the flush goroutine with the memtable about to be
	// flushed, after its writers finished.
	beforeFlush func(t flushable)
}

// The exported hooks below exist for fault-injection tests (tests/,
// tests/stress): they hand out the bytes Vigil guards so a test can flip
// bits in them, as bad RAM would. Nothing else should call them; writing to
// the slices races with readers by design.

// MemtableEntryForTesting finds the newest entry of key in the memtables
// (mutable first, then immutable, newest first) and calls fn with slices
// aliasing that entry's user-key bytes and value bytes in the arena. It
// reports whether an entry was found.
func (d *DB) MemtableEntryForTesting(key []byte, fn func(keyBytes, valueBytes []byte)) bool {
	return d.MemtableEntryKindForTesting(key, func(k, v []byte, _ bool) { fn(k, v) })
}

// MemtableEntryKindForTesting is MemtableEntryForTesting that also tells fn
// whether the entry is a range tombstone (valueBytes is then its end key).
// Reads use a checked copy of a memtable's range tombstones (see
// memtable_tombstones.go), so a flip in a tombstone's arena bytes does not
// reach reads at all; flush validation and DB.Verify catch it.
func (d *DB) MemtableEntryKindForTesting(key []byte, fn func(keyBytes, valueBytes []byte, rangeDel bool)) bool {
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
		ko, kl, vo, vl, rangeDel, ok := e.mt.EntryKindForTesting(key)
		if !ok {
			continue
		}
		arena := e.mt.ArenaForTesting()
		fn(arena[ko:ko+kl:ko+kl], arena[vo:vo+vl:vo+vl], rangeDel)
		return true
	}
	return false
}

// ForEachMemtableArenaForTesting calls fn with the used bytes of every
// memtable's arena.
func (d *DB) ForEachMemtableArenaForTesting(fn func(arena []byte)) {
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
			fn(e.mt.ArenaForTesting())
		}
	}
}

// ForEachCachedBlockForTesting calls fn with every block in the block cache.
func (d *DB) ForEachCachedBlockForTesting(fn func(block []byte)) {
	d.blockCache.ForEachForTesting(fn)
}
