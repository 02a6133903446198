package stress

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// CrashMode selects how a run crashes the DB.
type CrashMode string

// Crash modes.
const (
	// CrashNone runs without crashing and verifies at the end (and across a
	// clean close and reopen).
	CrashNone CrashMode = "none"
	// CrashInProcess runs on vfs.NewStrictMem and, at random points, drops
	// everything not synced (SetIgnoreSyncs, Close, ResetToSyncedState),
	// reopens and checks the recovered state against the history.
	CrashInProcess CrashMode = "inprocess"
	// CrashKill runs the workload in a child process on a real directory,
	// kills it with SIGKILL at random moments, and checks each recovery
	// against the op log the child left.
	CrashKill CrashMode = "kill"
)

// ParseCrashMode parses a --crash value.
func ParseCrashMode(s string) (CrashMode, error) {
	switch m := CrashMode(strings.ToLower(s)); m {
	case CrashNone, CrashInProcess, CrashKill:
		return m, nil
	}
	return "", fmt.Errorf("unknown crash mode %q: use none, inprocess or kill", s)
}

// Config configures a run. The zero value of each field means its default.
type Config struct {
	// Seed makes the run reproducible; 0 picks one from the clock (the run
	// prints it).
	Seed uint64
	// Duration bounds the run's wall time; Ops bounds its operation count.
	// With neither, the run lasts DefaultDuration.
	Duration time.Duration
	Ops      int64
	// Threads is the number of worker goroutines; default 4.
	Threads int
	// Crash is the crash mode; default CrashNone.
	Crash CrashMode
	// FaultRate is the probability that a file read, write or sync fails
	// with an injected error (0 = no faults).
	FaultRate float64
	// CorruptMemory flips bits in memtable entries, cached blocks and (with
	// batch protection) write batches before Apply, and counts how many
	// flips the DB reports.
	CorruptMemory bool
	// CorruptFiles flips a bit in a WAL, MANIFEST or CURRENT file of the
	// closed DB at some reopen points and counts how many flips Open
	// detects (see files.go).
	CorruptFiles bool
	// Dir is the directory for kill mode (default: a new temporary
	// directory, removed after a successful run).
	Dir string
	// Keys overrides the key-space size drawn from the seed.
	Keys int
	// Verbose prints every crash, reopen and verification.
	Verbose bool
	// Out receives the plan, the summary and any failure report; Log the
	// progress lines. Both default to io.Discard.
	Out io.Writer
	Log io.Writer
	// ProgressInterval is the time between progress lines; default 5s.
	ProgressInterval time.Duration
	// ChildCommand builds the command that runs a kill-mode child given
	// the path of its configuration file; the child must call RunChild
	// with that path. Required for CrashKill.
	ChildCommand func(configPath string) *exec.Cmd

	// testFault, if set, wraps the DB to misbehave in a known way, so that
	// tests can check the runner notices (see testFaults).
	testFault string
	// planHook lets tests adjust the drawn plan (force synced writes,
	// frequent crashes, a protection-bytes value).
	planHook func(*plan)
}

// DefaultDuration is the length of a run given neither Duration nor Ops.
const DefaultDuration = 30 * time.Second

