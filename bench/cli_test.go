package bench

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func parse(t *testing.T, args ...string) *CLI {
	t.Helper()
	c := NewCLI()
	if err := c.Parse(args); err != nil {
		t.Fatalf("Parse(%q): %v", args, err)
	}
	return c
}

// TestEveryDBBenchFlagAccepted: each of db_bench 7.8.3's flags parses in
// both spellings at db_bench's default, without a notice (a default merely
// restated is never "not applicable") and with a valid Config.
func TestEveryDBBenchFlagAccepted(t *testing.T) {
	if len(dbBenchFlags) < 400 {
		t.Fatalf("only %d db_bench flags in the table", len(dbBenchFlags))
	}
	for _, f := range dbBenchFlags {
		if isHelpFlag(f.name) || f.name == "version" || f.name == "flagfile" || f.name == "fromenv" {
			continue
		}
		def := f.def
		if f.name == "benchmarks" {
			def = "fillseq"
		}
		for _, dash := range []string{"-", "--"} {
			c := NewCLI()
			if err := c.Parse([]string{dash + f.name + "=" + def}); err != nil {
				t.Errorf("%s%s=%s: %v", dash, f.name, def, err)
				continue
			}
			if !c.Changed(f.name) {
				t.Errorf("%s%s: not recorded as set", dash, f.name)
			}
			if n := c.Notices(); len(n) != 0 {
				t.Errorf("%s%s=%s (db_bench's default): notices %v", dash, f.name, def, n)
			}
			if _, err := c.Config(); err != nil {
				t.Errorf("%s%s=%s: Config: %v", dash, f.name, def, err)
			}
		}
	}
}

func TestUnknownFlagIsUsageError(t *testing.T) {
	for _, args := range [][]string{{"--nosuchflag=1"}, {"-memtable_rep=vector"}, {"--sync", "false"}, {"--num"}, {"--num=abc"}} {
		err := NewCLI().Parse(args)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: error %v, want a UsageError", args, err)
		}
	}
	err := NewCLI().Parse([]string{"--nosuchflag=1"})
	if err == nil || !strings.Contains(err.Error(), "--nosuchflag") || !strings.Contains(err.Error(), "db_bench") {
		t.Errorf("message %v should name the flag and db_bench", err)
	}
}

// TestNotices: the pasted line names exactly the flags Vigil
// cannot honour; honoured values, output-only flags and other tools' flags
// stay silent.
func TestNotices(t *testing.T) {
	c := parse(t, "-benchmarks=fillseq", "-memtablerep=vector", "-allow_concurrent_memtable_write=false",
		"-num=30000", "-checksum_type=1", "--use_direct_reads=true", "--compression_type=lz4",
		"--memtablerep=vector", "--stats_interval_seconds=5", "--report_interval_seconds=1",
		"--print_malloc_stats", "--mrc_only=true", "--analyze_get=true", "--verify_checksum=true",
		"--level0_slowdown_writes_trigger=8", "--delayed_write_rate=1000000", "--max_bytes_for_level_multiplier=8.5")
	var got []string
	for _, n := range c.Notices() {
		got = append(got, n.Flag)
		if n.Instead == "" {
			t.Errorf("%s: no note of what ran instead", n.Flag)
		}
	}
	want := []string{"--allow_concurrent_memtable_write=false", "--compression_type=lz4",
		"--max_bytes_for_level_multiplier=8.5", "--memtablerep=vector", "--use_direct_reads=true"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("notices for\n %v\nwant\n %v", got, want)
	}
	cfg, err := c.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Engine.Compression != "snappy" || cfg.Engine.ChecksumType != 1 || cfg.Num != 30000 ||
		cfg.Engine.L0SlowdownWritesTrigger != 8 || cfg.Engine.DelayedWriteRate != 1000000 {
		t.Errorf("config %+v", cfg.Engine)
	}
	z := parse(t, "--compression_type=zstd", "--compression_level=9")
	if n := z.Notices(); len(n) != 0 {
		t.Errorf("zstd at level 9 reported: %v", n)
	}
	if cfg, err := z.Config(); err != nil || cfg.Engine.Compression != "zstd" || cfg.Engine.ZstdLevel != 9 {
		t.Errorf("zstd at level 9: %+v, %v", cfg.Engine, err)
	}
	m := parse(t, "--compression_type=zstd", "--min_level_to_compress=2")
	if cfg, err := m.Config(); err != nil || len(m.Notices()) != 0 || cfg.Engine.MinLevelToCompress != 2 {
		t.Errorf("--min_level_to_compress=2: %+v, %v, notices %v", cfg.Engine, err, m.Notices())
	}
	if n := parse(t, "--compression_type=zstd", "--compression_level=40").Notices(); len(n) != 1 {
		t.Errorf("zstd level 40: notices %v, want one", n)
	}
	if n := parse(t, "--memtablerep=skip_list", "--allow_concurrent_memtable_write=true", "--level0_slowdown_writes_trigger=40").Notices(); len(n) != 0 {
		t.Errorf("honoured values reported: %v", n)
	}
}

