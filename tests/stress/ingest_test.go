package stress

import (
	"sync/atomic"
	"testing"
	"time"
)

// Test faults of the ingestion and checkpoint operations (see
// testfaults_test.go).
func init() {
	testFaults["drop-ingest"] = func(s store) store { return &dropIngest{store: s} }
	testFaults["excise-ignored"] = func(s store) store { return &exciseIgnored{store: s} }
	testFaults["checkpoint-missing"] = func(s store) store { return &checkpointMissing{store: s} }
}

// dropIngest acknowledges every other ingestion without doing it.
type dropIngest struct {
	store
	n atomic.Int64
}

func (d *dropIngest) Ingest(paths []string) error {
	if d.n.Add(1)%2 == 0 {
		return nil
	}
	return d.store.Ingest(paths)
}

func (d *dropIngest) IngestAndExcise(paths []string, start, end []byte) error {
	if d.n.Add(1)%2 == 0 {
		return nil
	}
	return d.store.IngestAndExcise(paths, start, end)
}

// exciseIgnored ingests without emptying the range first.
type exciseIgnored struct{ store }

func (e *exciseIgnored) IngestAndExcise(paths []string, _, _ []byte) error {
	return e.store.Ingest(paths)
}

// checkpointMissing acknowledges checkpoints without writing them.
type checkpointMissing struct{ store }

func (c *checkpointMissing) Checkpoint(string) error { return nil }

func TestDetectsDroppedIngest(t *testing.T) {
	mustDetect(t, Config{Seed: 31, Threads: 2, testFault: "drop-ingest", planHook: ingestOften}, 4*time.Second, "")
}

func TestDetectsIgnoredExcise(t *testing.T) {
	mustDetect(t, Config{Seed: 32, Threads: 2, testFault: "excise-ignored", planHook: ingestOften}, 4*time.Second, "")
}

func TestDetectsMissingCheckpoint(t *testing.T) {
	mustDetect(t, Config{Seed: 33, Threads: 2, testFault: "checkpoint-missing", planHook: ingestOften}, 4*time.Second, "checkpoint")
}

// ingestOften makes ingestions and checkpoints frequent.
func ingestOften(p *plan) {
	small(p)
	p.WriteBuffer = min(p.WriteBuffer, 1<<20)
	p.IngestOneIn, p.CheckpointOneIn = 20, 50
}

// The healthy runs take ingestions and checkpoints, and check them.
func TestHealthyIngestAndCheckpoint(t *testing.T) {
	res, out := runFor(t, Config{Seed: 34, Threads: 2, Crash: CrashInProcess, Ops: 3000, planHook: ingestOften}, 0)
	if res.Failure != nil {
		t.Fatalf("healthy run failed:\n%s", out)
	}
	if res.Ingests == 0 || res.Checkpoints == 0 {
		t.Fatalf("%d ingestions, %d checkpoints in a run of %d ops", res.Ingests, res.Checkpoints, res.Ops)
	}
	t.Logf("%d ops: %d ingestions, %d checkpoints", res.Ops, res.Ingests, res.Checkpoints)
}