// plan is everything a run decided from its seed: DB options and the
// workload's shape. It is printed first, and passed to kill-mode children
// whole, so that they run exactly the parent's plan.
type plan struct {
	Seed  uint64 `json:"seed"`
	Keys  int    `json:"keys"`
	Pad   int    `json:"key_pad"`
	Value int    `json:"max_value_filler"`
	// SyncPct is the percentage of writes issued with Sync.
	SyncPct int `json:"sync_pct"`
	// Threads, Crash, FaultRate, Corrupt repeat the configuration.
	Threads   int       `json:"threads"`
	Crash     CrashMode `json:"crash"`
	FaultRate float64   `json:"fault_rate"`
	Corrupt   bool      `json:"corrupt_memory"`
	// CorruptFiles repeats the configuration; FileFlipPct is the share of
	// reopen points (clean reopens, crashes, kills) that flip a bit in a
	// file first.
	CorruptFiles bool `json:"corrupt_files,omitempty"`
	FileFlipPct  int  `json:"file_flip_pct,omitempty"`
	// CrashEvery and ReopenEvery are the mean number of operations
	// between in-process crashes and between clean reopens.
	CrashEvery  int64 `json:"crash_every"`
	ReopenEvery int64 `json:"reopen_every"`
	FlipEvery   int64 `json:"flip_every"`
	// NoKeyFlips limits memtable flips to value bytes (tests use it to
	// cover the 8-protection-byte path apart from the open SeekLT bug).
	NoKeyFlips bool `json:"no_key_flips,omitempty"`
	// FlushOneIn and CompactOneIn: a worker operation is an explicit
	// Flush (Compact) with probability 1/FlushOneIn (1/CompactOneIn).
	// Scaled with the write buffer: each Flush allocates a new memtable
	// of WriteBufferSize, so with large buffers frequent flushes would
	// spend the run zeroing memory.
	FlushOneIn   int `json:"flush_one_in"`
	CompactOneIn int `json:"compact_one_in"`
	// IngestOneIn and CheckpointOneIn: likewise for an ingestion of an
	// external table and a checkpoint (see ingest.go); fixed, not drawn,
	// so that plans drawn before they existed are unchanged.
	IngestOneIn     int `json:"ingest_one_in"`
	CheckpointOneIn int `json:"checkpoint_one_in"`
	// DB options.
	Checksum      vigil.ChecksumType    `json:"checksum"`
	Paranoid      bool                  `json:"paranoid"`
	Protection    int                   `json:"protection_bytes"`
	WriteBuffer   int                   `json:"write_buffer"`
	MaxImm        int                   `json:"max_immutable"`
	BlockSize     int                   `json:"block_size"`
	Restart       int                   `json:"restart_interval"`
	Bloom         int                   `json:"bloom_bits"`
	Compression   vigil.Compression     `json:"compression"`
	Cache         int64                 `json:"cache"`
	MaxOpenFiles  int                   `json:"max_open_files"`
	L0Trigger     int                   `json:"l0_trigger"`
	L0Stop        int                   `json:"l0_stop"`
	LBase         int64                 `json:"lbase"`
	Multiplier    int                   `json:"multiplier"`
	TargetFile    int64                 `json:"target_file"`
	WALMode       vigil.WALRecoveryMode `json:"wal_recovery_mode"`
	DisableWAL    bool                  `json:"disable_wal"`
	NoAutoCompact bool                  `json:"no_auto_compactions"`
	Notes         []string              `json:"notes,omitempty"`

	// BatchProtection is Options.BatchProtectionBytesPerKey, drawn from a
	// random stream of its own (see drawBatchProtection).
	BatchProtection int `json:"batch_protection_bytes"`
	// WALRecycle is Options.WALRecycleFiles, drawn from a stream of its
	// own (see drawWALRecycle).
	WALRecycle int `json:"wal_recycle_files"`
	// SeekCompaction is Options.SeekCompactionBytes, drawn from a stream
	// of its own (see drawSeekCompaction).
	SeekCompaction int64 `json:"seek_compaction_bytes"`
}

// pick returns one of xs uniformly.
func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

// drawPlan decides a run's options and workload from the seed.
//
// A run is replayed from its seed alone, so the order of the draws below
// is part of the plan's meaning: each step draws from the one generator in
// a fixed order, and a new draw goes after every existing one (as the
// --corrupt-files draws do), or old seeds would draw other plans.
func drawPlan(cfg *Config) plan {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	p := plan{
		Seed:      cfg.Seed,
		Threads:   cfg.Threads,
		Crash:     cfg.Crash,
		FaultRate: cfg.FaultRate,
		Corrupt:   cfg.CorruptMemory,
		// CorruptFiles is set by forCorruptFiles, after every draw of the
		// plan without it: the option changes nothing else of a seed's plan.
	}
	p.drawWorkload(rng, cfg.Keys)
	p.drawOptions(rng)
	p.drawSchedule(rng)
	if p.Checksum == vigil.ChecksumNone && p.Protection > 0 {
		p.Protection = 0
		p.Notes = append(p.Notes, "protection bytes 0: checksum type none cannot compute them")
	}
	if p.Corrupt {
		p.forCorruptMemory(rng)
	}
	if cfg.CorruptFiles {
		p.forCorruptFiles(rng)
	}
	p.drawBatchProtection()
	p.drawWALRecycle()
	p.drawSeekCompaction()
	if cfg.planHook != nil {
		cfg.planHook(&p)
	}
	p.resolveConflicts()
	return p
}

// drawWorkload draws the key space, the key padding, the value sizes and
// the share of synced writes. keys, if positive, overrides the drawn key
// space (--keys); the draw is made anyway, to keep the later ones in place.
func (p *plan) drawWorkload(rng *rand.Rand, keys int) {
	// Tiny key spaces find concurrency bugs (every operation collides);
	// large ones build deep LSMs.
	p.Keys = pick(rng, 8, 16, 64, 256, 1000, 4000, 20000, 100000)
	if keys > 0 {
		p.Keys = keys
	}
	p.Pad = pick(rng, 0, 0, 4, 24)
	p.Value = pick(rng, 0, 24, 100, 400, 2000, 9000)
	p.SyncPct = pick(rng, 0, 0, 5, 30, 100)
}

