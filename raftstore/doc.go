// Package raftstore runs github.com/hashicorp/raft on Vigil.
//
// It has three pieces, each usable on its own:
//
//   - Store is a raft.LogStore and a raft.StableStore over one Vigil DB. Log
//     entries live in chunks of a run each, under the key prefix "l"
//     followed by the chunk's last index as 8 bytes big-endian, so the log
//     is one ordered key range: StoreLogs is one synced Vigil batch,
//     DeleteRange is one synced batch around a range deletion, and
//     FirstIndex/LastIndex are answered from a cache that Open fills by
//     seeking to the first and last log key. Stable keys live under "s".
//     Entries are encoded by AppendLog (decoded by DecodeLog), a compact
//     versioned binary format.
//
//   - FSM is a raft.FSM (and raft.BatchingFSM) that applies commands to a
//     second Vigil DB, one Vigil batch per raft batch. Its snapshots are
//     Vigil checkpoints (DB.Checkpoint) streamed file by file; Restore writes
//     the received files into a new directory, swaps it for the DB
//     directory and reopens the DB.
//
//   - Op, AppendCommand and DecodeCommand are a small command format (puts,
//     deletes, range deletions) that the FSM's default ApplyFunc,
//     ApplyCommand, understands; an application may supply its own.
//
// Vigil's core module does not depend on hashicorp/raft: this package is a
// module of its own (github.com/vigildb/vigil/raftstore).
//
// Durability: Store syncs every write (raft requires the log and the stable
// store to be durable before it acknowledges anything). The FSM does not
// sync its writes: after a crash raft restores the FSM from the latest
// snapshot and replays the log from there, as it does for any FSM.
package raftstore
