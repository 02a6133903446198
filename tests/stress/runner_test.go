package stress

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// childEnv names the configuration of a kill-mode child: the test binary
// re-executes itself as the child, and TestMain runs the child instead of
// the tests.
const childEnv = "VIGIL_STRESS_TEST_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(RunChild(context.Background(), path, os.Stderr))
	}
	os.Exit(m.Run())
}

func testChildCommand(configPath string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+configPath)
	setPdeathsig(cmd)
	return cmd
}

// runFor runs the runner for d (shorter with -short) and returns the
// result and its printed output.
func runFor(t *testing.T, cfg Config, d time.Duration) (*Result, string) {
	t.Helper()
	if testing.Short() {
		d /= 2
	}
	if cfg.Duration == 0 && cfg.Ops == 0 {
		cfg.Duration = d
	}
	var out bytes.Buffer
	cfg.Out = &out
	if cfg.Crash == CrashKill {
		cfg.ChildCommand = testChildCommand
		if cfg.Dir == "" {
			cfg.Dir = t.TempDir()
		}
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	return res, out.String()
}

func mustPass(t *testing.T, res *Result, out string) {
	t.Helper()
	if res.Failure != nil {
		t.Fatalf("healthy DB reported a divergence:\n%s", out)
	}
	if !strings.Contains(out, "PASS") || res.Ops == 0 {
		t.Fatalf("run did nothing or printed no verdict:\n%s", out)
	}
}

// The healthy runs: the runner must find nothing wrong with the DB in
// each mode, while doing what the mode promises (crashes, kills, faults,
// flips), and the numbers it prints must be the numbers it returns.

func TestHealthyNone(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		res, out := runFor(t, Config{Seed: seed, Threads: 4}, 1500*time.Millisecond)
		mustPass(t, res, out)
		if res.Verifications < 2 || res.Writes == 0 || res.Scans == 0 {
			t.Fatalf("seed %d: %+v", seed, res)
		}
		if want := fmt.Sprintf("vigil stress: seed=%d ", seed); !strings.HasPrefix(out, want) {
			t.Fatalf("the plan was not printed first (want %q):\n%s", want, out)
		}
	}
}

func TestHealthyInProcessCrashes(t *testing.T) {
	cfg := Config{Seed: 3, Threads: 4, Crash: CrashInProcess, planHook: func(p *plan) {
		p.CrashEvery = 400
		p.SyncPct = 30
	}}
	res, out := runFor(t, cfg, 2*time.Second)
	mustPass(t, res, out)
	if res.Crashes == 0 {
		t.Fatalf("no crash happened:\n%s", out)
	}
	t.Logf("%d crashes, %d acknowledged unsynced writes lost", res.Crashes, res.LostUnsynced)
}

func TestHealthyFaults(t *testing.T) {
	for _, crash := range []CrashMode{CrashNone, CrashInProcess} {
		res, out := runFor(t, Config{Seed: 5, Threads: 4, Crash: crash, FaultRate: 0.005}, 1500*time.Millisecond)
		mustPass(t, res, out)
		if res.InjectedFaults == 0 {
			t.Fatalf("%s: no fault injected:\n%s", crash, out)
		}
	}
}

// noBackgroundCompactions keeps flips from racing with background
// compactions, which under -race would be a reported data race by design
// (the flipper writes bytes the compaction reads). Workers still compact by
// hand, with the flipper stopped.
func noBackgroundCompactions(p *plan) {
	p.NoAutoCompact = true
	p.L0Stop = 1 << 20
}

func TestHealthyCorruptMemory(t *testing.T) {
	// Four protection bytes: a flip may escape the check (probability
	// 2^-32), and misses are counted, not fatal; TestHealthyCorruptMemory8
	// covers the no-miss guarantee.
	cfg := Config{Seed: 6, Threads: 4, CorruptMemory: true, planHook: func(p *plan) {
		p.Protection = 4
		p.FlipEvery = 60
		noBackgroundCompactions(p)
	}}
	res, out := runFor(t, cfg, 2*time.Second)
	mustPass(t, res, out)
	f := res.Flips
	tot := f.Total()
	if tot.Injected == 0 || tot.DetectedAtRead == 0 {
		t.Fatalf("flips injected %d, detected %d:\n%s", tot.Injected, tot.DetectedAtRead, out)
	}
	// A flip in a value or a cached block escapes a 32-bit or 64-bit
	// check with negligible probability: none may be missed.
	if f.MemtableValue.Missed != 0 || f.Block.Missed != 0 {
		t.Fatalf("value or block flips missed:\n%s", out)
	}
	// Read (and apply) outcomes are exclusive; flush detections may
	// overlap them.
	if excl := tot.DetectedAtRead + tot.DetectedAtApply + tot.Missed + tot.NoEffect; excl > tot.Injected || excl+tot.DetectedAtFlush < tot.Injected {
		t.Fatalf("flip outcomes do not add up: %+v", tot)
	}
	if !strings.Contains(out, "memtable key") || !strings.Contains(out, "cached block") {
		t.Fatalf("no per-target flip table:\n%s", out)
	}
}