// drawOptions draws the DB options: checksums and memory checks, memtable
// and table formats, the cache, the LSM's shape, and WAL recovery.
func (p *plan) drawOptions(rng *rand.Rand) {
	p.Checksum = pick(rng, vigil.ChecksumNone, vigil.ChecksumCRC32c, vigil.ChecksumXXHash,
		vigil.ChecksumXXHash64, vigil.ChecksumXXH3, vigil.ChecksumCRC64)
	p.Paranoid = rng.IntN(2) == 0
	p.Protection = pick(rng, 0, 1, 2, 4, 8)
	p.WriteBuffer = pick(rng, 64<<10, 64<<10, 128<<10, 256<<10, 1<<20, 4<<20, 16<<20, 64<<20)
	p.MaxImm = pick(rng, 1, 2, 2, 4)
	p.BlockSize = pick(rng, 128, 512, 4096, 4096, 16384, 65536)
	p.Restart = pick(rng, 1, 4, 16, 16, 64)
	p.Bloom = pick(rng, -1, 1, 5, 10, 10, 20)
	p.Compression = pick(rng, vigil.NoCompression, vigil.SnappyCompression)
	p.Cache = pick(rng, int64(-1), 256<<10, 4<<20, 64<<20)
	p.MaxOpenFiles = pick(rng, 16, 64, 1000)
	p.drawLevels(rng)
	p.WALMode = pick(rng, vigil.WALRecoverPointInTime, vigil.WALRecoverPointInTime,
		vigil.WALTolerateCorruptedTail, vigil.WALAbsoluteConsistency, vigil.WALSkipAnyCorrupted)
	p.DisableWAL = rng.IntN(7) == 0
	p.NoAutoCompact = rng.IntN(10) == 0
}

// drawLevels draws the LSM's shape: half the plans get small levels and
// files, the others the defaults; then the L0 stall point above the
// compaction trigger.
func (p *plan) drawLevels(rng *rand.Rand) {
	if rng.IntN(2) == 0 {
		// Small levels and files: compactions run all the time.
		p.L0Trigger = pick(rng, 1, 2, 4)
		p.TargetFile = pick(rng, int64(16<<10), 64<<10, 256<<10)
		p.LBase = pick(rng, int64(64<<10), 256<<10, 1<<20)
		p.Multiplier = pick(rng, 2, 4, 10)
	} else {
		p.L0Trigger = 4
		p.TargetFile = 4 << 20
		p.LBase = 64 << 20
		p.Multiplier = 10
	}
	p.L0Stop = p.L0Trigger + pick(rng, 2, 8, 16)
}

// drawSchedule draws how often the run crashes, reopens and flips, and
// sets how often a worker flushes, compacts, ingests and checkpoints
// (derived or fixed, not drawn: see the plan's fields).
func (p *plan) drawSchedule(rng *rand.Rand) {
	p.CrashEvery = pick(rng, int64(300), 2000, 10000, 50000)
	p.ReopenEvery = pick(rng, int64(5000), 30000, 150000)
	p.FlipEvery = pick(rng, int64(50), 200, 1000)
	p.FlushOneIn = min(300*(p.WriteBuffer/(64<<10)), 20000)
	p.CompactOneIn = 2 * p.FlushOneIn
	p.IngestOneIn, p.CheckpointOneIn = 1000, 2000
}

// forCorruptMemory adjusts the plan for --corrupt-memory. Detection needs
// the checks on, a checksum, a block cache to flip bits in, and a WAL to
// restore the memtable from after a detected corruption made the DB
// read-only.
func (p *plan) forCorruptMemory(rng *rand.Rand) {
	p.Paranoid = true
	if p.Checksum == vigil.ChecksumNone {
		p.Checksum = vigil.ChecksumXXH3
	}
	p.Protection = pick(rng, 1, 2, 4, 8, 8)
	if p.Cache <= 0 {
		p.Cache = 4 << 20
	}
	if p.DisableWAL {
		p.DisableWAL = false
		p.Notes = append(p.Notes, "WAL forced on: --corrupt-memory restores memtables from it")
	}
	if raceEnabled && !p.NoAutoCompact {
		// Background compactions read cached blocks with no lock the
		// runner can take; flipping them is a data race by design,
		// which the race detector reports. Manual compactions still run.
		p.NoAutoCompact = true
		p.Notes = append(p.Notes, "automatic compactions off: race detector build (flips in cached blocks would race with them)")
	}
}

