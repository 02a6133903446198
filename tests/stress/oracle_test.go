package stress

import (
	"sync"
	"testing"
)

func set(v uint32) kstate { return kstate{ver: v} }
func del(v uint32) kstate { return kstate{ver: v, del: true} }

func TestKstateSame(t *testing.T) {
	for _, c := range []struct {
		a, b kstate
		same bool
	}{
		{set(1), set(1), true},
		{set(1), set(2), false},
		{set(1), del(1), false},
		{del(1), del(7), true}, // a reader cannot tell deletions apart
		{neverWritten, del(3), true},
	} {
		if got := c.a.same(c.b); got != c.same {
			t.Errorf("%v.same(%v) = %v", c.a, c.b, got)
		}
	}
}

func TestOracleCheckWindow(t *testing.T) {
	o := newOracle(4)
	var pre, mid, post keyView
	o.view(1, &pre)
	unlock := o.lock([]int{1})
	st := o.begin(1, false)
	o.view(1, &mid)
	// In flight: the old state and the pending write are both fine.
	for _, got := range []kstate{neverWritten, st} {
		if v := check(&pre, &mid, got); v != verdictOK {
			t.Errorf("in flight: check(%v) = %v, want OK", got, v)
		}
	}
	if v := check(&pre, &mid, set(st.ver+1)); v != verdictWrong {
		t.Errorf("in flight: a version never written passed: %v", v)
	}
	o.commit(1, st)
	unlock()
	o.view(1, &post)
	// A read spanning the commit may see either.
	for _, got := range []kstate{neverWritten, st} {
		if v := check(&pre, &post, got); v != verdictOK {
			t.Errorf("spanning: check(%v) = %v", got, v)
		}
	}
	// A read after the commit must see the new state only.
	if v := check(&post, &post, neverWritten); v != verdictWrong {
		t.Errorf("after commit: the old state passed: %v", v)
	}
	if v := check(&post, &post, st); v != verdictOK {
		t.Errorf("after commit: the new state failed: %v", v)
	}
	// Another key is unaffected.
	var other keyView
	o.view(2, &other)
	if check(&other, &other, st) != verdictWrong || check(&other, &other, neverWritten) != verdictOK {
		t.Errorf("key 2 saw key 1's write")
	}
}

func TestOracleFailedWriteStaysPending(t *testing.T) {
	o := newOracle(1)
	unlock := o.lock([]int{0})
	st := o.begin(0, false) // and never committed: the write failed
	unlock()
	var v keyView
	o.view(0, &v)
	if check(&v, &v, st) != verdictOK || check(&v, &v, neverWritten) != verdictOK {
		t.Fatal("a failed write must leave both outcomes possible")
	}
	o.resolve(0, st)
	o.view(0, &v)
	if check(&v, &v, neverWritten) != verdictWrong || check(&v, &v, st) != verdictOK {
		t.Fatal("resolve did not settle the key")
	}
	if next := o.nextVersion(0); next != st.ver+1 {
		t.Fatalf("next version %d after resolving %v", next, st)
	}
}

func TestOracleUnverifiable(t *testing.T) {
	o := newOracle(1)
	var pre, post keyView
	o.view(0, &pre)
	for i := 0; i < ringLen; i++ {
		st := o.begin(0, i%2 == 0)
		o.commit(0, st)
	}
	o.view(0, &post)
	if v := check(&pre, &post, set(999)); v != verdictUnverifiable {
		t.Fatalf("a read spanning %d commits: %v, want unverifiable", ringLen, v)
	}
	// Overflowing the pending slots makes the key unverifiable too.
	for i := 0; i <= maxPending; i++ {
		o.begin(0, false)
	}
	o.view(0, &post)
	if v := check(&post, &post, set(12345)); v != verdictUnverifiable {
		t.Fatalf("overflowed key: %v, want unverifiable", v)
	}
}

func TestOracleLockNoDeadlock(t *testing.T) {
	o := newOracle(64)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				keys := []int{(g * 7) % 64, (i * 13) % 64, (g + i) % 64, (i * 13) % 64}
				unlock := o.lock(keys)
				sts := make([]kstate, len(keys))
				for j, k := range keys[:3] {
					sts[j] = o.begin(k, false)
				}
				for j, k := range keys[:3] {
					o.commit(k, sts[j])
				}
				unlock()
			}
		}(g)
	}
	wg.Wait()
	var v keyView
	for k := 0; k < 64; k++ {
		o.view(k, &v)
		if v.npending != 0 {
			t.Fatalf("key %d has %d pending writes after all committed", k, v.npending)
		}
	}
}

func TestExpectedDescribes(t *testing.T) {
	o := newOracle(1)
	var pre, post keyView
	o.view(0, &pre)
	st := o.begin(0, false)
	o.view(0, &post)
	got := expected(&pre, &post)
	want := "absent (never written) or version 1 (write in flight or failed)"
	if got != want || st.ver != 1 {
		t.Fatalf("expected() = %q, want %q", got, want)
	}
}

func BenchmarkOracleReadCheck(b *testing.B) {
	o := newOracle(1000)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var pre, post keyView
		k := 0
		for pb.Next() {
			k = (k + 7) % 1000
			o.view(k, &pre)
			o.view(k, &post)
			if check(&pre, &post, neverWritten) != verdictOK {
				b.Fatal("wrong")
			}
		}
	})
}

func BenchmarkOracleWrite(b *testing.B) {
	o := newOracle(1000)
	b.ReportAllocs()
	keys := []int{0}
	for i := 0; i < b.N; i++ {
		keys[0] = i % 1000
		unlock := o.lock(keys)
		st := o.begin(keys[0], false)
		o.commit(keys[0], st)
		unlock()
	}
}
