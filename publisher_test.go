package vigil

import (
	"sync/atomic"
	"testing"
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