// drawBatchProtection draws Options.BatchProtectionBytesPerKey from a
// random stream of its own, so that every draw of the plans made before the
// option existed stays what it was: off for a third of the plans without
// --corrupt-memory, and on (more often 8 bytes) with it, where write
// batches are flipped before Apply too.
func (p *plan) drawBatchProtection() {
	rng := rand.New(rand.NewPCG(p.Seed, 0xba7c4))
	if p.Corrupt {
		p.BatchProtection = pick(rng, 1, 2, 4, 8, 8)
	} else {
		p.BatchProtection = pick(rng, 0, 0, 1, 2, 4, 8)
	}
}

// drawWALRecycle draws Options.WALRecycleFiles from a random stream of its
// own (every other draw of a seed stays what it was): on for a third of
// the plans where the DB allows it (a WAL with checksums, read in
// PointInTime or SkipAny mode), so that crashes and kills land in WALs
// written over older ones. Not with --corrupt-files: there a flip in a
// recycled WAL's last record is its end by design (see package wal,
// Recycling), which that mode's checks would count as a loss.
func (p *plan) drawWALRecycle() {
	rng := rand.New(rand.NewPCG(p.Seed, 0x2ecc1e))
	allowed := !p.DisableWAL && !p.CorruptFiles && p.Checksum != vigil.ChecksumNone &&
		(p.WALMode == vigil.WALRecoverPointInTime || p.WALMode == vigil.WALSkipAnyCorrupted)
	if n := pick(rng, 0, 0, 2); allowed {
		p.WALRecycle = n
	}
}

// drawSeekCompaction draws Options.SeekCompactionBytes from a random
// stream of its own (every other draw of a seed stays what it was): the
// default for half the plans, off for a quarter, and for the rest so large
// that every table is compacted after its first 100 charged seeks, so that
// seek compactions run beside the workload's writes, flushes and
// compactions.
func (p *plan) drawSeekCompaction() {
	rng := rand.New(rand.NewPCG(p.Seed, 0x5eec))
	p.SeekCompaction = pick(rng, int64(0), 0, -1, 1<<40)
}

// forCorruptFiles adjusts the plan for --corrupt-files. Its draws come
// last, so that without the option the plan is the same.
func (p *plan) forCorruptFiles(rng *rand.Rand) {
	p.CorruptFiles = true
	p.FileFlipPct = pick(rng, 30, 60, 100)
	// More reopen points, each a chance to flip.
	p.ReopenEvery = pick(rng, int64(2000), 5000, 20000)
	// No ingestions or checkpoints: the memtable flushes they make
	// race with the background creation of the next WAL for file
	// numbers, so the files a seed flips would depend on timing.
	p.IngestOneIn, p.CheckpointOneIn = 0, 0
	p.Notes = append(p.Notes, "no ingestions or checkpoints: --corrupt-files flips by seed, and their flushes make file numbers depend on timing")
	if p.Checksum == vigil.ChecksumNone {
		p.Checksum = pick(rng, vigil.ChecksumCRC32c, vigil.ChecksumXXH3, vigil.ChecksumCRC64)
		p.Notes = append(p.Notes, fmt.Sprintf("checksum %s: --corrupt-files needs checksummed WAL and MANIFEST records (with none a flipped payload goes unnoticed by design)", p.Checksum.Resolve()))
	}
}

// resolveConflicts settles the combinations the DB refuses or that would
// stall the run. It runs after the tests' plan hook, so that it also
// covers what a hook forced.
func (p *plan) resolveConflicts() {
	if p.DisableWAL && p.SyncPct > 0 {
		// Apply refuses a synced write without a WAL (ErrInvalidArgument):
		// with no WAL to sync, acknowledging it would be a lie.
		p.SyncPct = 0
		p.Notes = append(p.Notes, "no synced writes: the WAL is disabled (a synced write is ErrInvalidArgument then)")
	}
	if p.Checksum == vigil.ChecksumNone && p.BatchProtection > 0 {
		p.BatchProtection = 0
		p.Notes = append(p.Notes, "batch protection bytes 0: checksum type none cannot compute them")
	}
	if p.WALRecycle > 0 && (p.Checksum == vigil.ChecksumNone ||
		(p.WALMode != vigil.WALRecoverPointInTime && p.WALMode != vigil.WALSkipAnyCorrupted)) {
		p.WALRecycle = 0 // Options.Validate refuses it (a plan hook changed the draws)
	}
	if p.NoAutoCompact {
		// Nothing would drain L0: never stall on it (workers compact by
		// hand now and then).
		p.L0Stop = 1 << 20
	}
}

