// Package stress is Vigil's crash, fault and corruption stress runner (the
// engine of `vigil stress`), in the spirit of RocksDB's db_stress and
// db_crashtest: worker goroutines issue random operations against a DB
// while an oracle checks every answer, and the DB is crashed, faulted and
// corrupted underneath them.
//
// # Plan
//
// Everything random is drawn from one seed, printed first with the DB
// options (checksum type, paranoid checks, protection bytes of memtables
// and write batches, write buffer
// 64 KiB..64 MiB, block size, restart interval, compression, bloom bits,
// cache, L0 triggers, level and file sizes, WAL recovery mode, DisableWAL,
// automatic compactions) and the workload (key-space size from 8 to 100000
// keys — tiny key spaces make every operation collide —, key and value
// lengths, the share of synced writes, how often to crash, reopen and
// flip). Rerunning with --seed replays the plan; a single-threaded run
// replays the same operations (events are scheduled by operation count,
// not time), multi-threaded runs are best effort.
//
// # Keys, values and the oracle
//
// Keys are integers rendered order-preservingly ("k" + ten digits +
// padding). Every write of a key takes the key's next version number, and
// a value is derived from (key, version), so any value read back names the
// write that produced it and is checked byte for byte. A batch that writes
// a key twice gives the earlier value a "transient" tag: no reader may
// ever see it.
//
// Range deletions are sometimes empty, DeleteRange(k, k), alone or among a
// batch's writes: a no-op that the DB does not even record, so the oracle
// changes no key for it (and, since Apply returns at once for a batch of
// nothing, a synced one is no durability barrier). Now and then a write
// with an inverted range (start > end) goes before the workload's: a copy
// of a batch with an inverted DeleteRange and a Put of version 0, which no
// write takes, or DB.DeleteRange(end, start). It must fail with
// ErrInvalidArgument; it is never logged, so any trace of it — a value of
// version 0, a key deleted — is a divergence, and the key of its Put, held
// locked, is read back at once. These draws come from a random stream of
// their own, so a seed's other operations stay what they were.
//
// The oracle keeps, per key, the states (version, deleted?) the key went
// through as writes were acknowledged, plus the writes in flight. Writers
// of a key are serialized by striped locks held across the DB call, so a
// key has at most one write in flight and its versions commit in order.
// A reader copies the key's oracle state before and after its DB call;
// the result is correct if it is a state the key held between the two
// copies or a write in flight then. Iterators are checked the same way
// for every key of their window — present keys by value, keys skipped over
// as absent — at every step, in both directions, with and without bounds,
// and a key seen twice by one iterator must look the same. Snapshots are
// taken with a small range locked, so the range's exact state at that
// moment is known, and read back later by Get and by scans in both
// directions. Checkpoints are taken the same way, while other keys are
// written, then opened read-only, read back like a snapshot, verified and
// removed. An ingestion, rarely, gives every key of a small locked range
// its next version at once: an external table of the sets (and some point
// deletes) with a range deletion of the range, or IngestAndExcise of the
// range; to the oracle and the crash checker it is one atomic synced write
// (ingest.go). Any disagreement stops the run with a report: seed, replay
// command, operation, key, expected and actual state.
//
// # Crash checking: prefix in commit order
//
// Writes that may have been lost or may have happened — in flight at a
// crash, failed with an error, or not yet durable — make "the expected
// state" a set. Rather than serialize writers around crashes, every write
// is logged with two ticks of one atomic clock: inv, taken before the DB
// call, and ack, taken after it returned. ack(a) < inv(b) proves a
// returned before b started, so a committed first: the commit (sequence
// number) order, which is not observable, extends this real-time order,
// and writes of one key commit in version order.
//
// After a crash the DB must hold the result of some set P of the logged
// writes applied to the state verified last, where P is closed under
// "acknowledged before issued" (no holes; batches count whole, so a torn
// batch breaks it) and contains every write the durability rules promise:
// synced writes acknowledged before the crash (with a WAL), writes
// acknowledged before a Flush that returned, everything acknowledged
// before a clean Close. With DisableWAL only flushed writes are promised.
// All these conditions and the recovered state's constraints ("key k holds
// what write w left, so w happened and the next write of k did not") are
// implications between two writes or facts about one, so checking them is
// unit propagation: linear, never a false alarm, and on failure it prints
// the chain of reasons on both sides (see solver.go).
//
// # Crash modes
//
//   - none: run, then verify the live DB (every acknowledged write
//     present), close cleanly, reopen, verify again. Clean reopens also
//     happen during the run in every mode.
//   - inprocess: the DB runs on vfs.NewStrictMem. At random operation
//     counts a worker crashes it: SetIgnoreSyncs(true), Close while the
//     other workers keep issuing operations (so writes are in flight),
//     wait for them, ResetToSyncedState, SetIgnoreSyncs(false), reopen
//     and verify.
//   - kill: the runner re-executes itself as a child process on a real
//     directory and SIGKILLs it after a random delay, over and over. The
//     child appends each write's intent before the DB call and its answer
//     after, one write system call each, to an op log: a SIGKILL loses the
//     DB's in-process WAL buffer but not data the kernel holds, so the log
//     is complete while the DB may have lost its unsynced tail. The parent
//     verifies each recovery against the log with the crash checker and
//     hands the verified state to the next child in a state file.
//
// # Faults
//
// --faults=RATE wraps the file system with errorfs and a seeded injector
// that fails file reads, writes, syncs, creates, opens and renames with
// probability RATE. A DB call may then fail (its write is in doubt) or the
// DB may turn read-only; reads must never return wrong data. After a
// failed write the runner closes and reopens the DB without faults and
// settles every write in doubt with the crash checker: acknowledged synced
// data must have survived.
//
// # Bit flips
//
// --corrupt-memory forces paranoid checks and a checksum type, draws the
// protection bytes and the batch protection bytes from {1, 2, 4, 8}, and
// flips bits in the key or value bytes of live memtable entries, in cached
// SST blocks, and in write batches between their last Put and Apply,
// counting per target how many flips were detected at read, detected at
// flush or compaction, detected at apply (Apply refused the batch, and
// nothing of it can be read back), missed (a read returned wrong data
// without an error, or Apply wrote a flipped batch) and had no visible
// effect (see corrupt.go for the protocol). A miss fails the run with 8
// protection bytes; with fewer, a flip escapes the per-entry checksum with
// probability 2^-8N by design, so misses are only counted (a batch flip
// then goes into a decoy value the batch itself overrides, so that an
// escaped one does no harm). Without --corrupt-memory the batch protection
// is drawn from {0, 0, 1, 2, 4, 8}, from a random stream of its own.
//
// --corrupt-files flips one bit of one WAL, MANIFEST or CURRENT file of
// the closed DB at a share of the reopen points (clean reopens, in-process
// crashes, and in kill mode the parent's recovery after each kill), chosen
// from the seed, then opens it. Open failing with ErrCorruption is
// "detected" (the bit is flipped back and the DB opened again); Open
// succeeding with every acknowledged write read back is "no effect"; an
// acknowledged write lost or a value wrong is "missed" and fails the run,
// as is an Open error that is not ErrCorruption. The exceptions the
// recovery rules document are counted apart: a flip in the last record of
// the newest WAL of a DB not closed cleanly ("tail", indistinguishable from
// a crash that cut it; only that record's batch is excused), and records
// that WALSkipAnyCorrupted skipped (see files.go for the protocol). The
// option forces a checksum type other than none.
//
// # DB bugs found
//
// Each has a test in dbbugs_test.go that failed while the bug was there,
// unless noted:
//
//   - Fixed (now regression tests; the runner no longer works around
//     them): DB.Flush racing DB.Close dereferenced the nil WAL writer
//     Close leaves; with DisableWAL, Close after a background error
//     dropped the memtable and returned nil; a write racing a failed
//     memtable rotation reported the closed WAL instead of the background
//     error; memtable key bit flips that keep the skiplist in order were
//     missed by searches that compared the flipped node without verifying
//     it (SeekLT stepping over a key flipped upward, mid-list or at the
//     tail; Get passing the newest version flipped downward).
//   - Fixed since: a memtable key flip left for the workers was still
//     missed now and then under concurrent writes. An insert whose search
//     compared the flipped key placed its new node by it, in the wrong
//     place, hiding other keys (--seed=5 --corrupt-memory); and when such
//     an insert failed halfway through a batch, the batch's first writes
//     were visible without the rest (--seed=7). Inserts now verify the
//     entries they go between, and a memtable a batch failed into is
//     poisoned before the batch is published (tests: memtable
//     TestCorruptNeighborStopsInsert, tests/ TestHalfAppliedBatchIsNeverVisible).
//   - Open: with DisableWAL, a flip in the length field of the MANIFEST's
//     last record passes for a torn tail, and Open silently drops the edit
//     of the flush a clean Close made, losing acknowledged writes
//     (--corrupt-files; TestDBBugManifestTornTailDropsFlushWithoutWAL,
//     skipped while open).
//   - Fixed since: after a background error (a failed compaction) Close
//     returned nil without writing the WAL's clean-close record, so a flip
//     in the last acknowledged batch passed for a torn tail and the write
//     was silently dropped (--corrupt-files --faults;
//     TestDBBugCloseAfterBackgroundErrorSkipsCloseRecord).
//   - Fixed since: a flip in a cached block after a compaction's cache hit
//     verified it, while the compaction iterated the block, went into the
//     output with fresh checksums. Compactions now read their inputs from
//     the file, bypassing the cache (sst TestUncachedIterBypassesCache).
//
// # Transactions (--txns)
//
// A mode of its own (txns.go, RunTxns): workers move money between
// accounts in optimistic transactions (DB.NewTxn; reads of two balances,
// writes of both; retried on ErrConflict; a share synced) and audit all
// accounts in read-only transactions (DB.View: the sum must be the total).
// Between epochs, once the workers finished their transaction in flight,
// the DB loses power (--crash=inprocess) or closes cleanly, and is
// reopened. The epoch's committed transactions, replayed one at a time in
// CommitSeq order from the state verified last, must reproduce every
// balance each read (serializability), and the recovered balances must be
// the serial state after a prefix of them holding every synced commit (all
// of them after a clean close): no torn transaction, no lost synced one.
//
// # Merges (--merges)
//
// A mode of its own (merges.go, RunMerges; the values and the oracle in
// mergeoracle.go, the checks in mergeworker.go, mergescan.go,
// mergetxn.go and mergecheck.go) for the merge operator. The DB has a
// Merger drawn from the seed (--merger overrides it): Uint64AddMerger or
// AppendMerger. Workers issue DB.Merge, Put, Delete, DeleteRange (rarely)
// and batches of up to ten of them around one key (merges on merges, a
// merge after a set, a delete or a range deletion of the same batch),
// now and then a batch over half the write buffer (applied as a flushable
// batch), optimistic transactions that merge and read their own operands
// back (Txn.Get after each write, an iterator both ways before the
// commit), Gets, iterator walks from First, Last, SeekGE or SeekLT that
// turn around now and then, and snapshots read back later by Get, by full
// scans both ways and by a turning walk; explicit flushes and compactions,
// and small memtables (64 to 256 KiB) and levels, so that flushes and
// compactions combine operands, partially and at the bottom, all the time.
//
// Every operand names the write that made it. With append a Set's value
// is the token "S<key>.<version>[.<i>]/<filler>;" and an operand
// "M<key>.<version>[.<i>];" (i: its index in its batch), so a value read
// back lists, in order, the writes since the key's last Set or deletion,
// and reports show it that way ("[S3.17 M3.18 M3.21.2]", "!" marking a
// token the runner never wrote for the key). With uint64add a Set's value
// and an operand are random 64-bit words (a hash of key, version and
// index): a sum names its set of writes except with probability ~2^-64.
//
// The oracle keeps, per key, the states since the last verification, each
// with its value — the previous state with the write's operations folded
// in by a model of the operator (not the DB's Merger) — and the write in
// flight (writers of a key are serialized, as in the main mode). A read
// must return, byte for byte, the value of a state the key held between
// the oracle views taken before and after it, or the one the write then
// in flight leaves: an operand lost, doubled, reordered (append), merged
// into a value a deletion hid, or read through a stale snapshot diverges.
// Nothing is unverifiable: the states of an epoch are all kept.
//
// Crashes (--crash=inprocess, as in the main mode: SetIgnoreSyncs, Close
// under the workers, ResetToSyncedState, reopen) and clean reopens end an
// epoch. A write whose keys come free while a crash closes the DB is not
// issued, so the writes in doubt (failed or unanswered) are the last of
// their keys' histories. The reopened DB is read forward, backward and
// key by key (all three must agree); each key's value must be one of its
// states since the last verification — that is, the value a prefix of its
// history leaves — which names the last write of that prefix; and these
// per-key prefixes go to the crash checker above as "key k holds what
// write w left", so the check is across keys, not per key: the writes
// kept must be closed under "acknowledged before issued" (no hole, no torn
// batch or transaction) and hold every write the durability rules promise
// (synced ones with a WAL, those before a Flush that returned, all of them
// before a clean Close). The op log is in memory; no kill mode, faults or
// bit flips in this mode.
//
// # Concurrency
//
// Workers hold the runner's gate shared for each operation; events
// (reopen, flip, final verification) hold it exclusively, so the oracle is
// exact while they run. A crash closes the DB under the workers' feet and
// only then takes the gate.
package stress
