package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
)

// opRequest is a client's operation: a command, and for a get how to read.
type opRequest struct {
	command
	// Lease reads from the local replica after the leader confirms its
	// leadership with a quorum and applies everything committed before
	// (raft's VerifyLeader and Barrier) instead of through the log.
	Lease bool `json:"lease,omitempty"`
}

// The HTTP status codes a node answers an operation with. Only
// statusNotLeader and a failed dial tell a client that its operation has
// not happened; on statusUnknown (or a timeout) it may have, or may still.
const (
	statusNotLeader = http.StatusMisdirectedRequest // nothing was proposed; JSON {"leader": id}
	statusUnknown   = http.StatusServiceUnavailable
)

// status is what GET /status reports.
type status struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Leader   string `json:"leader"`
	Term     uint64 `json:"term"`
	Applied  uint64 `json:"applied"`
	Checksum uint64 `json:"checksum"`
	Restores int64  `json:"restores"`
	Err      string `json:"err,omitempty"`
}

// handler serves the node:
//
//	POST /op            an opRequest; 200 with a result
//	GET  /status        a status
//	POST /remove?id=    the leader removes a server from the configuration
//	POST /add?id=&addr= the leader adds a voter
//	POST /snapshot      the node takes a snapshot (raft compacts its log)
func (n *node) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /op", n.serveOp)
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		_, leader := n.r.LeaderWithID()
		st := status{ID: n.cfg.ID, State: n.r.State().String(), Leader: string(leader),
			Applied: n.fsm.AppliedIndex(), Restores: n.fsm.Stats().Restores}
		fmt.Sscan(n.r.Stats()["term"], &st.Term)
		sum, err := n.fsm.Checksum()
		st.Checksum = sum
		if err = errors.Join(err, n.fsm.Err()); err != nil {
			st.Err = err.Error()
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("POST /remove", func(w http.ResponseWriter, req *http.Request) {
		id := raft.ServerID(req.URL.Query().Get("id"))
		n.answer(w, n.r.RemoveServer(id, 0, applyTimeout).Error())
	})
	mux.HandleFunc("POST /add", func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		n.answer(w, n.r.AddVoter(raft.ServerID(q.Get("id")), raft.ServerAddress(q.Get("addr")), 0, applyTimeout).Error())
	})
	mux.HandleFunc("POST /snapshot", func(w http.ResponseWriter, _ *http.Request) {
		n.answer(w, n.snapshotWholeLog())
	})
	return mux
}

// snapshotWholeLog takes a snapshot and compacts the log up to it, keeping no
// trailing entries: a node that then joins empty needs entries the log no
// longer has, so it must restore the snapshot. (With the configured 128
// trailing entries, a short log would not be compacted at all and a wiped
// node would catch up from the log alone.)
func (n *node) snapshotWholeLog() error {
	n.snapMu.Lock()
	defer n.snapMu.Unlock()
	rc := n.r.ReloadableConfig()
	trailing := rc.TrailingLogs
	rc.TrailingLogs = 0
	if err := n.r.ReloadConfig(rc); err != nil {
		return err
	}
	err := n.r.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		err = nil // nothing applied yet: the log holds only configuration
	}
	rc.TrailingLogs = trailing
	return errors.Join(err, n.r.ReloadConfig(rc))
}

// answer reports the outcome of an administrative request.
func (n *node) answer(w http.ResponseWriter, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, struct{}{})
	case definitelyNotDone(err):
		_, leader := n.r.LeaderWithID()
		writeJSON(w, statusNotLeader, map[string]string{"leader": string(leader)})
	default:
		http.Error(w, err.Error(), statusUnknown)
	}
}

// definitelyNotDone reports whether raft refused a proposal before it
// reached the log: the node was no leader, or the proposal queue was full.
// Any other failure (leadership lost, a timeout waiting for the commit,
// a shutdown) may come after the entry was appended, and the entry may yet
// commit.
func definitelyNotDone(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrEnqueueTimeout)
}

func (n *node) serveOp(w http.ResponseWriter, req *http.Request) {
	var op opRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<20)).Decode(&op); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if op.Op == "get" && n.cfg.UnsafeLocalReads {
		n.localRead(w, op.Key)
		return
	}
	if n.r.State() != raft.Leader {
		n.answer(w, raft.ErrNotLeader)
		return
	}
	if op.Op == "get" && op.Lease {
		if err := n.r.VerifyLeader().Error(); err != nil {
			n.answer(w, err)
			return
		}
		if err := n.r.Barrier(applyTimeout).Error(); err != nil {
			n.answer(w, err)
			return
		}
		n.localRead(w, op.Key)
		return
	}
	data, err := json.Marshal(op.command)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f := n.r.Apply(data, applyTimeout)
	if err := f.Error(); err != nil {
		n.answer(w, err)
		return
	}
	switch resp := f.Response().(type) {
	case result:
		writeJSON(w, http.StatusOK, resp)
	case error:
		http.Error(w, resp.Error(), statusUnknown)
	default:
		http.Error(w, fmt.Sprintf("FSM answered %T", resp), statusUnknown)
	}
}

// localRead answers a get from the local replica.
func (n *node) localRead(w http.ResponseWriter, key string) {
	v, err := n.fsm.Get([]byte(key))
	if err != nil && !errors.Is(err, vigil.ErrNotFound) {
		http.Error(w, err.Error(), statusUnknown)
		return
	}
	writeJSON(w, http.StatusOK, result{Value: string(v)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// httpTimeout bounds one request from the test to a node: longer than the
// node's own apply timeout, so that a node that is up answers.
const httpTimeout = applyTimeout + 2*time.Second
