package vigil

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// The publisher makes batches visible in ticket order, only once each is
// ready, and never past a failed one.
func TestPublisherOrderAndFailure(t *testing.T) {
	var p publisher
	var visible atomic.Uint64
	t0 := p.enqueue(10)
	t1 := p.enqueue(12)
	t2 := p.enqueue(13)
	done1 := make(chan error, 1)
	go func() { done1 <- p.publish(t1, &visible) }()
	// t1 is ready but t0 is not: nothing is visible, t1's writer waits.
	if got := visible.Load(); got != 0 {
		t.Fatalf("visible %d before the head batch is ready", got)
	}
	if err := p.publish(t0, &visible); err != nil {
		t.Fatal(err)
	}
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	if got := visible.Load(); got != 12 {
		t.Fatalf("visible = %d after t0 and t1, want 12", got)
	}
	t3 := p.enqueue(20)
	done3 := make(chan error, 1)
	go func() { done3 <- p.publish(t3, &visible) }()
	p.fail(t2)
	if err := <-done3; err == nil {
		t.Fatal("publish of a batch behind a failed one returned nil")
	}
	if got := visible.Load(); got != 12 {
		t.Fatalf("visible = %d after a failure at the batch ending at 13, want 12", got)
	}
}

// TestPublisherRules runs testdata/publisher: batches take tickets in
// commit order ("enqueue name=lastSeq ..."), their writers publish in any
// order ("publish name", each on a goroutine of its own) or their sync
// fails ("fail name"); after each command the test waits until every
// writer has returned or is blocked, and prints who returned with what,
// and the visible seqnum.
func TestPublisherRules(t *testing.T) {
	var p publisher
	var visible atomic.Uint64
	tickets := map[string]uint64{}
	pending := map[string]chan error{}
	settle := func() string {
		var out []string
		for {
			p.mu.Lock()
			waiting := p.waiting
			p.mu.Unlock()
			done := map[string]error{}
			for name, ch := range pending {
				select {
				case err := <-ch:
					done[name] = err
				default:
				}
			}
			for name, err := range done {
				delete(pending, name)
				line := name + ": published"
				if err != nil {
					line = name + ": " + err.Error()
				}
				out = append(out, line)
			}
			if len(done) == 0 && waiting == len(pending) {
				break
			}
			runtime.Gosched()
		}
		var waiting []string
		for name := range pending {
			waiting = append(waiting, name+": waiting")
		}
		slices.Sort(out)
		slices.Sort(waiting)
		out = append(out, waiting...)
		return strings.Join(append(out, fmt.Sprintf("visible: %d", visible.Load())), "\n") + "\n"
	}
	datadriven.RunTest(t, "testdata/publisher", func(t *testing.T, td *datadriven.TestData) string {
		switch td.Cmd {
		case "reset":
			p, tickets, pending = publisher{}, map[string]uint64{}, map[string]chan error{}
			visible.Store(0)
			return ""
		case "enqueue":
			for _, a := range td.CmdArgs {
				last, err := strconv.ParseUint(a.Vals[0], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				tickets[a.Key] = p.enqueue(last)
			}
			return ""
		case "publish":
			for _, a := range td.CmdArgs {
				ch := make(chan error, 1)
				pending[a.Key] = ch
				tk := tickets[a.Key]
				go func() { ch <- p.publish(tk, &visible) }()
			}
			return settle()
		case "fail":
			for _, a := range td.CmdArgs {
				p.fail(tickets[a.Key])
			}
			return settle()
		}
		t.Fatalf("unknown command %q", td.Cmd)
		return ""
	})
}