// TestHealthyCorruptMemory8 covers the 8-protection-byte path: key and
// value flips the workers must run into (released), and Flush refusing a
// corrupt memtable; any miss fails the run.
func TestHealthyCorruptMemory8(t *testing.T) {
	// By op count, not time: a slow (race) build must still see enough
	// flips of each kind (about 60 in all).
	cfg := Config{Seed: 8, Threads: 4, Ops: 2500, CorruptMemory: true, planHook: func(p *plan) {
		p.Protection = 8
		p.FlipEvery = 40
		p.Keys = 256
		noBackgroundCompactions(p)
	}}
	res, out := runFor(t, cfg, 0)
	mustPass(t, res, out)
	f := res.Flips
	if f.MemtableKey.Injected < 3 || f.MemtableValue.Injected < 3 {
		t.Fatalf("want several key and value flips:\n%s", out)
	}
	// Every memtable flip is caught at read, and with 8 bytes Flush must
	// refuse the memtable (the runner fails the run otherwise); a third of
	// the memtable flips go through that Flush.
	for name, c := range map[string]FlipCounts{"key": f.MemtableKey, "value": f.MemtableValue} {
		if c.Missed != 0 || c.DetectedAtRead != c.Injected || c.DetectedAtFlush == 0 {
			t.Fatalf("memtable %s flips missed, undetected, or never refused by a flush:\n%s", name, out)
		}
	}
	if tot := f.Total(); tot.Missed != 0 {
		t.Fatalf("flips missed:\n%s", out)
	}
}

// TestHealthyCorruptMemoryBatch covers write batch flips: with 8 batch
// protection bytes every flip in the records is refused by Apply and
// nothing of the batch is visible after (the runner reads it back), a flip
// in the header has no effect, and a miss fails the run; with 1 byte the
// flips go into a decoy value, so a miss (2^-8 each) is counted, harmless.
func TestHealthyCorruptMemoryBatch(t *testing.T) {
	for _, n := range []int{8, 1} {
		t.Run(fmt.Sprintf("bytes=%d", n), func(t *testing.T) {
			cfg := Config{Seed: 9, Threads: 3, Ops: 4000, CorruptMemory: true, planHook: func(p *plan) {
				p.BatchProtection = n
				p.FlipEvery = 50
				p.Keys = 256
				noBackgroundCompactions(p)
			}}
			res, out := runFor(t, cfg, 0)
			mustPass(t, res, out)
			c := res.Flips.Batch
			if c.Injected < 10 || c.DetectedAtApply == 0 || c.DetectedAtRead != 0 || c.DetectedAtFlush != 0 {
				t.Fatalf("batch flips: %+v:\n%s", c, out)
			}
			if c.DetectedAtApply+c.Missed+c.NoEffect != c.Injected {
				t.Fatalf("batch flip outcomes do not add up: %+v", c)
			}
			if n == 8 && c.Missed != 0 {
				t.Fatalf("missed with 8 bytes:\n%s", out)
			}
			if n == 1 && c.NoEffect != 0 {
				t.Fatalf("a decoy flip had no effect: %+v", c)
			}
			if res.Flips.BatchCorruptions != c.DetectedAtApply {
				t.Fatalf("Metrics counted %d batches refused, the runner %d:\n%s", res.Flips.BatchCorruptions, c.DetectedAtApply, out)
			}
			if !strings.Contains(out, "write batch") {
				t.Fatalf("no write batch row in the flip table:\n%s", out)
			}
		})
	}
}

// TestDetectsUncheckedBatch: a DB that writes a batch without checking it
// against its protection (the test fault re-encodes each batch into a
// fresh one, protected at Apply from the flipped bytes) must fail a run
// with 8 batch protection bytes.
func TestDetectsUncheckedBatch(t *testing.T) {
	mustDetect(t, Config{Seed: 44, Threads: 2, Ops: 20000, CorruptMemory: true, testFault: "unchecked-batches", planHook: func(p *plan) {
		p.BatchProtection = 8
		p.FlipEvery = 50
		small(p)
		noBackgroundCompactions(p)
	}}, 0, "write batch bit flip")
}

func TestHealthyKill(t *testing.T) {
	res, out := runFor(t, Config{Seed: 7, Threads: 3, Crash: CrashKill}, 4*time.Second)
	mustPass(t, res, out)
	if res.Kills == 0 || res.Verifications != res.Kills {
		t.Fatalf("kills %d, verifications %d:\n%s", res.Kills, res.Verifications, out)
	}
}