// options builds the DB options of the plan on fs.
func (p *plan) options(fs vfs.FS) *vigil.Options {
	return &vigil.Options{
		FS:                            fs,
		ChecksumType:                  p.Checksum,
		ParanoidMemoryChecks:          p.Paranoid,
		MemtableProtectionBytesPerKey: p.Protection,
		BatchProtectionBytesPerKey:    p.BatchProtection,
		WriteBufferSize:               p.WriteBuffer,
		MaxImmutableMemtables:         p.MaxImm,
		BlockSize:                     p.BlockSize,
		BlockRestartInterval:          p.Restart,
		BloomBitsPerKey:               p.Bloom,
		Compression:                   p.Compression,
		BlockCacheSize:                p.Cache,
		MaxOpenFiles:                  p.MaxOpenFiles,
		L0CompactionTrigger:           p.L0Trigger,
		L0StopWritesTrigger:           p.L0Stop,
		LBaseMaxBytes:                 p.LBase,
		LevelMultiplier:               p.Multiplier,
		TargetFileSize:                p.TargetFile,
		WALRecoveryMode:               p.WALMode,
		DisableWAL:                    p.DisableWAL,
		WALRecycleFiles:               p.WALRecycle,
		DisableAutomaticCompactions:   p.NoAutoCompact,
		SeekCompactionBytes:           p.SeekCompaction,
	}
}

func (p *plan) keyCodec() keyCodec     { return keyCodec{n: p.Keys, pad: p.Pad} }
func (p *plan) valueCodec() valueCodec { return valueCodec{maxFiller: p.Value} }

// describe renders the plan for the first lines of a run's output.
func (p *plan) describe(cfg *Config) string {
	var b strings.Builder
	limit := fmt.Sprintf("duration=%v", cfg.Duration)
	if cfg.Ops > 0 {
		limit = fmt.Sprintf("ops=%d", cfg.Ops)
	}
	fmt.Fprintf(&b, "vigil stress: seed=%d crash=%s faults=%g corrupt-memory=%v", p.Seed, p.Crash, p.FaultRate, p.Corrupt)
	if p.CorruptFiles {
		b.WriteString(" corrupt-files=true")
	}
	fmt.Fprintf(&b, " threads=%d %s\n", p.Threads, limit)
	fmt.Fprintf(&b, "  replay: %s\n", p.replay(cfg))
	fmt.Fprintf(&b, "  workload: keys=%d key_pad<%d value_filler<=%d sync=%d%%", p.Keys, max(p.Pad, 1), p.Value, p.SyncPct)
	switch p.Crash {
	case CrashInProcess:
		fmt.Fprintf(&b, " crash_every~%d ops", p.CrashEvery)
	case CrashKill:
		fmt.Fprintf(&b, " (kills at random moments)")
	}
	fmt.Fprintf(&b, " reopen_every~%d ops flush_one_in=%d compact_one_in=%d ingest_one_in=%d checkpoint_one_in=%d",
		p.ReopenEvery, p.FlushOneIn, p.CompactOneIn, p.IngestOneIn, p.CheckpointOneIn)
	if p.Corrupt {
		fmt.Fprintf(&b, " flip_every~%d ops", p.FlipEvery)
	}
	if p.CorruptFiles {
		fmt.Fprintf(&b, " file_flip_at=%d%% of reopens", p.FileFlipPct)
	}
	b.WriteByte('\n')
	fmt.Fprintf(&b, "  options: checksum=%s paranoid=%v protection_bytes=%d batch_protection_bytes=%d write_buffer=%s max_immutable=%d\n",
		p.Checksum.Resolve(), p.Paranoid, p.Protection, p.BatchProtection, sizeStr(int64(p.WriteBuffer)), p.MaxImm)
	fmt.Fprintf(&b, "           block_size=%d restart=%d bloom_bits=%d compression=%s cache=%s max_open_files=%d\n",
		p.BlockSize, p.Restart, p.Bloom, p.Compression, sizeStr(p.Cache), p.MaxOpenFiles)
	fmt.Fprintf(&b, "           l0_trigger=%d l0_stop=%d lbase=%s multiplier=%d target_file=%s\n",
		p.L0Trigger, p.L0Stop, sizeStr(p.LBase), p.Multiplier, sizeStr(p.TargetFile))
	fmt.Fprintf(&b, "           wal_recovery=%s disable_wal=%v wal_recycle_files=%d auto_compactions=%v seek_compaction_bytes=%d\n",
		p.WALMode, p.DisableWAL, p.WALRecycle, !p.NoAutoCompact, p.SeekCompaction)
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}

func sizeStr(n int64) string {
	switch {
	case n < 0:
		return "off"
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
