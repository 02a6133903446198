package stress

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestTxnsMode runs the transactions mode briefly with in-process crashes.
func TestTxnsMode(t *testing.T) {
	var out strings.Builder
	res, err := RunTxns(context.Background(), TxnConfig{Seed: 11, Duration: 2 * time.Second, Threads: 4, Crash: CrashInProcess, Accounts: 6, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failure != nil || res.Committed == 0 || res.Crashes == 0 || res.Audits == 0 {
		t.Fatalf("%+v\n%s", res, out.String())
	}
	t.Log(out.String())
}

// TestTxnHistoryChecker: the checker catches a read the serial order does
// not give, a lost synced commit, a torn transfer, and accepts a lost
// unsynced tail.
func TestTxnHistoryChecker(t *testing.T) {
	start := []int{100, 100, 100}
	log := []txnCommit{
		{seq: 10, from: 0, to: 1, reads: [2]int{100, 100}, amount: 30, synced: true}, // 70 130 100
		{seq: 12, from: 1, to: 2, reads: [2]int{130, 100}, amount: 10},               // 70 120 110
	}
	for _, c := range []struct {
		name    string
		log     []txnCommit
		got     []int
		clean   bool
		wantErr string
		lost    int
	}{
		{"all there", log, []int{70, 120, 110}, true, "", 0},
		{"unsynced tail lost", log, []int{70, 130, 100}, false, "", 1},
		{"unsynced tail lost at a clean close", log, []int{70, 130, 100}, true, "no prefix", 0},
		{"synced commit lost", log, []int{100, 100, 100}, false, "no prefix", 0},
		{"torn transfer", log, []int{70, 100, 100}, false, "no prefix", 0},
		{"stale read", []txnCommit{log[0], {seq: 12, from: 1, to: 2, reads: [2]int{100, 100}, amount: 10}}, []int{70, 90, 110}, false, "not serializable", 0},
		{"commit order, not log order", []txnCommit{log[1], log[0]}, []int{70, 120, 110}, true, "", 0},
	} {
		lost, err := checkTxnHistory(start, append([]txnCommit(nil), c.log...), c.got, c.clean)
		if c.wantErr == "" && (err != nil || lost != c.lost) {
			t.Fatalf("%s: lost %d, %v; want %d, nil", c.name, lost, err, c.lost)
		}
		if c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Fatalf("%s: %v, want an error saying %q", c.name, err, c.wantErr)
		}
	}
}