// TestReproducible: a single-threaded run with a given seed issues the same
// operations and crashes at the same points.
func TestReproducible(t *testing.T) {
	cfg := Config{Seed: 11, Threads: 1, Ops: 3000, Crash: CrashInProcess, planHook: func(p *plan) { p.CrashEvery = 500 }}
	a, outA := runFor(t, cfg, 0)
	b, outB := runFor(t, cfg, 0)
	mustPass(t, a, outA)
	mustPass(t, b, outB)
	type mix struct{ r, w, s, sn, f, c, cr int64 }
	ma := mix{a.Reads, a.Writes, a.Scans, a.Snapshots, a.Flushes, a.Compactions, a.Crashes}
	mb := mix{b.Reads, b.Writes, b.Scans, b.Snapshots, b.Flushes, b.Compactions, b.Crashes}
	if ma != mb || a.Crashes == 0 {
		t.Fatalf("same seed, different runs: %+v vs %+v", ma, mb)
	}
}

// The detection tests: a runner that cannot fail is worthless. Each puts a
// store with one known defect in front of the runner and checks that the
// run fails with a report naming the right kind of operation.

func mustDetect(t *testing.T, cfg Config, d time.Duration, wantOp string) {
	t.Helper()
	res, out := runFor(t, cfg, d)
	if res.Failure == nil {
		t.Fatalf("fault %q went unnoticed:\n%s", cfg.testFault, out)
	}
	if !strings.Contains(res.Failure.Op, wantOp) {
		t.Fatalf("fault %q reported as %q, want an op containing %q:\n%s", cfg.testFault, res.Failure.Op, wantOp, out)
	}
	for _, s := range []string{"DIVERGENCE", "seed:", "replay:", "FAIL"} {
		if !strings.Contains(out, s) {
			t.Fatalf("report lacks %q:\n%s", s, out)
		}
	}
	t.Logf("fault %q detected: %v", cfg.testFault, res.Failure)
}

func small(p *plan) { p.Keys = 64 }

func TestDetectsDroppedWrite(t *testing.T) {
	mustDetect(t, Config{Seed: 21, Threads: 2, testFault: "drop-put", planHook: small}, 4*time.Second, "")
}

func TestDetectsStaleRead(t *testing.T) {
	mustDetect(t, Config{Seed: 22, Threads: 2, testFault: "stale-get", planHook: small}, 4*time.Second, "get")
}

func TestDetectsCorruptValue(t *testing.T) {
	res, out := runFor(t, Config{Seed: 23, Threads: 2, testFault: "flip-get", planHook: small}, 4*time.Second)
	if res.Failure == nil || !strings.Contains(res.Failure.Got+res.Failure.Detail, "value") {
		t.Fatalf("flipped value not reported as a wrong value:\n%s", out)
	}
}

func TestDetectsSkippedKey(t *testing.T) {
	mustDetect(t, Config{Seed: 24, Threads: 2, testFault: "skip-next", planHook: small}, 4*time.Second, "scan")
}

func TestDetectsSnapshotViolation(t *testing.T) {
	mustDetect(t, Config{Seed: 25, Threads: 2, testFault: "snapshot-latest", planHook: small}, 4*time.Second, "snapshot")
}

// TestDetectsLostSyncedWrite: synced writes acknowledged but not synced
// are lost by the first in-process crash; only the crash checker can see
// it.
func TestDetectsLostSyncedWrite(t *testing.T) {
	cfg := Config{Seed: 26, Threads: 2, Crash: CrashInProcess, testFault: "sync-lie", planHook: func(p *plan) {
		small(p)
		p.SyncPct = 100
		p.DisableWAL = false
		p.WriteBuffer = 64 << 20
		p.CrashEvery = 400
	}}
	res, out := runFor(t, cfg, 4*time.Second)
	if res.Failure == nil || !strings.Contains(res.Failure.Detail, "acknowledged as synced") {
		t.Fatalf("lost synced writes not reported:\n%s", out)
	}
}

// TestDetectsInKillMode: a defect in the child is reported by the parent,
// whether the child's live checks or the parent's recovery check see it.
func TestDetectsInKillMode(t *testing.T) {
	mustDetect(t, Config{Seed: 27, Threads: 2, Crash: CrashKill, testFault: "drop-put", planHook: small}, 6*time.Second, "")
}

// BenchmarkRun measures whole runner operations (DB call plus checks),
// single-threaded on an in-memory DB with a fixed plan.
func BenchmarkRun(b *testing.B) {
	cfg := Config{Seed: 42, Threads: 1, Ops: int64(b.N), planHook: func(p *plan) {
		p.Keys = 1000
		p.WriteBuffer = 1 << 20
		p.ReopenEvery = 0
		p.FlushOneIn, p.CompactOneIn = 5000, 10000
	}}
	b.ReportAllocs()
	res, err := Run(context.Background(), cfg)
	if err != nil || res.Failure != nil {
		b.Fatalf("%v %v", err, res.Failure)
	}
}
