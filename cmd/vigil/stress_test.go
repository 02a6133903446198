package main

import (
	"strings"
	"testing"
)

// TestStressMerges: `vigil stress --merges` runs the merges mode (its plan
// first, its verdict last, exit 0), and its misuses exit 2.
func TestStressMerges(t *testing.T) {
	out, err := run(t, "stress", "--merges", "--seed=3", "--duration=500ms", "--merger=append", "--crash=inprocess", "--keys=16")
	if err != nil || !strings.HasPrefix(out, "vigil stress --merges: seed=3 operator=append crash=inprocess") || !strings.HasSuffix(out, "PASS\n") {
		t.Fatalf("err %v, output:\n%s", err, out)
	}
	for _, args := range [][]string{
		{"stress", "--merges", "--txns"},
		{"stress", "--merges", "--crash=kill"},
		{"stress", "--merges", "--faults=0.01"},
		{"stress", "--merges", "--corrupt-memory"},
		{"stress", "--merges", "--merger=max"},
		{"stress", "--merger=append"},
	} {
		if _, err := run(t, args...); exitCode(err) != 2 {
			t.Errorf("%v: exit %d (%v), want 2", args, exitCode(err), err)
		}
	}
}
