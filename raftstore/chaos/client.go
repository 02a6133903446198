package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// outcome is how one client operation ended.
type outcome int

const (
	notDone outcome = iota // refused before anything was proposed: left out of the history
	done                   // answered: in the history with its output
	unknown                // no trustworthy answer: in the history as Unknown (gets are left out)
)

// history collects the clients' operations.
//
// Concurrency: record may be called from any goroutine.
type history struct {
	start time.Time

	mu     sync.Mutex
	ops    []porcupine.Operation
	counts map[string]*[3]int // per op: notDone, done, unknown
}

func newHistory() *history {
	return &history{start: time.Now(), counts: map[string]*[3]int{}}
}

// now is the history's clock: nanoseconds since the run started.
func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) record(client int, in Input, out Output, how outcome, call, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.counts[in.Op]
	if n == nil {
		n = new([3]int)
		h.counts[in.Op] = n
	}
	n[how]++
	switch {
	case how == notDone, how == unknown && in.Op == "get":
		return // no effect on the state: nothing to check
	case how == unknown:
		out, ret = Output{Unknown: true}, unknownReturn
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// client issues random operations through random nodes until ctx is done.
type client struct {
	id   int
	c    *cluster
	h    *history
	rng  *rand.Rand
	keys int
	seq  int
	// seen is the last value the client saw for each key: the expected
	// value of its compare-and-sets.
	seen   map[string]string
	leader int // the node last named as leader, or -1
}

func (cl *client) run(ctx context.Context) {
	for ctx.Err() == nil {
		in := cl.next()
		node := cl.pick()
		call := cl.h.now()
		out, how, hint := cl.c.do(ctx, node, in)
		ret := cl.h.now()
		if ctx.Err() != nil && how == notDone {
			return
		}
		cl.h.record(cl.id, in, out, how, call, ret)
		switch {
		case how == done:
			cl.seen[in.Key] = out.Value
			if in.Op == "put" || (in.Op == "cas" && out.OK) {
				cl.seen[in.Key] = in.Value
			}
			cl.leader = node
		case hint >= 0:
			cl.leader = hint
		default:
			cl.leader = -1
			time.Sleep(time.Duration(cl.rng.IntN(50)) * time.Millisecond)
		}
		time.Sleep(time.Duration(cl.rng.IntN(5)) * time.Millisecond)
	}
}

// next draws an operation: gets (half through the log, half as lease
// reads), puts of values unique to the client, and compare-and-sets from
// the value the client saw last.
func (cl *client) next() Input {
	key := fmt.Sprintf("k%d", cl.rng.IntN(cl.keys))
	cl.seq++
	val := fmt.Sprintf("c%d-%d", cl.id, cl.seq)
	switch r := cl.rng.IntN(100); {
	case r < 40:
		return Input{Op: "get", Key: key, Lease: r%2 == 0}
	case r < 75:
		return Input{Op: "put", Key: key, Value: val}
	default:
		return Input{Op: "cas", Key: key, Old: cl.seen[key], Value: val}
	}
}

// pick is the node to send the next operation to: the known leader, or
// any node (a follower names the leader in its refusal).
func (cl *client) pick() int {
	if cl.leader >= 0 && cl.rng.IntN(10) > 0 {
		return cl.leader
	}
	return cl.rng.IntN(len(cl.c.procs))
}

// do sends one operation to node i and classifies the answer. hint is the
// leader a refusing node named, or -1.
func (c *cluster) do(ctx context.Context, i int, in Input) (out Output, how outcome, hint int) {
	hint = -1
	req := opRequest{command: command{Op: in.Op, Key: in.Key, Value: in.Value, Old: in.Old}, Lease: in.Lease}
	body, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(ctx, "POST", "http://"+c.procs[i].cfg.HTTPAddr+"/op", bytes.NewReader(body))
	if err != nil {
		return out, notDone, hint
	}
	resp, err := c.client.Do(hreq)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return out, notDone, hint // never reached the node
		}
		return out, unknown, hint
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		var res result
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			return out, unknown, hint
		}
		return Output{Value: res.Value, OK: res.OK}, done, hint
	case statusNotLeader:
		var l struct{ Leader string }
		_ = json.NewDecoder(resp.Body).Decode(&l)
		for j, p := range c.procs {
			if p.cfg.ID == l.Leader {
				hint = j
			}
		}
		return out, notDone, hint
	}
	return out, unknown, hint
}
