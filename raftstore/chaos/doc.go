// Package chaos tests a replicated key-value service built on raftstore
// (hashicorp/raft with its log, stable store and FSM on Vigil) the way
// Jepsen tests etcd and Consul: under crashes, restarts, partitions and
// lost data, is what its clients saw linearizable, and do the replicas
// end up equal?
//
// Run starts Config.Nodes nodes, each a process of its own (RunNode, with
// its own data directory) talking raft over loopback TCP (raft's
// NetworkTransport). Every directed link between two nodes goes through a
// Proxy of the test's own that can cut it, drop what it carries or delay
// it. Clients on several goroutines send gets (through the raft log, or as
// lease reads: VerifyLeader, Barrier, local read), puts and
// compare-and-sets to any node, and record each call and return. Faults
// drawn from Config.Seed come one episode at a time: SIGKILL and restart
// of a node, a partition of a random minority, a partition of the leader,
// a link dropping in one direction, delayed links, and a node removed from
// the configuration, wiped and added back (it rejoins from a snapshot).
// After the final heal every node must reach the same applied index and
// the same FSM checksum (raftstore.FSM.Checksum, over the FSM's whole key
// space), and the history must be linearizable (porcupine, against a
// register per key). A failing run returns the seed and the smallest
// failing history of one key that Check finds.
//
// The outcome of an operation is one of three: answered (in the history
// with its output); refused before raft saw it (a node that is not leader,
// a dial that failed: left out); or unknown (a timeout, a lost connection,
// leadership lost after the proposal: in the history as an operation that
// may take effect at any time after its call, or never). Treating an
// unknown write as failed would make the checker report bugs that are not
// there; treating a refused one as unknown would only make checks slower.
package chaos