// TestMappedFlagsTakeEffect: the db_bench flags that map onto Vigil reach
// vigil.Options.
func TestMappedFlagsTakeEffect(t *testing.T) {
	c := parse(t, "--max_write_buffer_number=4", "--level0_file_num_compaction_trigger=6",
		"--level0_stop_writes_trigger=30", "--max_bytes_for_level_base=1048576", "--max_bytes_for_level_multiplier=8",
		"--target_file_size_base=2097152", "--open_files=-1", "--disable_auto_compactions", "--wal_recovery_mode=0",
		"--block_restart_interval=8", "--cache_size=0", "--bloom_bits=-1", "--write_buffer_size=1048576",
		"--batch_size=10", "--readwritepercent=70", "--statistics", "--seek_nexts=2", "--deletes=5", "--duration=2",
		"--verify_checksum=false", "--write_batch_protection_bytes_per_key=8")
	cfg, err := c.Config()
	if err != nil {
		t.Fatal(err)
	}
	if ro, _ := parse(t, "--readonly").Config(); !ro.Engine.ReadOnly {
		t.Error("--readonly not passed on")
	}
	// --cost_write_buffer_to_cache makes --cache_size one limit for blocks
	// and memtables; without a cache it has nothing to charge.
	for _, tc := range []struct {
		cache  string
		budget int64
	}{{"1048576", 1 << 20}, {"0", 0}} {
		cc, err := parse(t, "--cost_write_buffer_to_cache", "--cache_size="+tc.cache).Config()
		if err != nil {
			t.Fatal(err)
		}
		vo, err := VigilOptions(cc.Engine)
		if err != nil {
			t.Fatal(err)
		}
		if vo.MemoryBudget != tc.budget {
			t.Errorf("--cost_write_buffer_to_cache --cache_size=%s: MemoryBudget %d, want %d", tc.cache, vo.MemoryBudget, tc.budget)
		}
	}
	if cfg.BatchSize != 10 || cfg.ReadWritePercent != 70 || !cfg.Statistics || cfg.SeekNexts != 2 || cfg.Deletes != 5 || cfg.Duration.Seconds() != 2 {
		t.Errorf("workload config %+v", cfg)
	}
	o, err := VigilOptions(cfg.Engine)
	if err != nil {
		t.Fatal(err)
	}
	if o.MaxImmutableMemtables != 3 || o.L0CompactionTrigger != 6 || o.L0StopWritesTrigger != 30 ||
		o.LBaseMaxBytes != 1<<20 || o.LevelMultiplier != 8 || o.TargetFileSize != 2<<20 ||
		o.MaxOpenFiles != unlimitedOpenFiles || !o.DisableAutomaticCompactions || o.WALRecoveryMode.RocksDB() != 0 ||
		o.BlockRestartInterval != 8 || o.BlockCacheSize >= 0 || o.BloomBitsPerKey >= 0 || o.WriteBufferSize != 1<<20 ||
		!o.SkipReadChecksums || o.BatchProtectionBytesPerKey != 8 {
		t.Errorf("vigil options:\n%s", o)
	}
	if err := o.EnsureDefaults().Validate(); err != nil {
		t.Error(err)
	}
	// Unset, Vigil's defaults stay.
	d, err := parse(t).Config()
	if err != nil {
		t.Fatal(err)
	}
	if d.Engine.MaxImmutableMemtables != 0 || d.Engine.L0StopWritesTrigger != 0 || d.Engine.CacheSize != 64<<20 || d.Engine.BloomBits != 10 ||
		d.Engine.SkipReadChecksums || d.Engine.BatchProtectionBytesPerKey != 0 {
		t.Errorf("defaults %+v", d.Engine)
	}
}

func TestGflagsSpellings(t *testing.T) {
	dir := t.TempDir()
	ff := filepath.Join(dir, "flags")
	os.WriteFile(ff, []byte("# a comment\n--num=77\n\n-value_size=33\n"), 0o644)
	t.Setenv("FLAGS_key_size", "24")
	c := parse(t, "-reads", "5", "--nouse_existing_db", "-sync", "--flagfile="+ff,
		"--undefok=made_up,other", "--made_up=3", "--fromenv=key_size", "--seed", "-9")
	cfg, err := c.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Reads != 5 || cfg.UseExistingDB || !cfg.Sync || cfg.Num != 77 || cfg.ValueSize != 33 || cfg.KeySize != 24 {
		t.Errorf("config %+v", cfg)
	}
	for _, b := range []string{"yes", "y", "1", "t", "TRUE"} {
		if !parse(t, "--sync="+b).boolFlag("sync") {
			t.Errorf("--sync=%s is false", b)
		}
	}
	if !parse(t, "--help").HelpRequested() || !parse(t, "-helpshort").HelpRequested() || !parse(t, "--version").VersionRequested() {
		t.Error("help/version not recognised")
	}
	if err := NewCLI().Parse([]string{"--fromenv=nosuch_flag_at_all"}); err == nil {
		t.Error("--fromenv of an unknown flag accepted")
	}
}

func TestHelpGroupsAndNotApplicableList(t *testing.T) {
	var b bytes.Buffer
	NewCLI().WriteHelp(&b)
	out := b.String()
	for _, want := range []string{"Workload:", "DB options", "Output:", "not applicable to Vigil", "memtablerep (honoured: skip_list)",
		"allow_concurrent_memtable_write (honoured: true)", "use_direct_reads", "--batch_size=int64", "--statistics=bool",
		"level0_slowdown_writes_trigger", "needs vigil.Options.MemoryBudget", "Benchmarks (", "fillbatch"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	// Every db_bench flag appears somewhere in the help.
	for _, f := range dbBenchFlags {
		if !strings.Contains(out, f.name) {
			t.Errorf("help does not mention %s", f.name)
		}
	}
}
