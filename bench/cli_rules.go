package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/vigildb/vigil/checksum"
)

// flagGroup is where --help lists a flag.
type flagGroup uint8

const (
	groupNA       flagGroup = iota // accepted, not applicable to Vigil
	groupWorkload                  // what the benchmarks do
	groupDB                        // engine options that take effect
	groupOutput                    // what is printed
	groupGflags                    // gflags' own flags
	groupNoEffect                  // flags of the tools linked into db_bench: no effect there either
)

// flagRule says how kvbench treats one flag.
type flagRule struct {
	group flagGroup
	// def is kvbench's default where it differs from db_bench's.
	def *string
	// typ overrides the flag's type (checksum_type also takes names,
	// duration also takes Go durations).
	typ *flagType
	// usage is --help's text for flags that take effect.
	usage string
	// instead says what Vigil ran instead of a value it cannot honour; nil
	// means the flag never needs a notice.
	instead func(c *CLI, v *cliValue) string
	// honoured reports whether Vigil honours the value; nil means only
	// db_bench's default is honoured.
	honoured func(c *CLI, v *cliValue) bool
	// rootOption names the vigil.Options field Vigil would need.
	rootOption string
	// honouredValues is --help's note on what values are honoured, for
	// not-applicable flags with a honoured value other than the default.
	honouredValues string
	// atDefault reports whether the flag, left at db_bench's default,
	// still needs its notice: another flag made that default one Vigil
	// cannot honour. nil: never.
	atDefault func(c *CLI) bool
}

func strp(s string) *string { return &s }

// typeString is the type of flags that kvbench reads as strings.
var typeString = flagString

// vigilFlags are kvbench's flags that db_bench 7.8.3 does not have.
var vigilFlags = []dbBenchFlag{
	{"paranoid_memory_checks", flagBool, "false", srcVigil},
	{"scrub_interval", flagString, "", srcVigil},
	{"wal_recovery_mode", flagInt32, "2", srcVigil},
	{"stats", flagBool, "false", srcVigil},
	{"json", flagString, "", srcVigil},
	{"cpuprofile", flagString, "", srcVigil},
	{"key_shape", flagString, "dbbench", srcVigil},
}

// keyShapeUsage describes the --key_shape names for --help.
const keyShapeUsage = "dbbench (db_bench's: --key_size bytes, the index big-endian then '0's), " +
	"decimal (16 digits, %016d), prefixed (12 shared bytes + the index big-endian, 20 bytes), " +
	"hashed ('h' + a 32-byte hash, 33 bytes, random order), varlen (user:<index>:<field>, 10-40 bytes)"

// fixed is an instead that always says the same.
func fixed(note string) func(*CLI, *cliValue) string {
	return func(*CLI, *cliValue) string { return note }
}

func wantBool(b bool) func(*CLI, *cliValue) bool {
	return func(_ *CLI, v *cliValue) bool { return v.b == b }
}

// flagRules covers every flag that takes effect, plus the not-applicable
// ones whose note or honoured values need saying; every other db_bench
// flag gets defaultRule.
var flagRules = map[string]flagRule{
	// Workload.
	"benchmarks":                  {group: groupWorkload, def: strp(DefaultSuite), usage: "comma-separated benchmarks, each optionally with [-X<repeats>-W<warmups>] (list below)"},
	"num":                         {group: groupWorkload, usage: "number of keys (checksum benchmarks: blocks hashed; default ~5 GB worth)"},
	"reads":                       {group: groupWorkload, usage: "reads per thread (-1 = --num)"},
	"writes":                      {group: groupWorkload, usage: "writes per thread (-1 = --num)"},
	"deletes":                     {group: groupWorkload, usage: "deletes of deleteseq/deleterandom (-1 = --num)"},
	"duration":                    {group: groupWorkload, typ: &typeString, usage: "stop each benchmark after this many seconds (or a Go duration, 90s); 0 = run by count"},
	"key_size":                    {group: groupWorkload, usage: "key size in bytes (--key_shape=dbbench only: the other shapes fix their own)"},
	"key_shape":                   {group: groupWorkload, usage: "keys' form: " + keyShapeUsage + " (kvbench only)"},
	"value_size":                  {group: groupWorkload, usage: "value size in bytes"},
	"value_size_max":              {group: groupWorkload, usage: "the value buffer holds at least this many bytes (as db_bench's)"},
	"compression_ratio":           {group: groupWorkload, usage: "values compress to this fraction"},
	"seed":                        {group: groupWorkload, usage: "random seed (0 = from the clock, printed); thread i of the run gets seed+i, as in db_bench"},
	"threads":                     {group: groupWorkload, usage: "threads per benchmark"},
	"batch_size":                  {group: groupWorkload, usage: "writes and deletes per batch (fillbatch always uses 1000)"},
	"readwritepercent":            {group: groupWorkload, usage: "readrandomwriterandom: percent of operations that are reads"},
	"mergereadpercent":            {group: groupWorkload, usage: "readrandommergerandom: percent of operations that are merges (the others are reads)"},
	"merge_keys":                  {group: groupWorkload, usage: "mergerandom, readrandommergerandom: distinct keys merged and read (-1 = --num)"},
	"seek_nexts":                  {group: groupWorkload, usage: "seekrandom: Next calls after each seek"},
	"reverse_iterator":            {group: groupWorkload, usage: "seekrandom: seek for the last key <= target and step backwards"},
	"benchmark_write_rate_limit":  {group: groupWorkload, usage: "bytes/second cap on the writes of all threads (0 = none)"},
	"benchmark_read_rate_limit":   {group: groupWorkload, usage: "cap on reads and seeks per second, all threads together (0 = none)"},
	"ops_between_duration_checks": {group: groupWorkload, usage: "with --duration, check the clock every this many operations"},
	"db":                          {group: groupWorkload, usage: "database directory (default: a temporary directory, removed afterwards)"},
	"use_existing_db":             {group: groupWorkload, usage: "open the existing DB; fill benchmarks are skipped, as in db_bench"},
	"sync":                        {group: groupWorkload, usage: "fsync every write"},
	"disable_wal":                 {group: groupWorkload, usage: "write without a WAL"},

	// Prefixes: db_bench's keys and read options under --prefix_size.
	"keys_per_prefix": {group: groupWorkload, usage: "with --prefix_size, about this many keys share each prefix, laid out as db_bench's (--key_shape=dbbench only); 0: keys as without it",
		honoured: func(c *CLI, v *cliValue) bool { return v.i <= 0 || c.strFlag("key_shape") == KeyDBBench.String() },
		instead: func(c *CLI, _ *cliValue) string {
			return fmt.Sprintf("it lays out db_bench's keys only; --key_shape=%s's keys ran", c.strFlag("key_shape"))
		}},
	"total_order_seek":     {group: groupWorkload, usage: "with --prefix_size: seeks in total order, asking no prefix filter (db_bench's default false: prefix seeks, vigil.Iterator.SeekPrefixGE)"},
	"prefix_same_as_start": {group: groupWorkload, usage: "with --prefix_size: iterators end with the prefix they start in (vigil.IterOptions.Prefix)"},
	"auto_prefix_mode":     {group: groupWorkload, usage: "with --prefix_size: seekrandom's forward seeks end at the next prefix, as db_bench bounds them (vigil.IterOptions.Prefix)"},
	"seek_missing_prefix": {group: groupWorkload, usage: "seekrandom seeks keys of prefixes no key has (byte 8 set to '1'; needs --prefix_size > 8)",
		honoured: func(c *CLI, v *cliValue) bool { return !v.b || c.strFlag("key_shape") == KeyDBBench.String() },
		instead: func(c *CLI, _ *cliValue) string {
			return fmt.Sprintf("--key_shape=%s's keys have no padding to mark; seekrandom sought its keys unchanged", c.strFlag("key_shape"))
		}},

	// DB options.
	"write_buffer_size": {group: groupDB, usage: "memtable size in bytes"},
	"max_write_buffer_number": {group: groupDB, def: strp("3"), usage: "memtables in memory, the mutable one included (Vigil's default 3; db_bench's 2)",
		honoured: func(_ *CLI, v *cliValue) bool { return v.i >= 2 },
		instead:  fixed("Vigil keeps room for one memtable being flushed; 2 ran")},
	"checksum_type":                        {group: groupDB, typ: &typeString, usage: "0/none, 1/crc32c, 2/xxhash, 3/xxhash64, 4/xxh3 (as in db_bench), 5/crc64 (Vigil's)"},
	"memtable_protection_bytes_per_key":    {group: groupDB, usage: "per-entry memtable checksum bytes: 0, 1, 2, 4 or 8"},
	"write_batch_protection_bytes_per_key": {group: groupDB, usage: "per-entry write batch checksum bytes, checked before the WAL write and at the memtable insert: 0, 1, 2, 4 or 8 (RocksDB takes 0 or 8)"},
	"block_size":                           {group: groupDB, usage: "SST block size; also the bytes hashed per op by the checksum benchmarks"},
	"block_restart_interval":               {group: groupDB, usage: "keys between restart points in SST blocks"},
	"cache_size":                           {group: groupDB, def: strp("67108864"), usage: "block cache bytes, 0 disables (Vigil's default 64 MiB; db_bench's 8 MiB)"},
	"memtable_bloom_size_ratio": {group: groupDB, def: strp("0.0078125"),
		usage: "bytes of each memtable's bloom filter per byte of --write_buffer_size, <= 0 disables (Vigil's default 1/128; db_bench's 0; vigil.Options.MemtableFilterRatio)"},
	"memtable_whole_key_filtering": {group: groupDB, def: strp("true"),
		usage:    "the memtable filter holds whole keys; false: no memtable filter, Vigil's holds nothing else (Vigil's default true; db_bench's false)",
		honoured: func(*CLI, *cliValue) bool { return true }},
	"cost_write_buffer_to_cache": {group: groupDB, usage: "charge the memtables to the block cache: --cache_size is one limit for memtables and blocks (vigil.Options.MemoryBudget)"},
	"bloom_bits":                 {group: groupDB, def: strp("10"), usage: "bloom filter bits per key, <= 0 disables (Vigil's default 10; db_bench's -1)"},
	"prefix_size": {group: groupDB, usage: "keys' prefixes are their first N bytes (vigil.FixedPrefixComparer, RocksDB's NewFixedPrefixTransform): " +
		"bloom filters hold prefixes and seeks are prefix seeks (see --total_order_seek); 0: no prefixes"},
	"whole_key_filtering": {honouredValues: "true without --prefix_size, false with it",
		honoured: func(c *CLI, v *cliValue) bool {
			return v.b == (c.intFlag("prefix_size") <= 0) || c.intFlag("bloom_bits") <= 0
		},
		atDefault: func(c *CLI) bool { return c.intFlag("prefix_size") > 0 && c.intFlag("bloom_bits") > 0 },
		instead: func(c *CLI, _ *cliValue) string {
			if c.intFlag("prefix_size") > 0 {
				return "with --prefix_size Vigil's bloom filters hold prefixes only; Get asked them about each key's prefix"
			}
			return "without --prefix_size Vigil's bloom filters hold whole keys; whole keys ran"
		}},
	"compression_type": {group: groupDB, usage: "none, snappy or zstd; zlib, bzip2, lz4, lz4hc and xpress are accepted and run as snappy",
		honoured: func(_ *CLI, v *cliValue) bool { _, runs := parseCompression(v.s); return runs && v.s != "" },
		instead:  fixed("Vigil compresses with snappy, zstd or not at all; snappy ran")},
	"min_level_to_compress": {group: groupDB, usage: "levels below it are written uncompressed (Options.Levels); -1: every level compressed"},
	"compression_level": {group: groupDB, usage: "zstd's level with --compression_type=zstd, 1-22 (db_bench's default, 32767 or -1: zstd's own, 3)",
		honoured: func(_ *CLI, v *cliValue) bool { return v.i == 32767 || v.i == -1 || (v.i >= 1 && v.i <= 22) },
		instead:  fixed("zstd's levels are 1-22; its default (3) ran")},
	"level0_file_num_compaction_trigger": {group: groupDB, usage: "L0 files that start a compaction"},
	"level0_stop_writes_trigger":         {group: groupDB, def: strp("12"), usage: "L0 files at which writes stall (Vigil's default 12; db_bench's 36)"},
	"level0_slowdown_writes_trigger":     {group: groupDB, def: strp("8"), usage: "L0 files from which writes slow to --delayed_write_rate (Vigil's default 8; db_bench's 20); kept between the compaction and stop triggers"},
	"delayed_write_rate":                 {group: groupDB, def: strp("16777216"), usage: "bytes/s of slowed-down writes at the slowdown trigger (Vigil's default 16 MiB/s; db_bench's 8 MiB/s)"},
	"max_bytes_for_level_base":           {group: groupDB, def: strp("67108864"), usage: "target size of L1 (Vigil's default 64 MiB; db_bench's 256 MiB)"},
	"max_bytes_for_level_multiplier": {group: groupDB, usage: "size ratio of adjacent levels (Vigil takes whole numbers >= 2)",
		honoured: func(_ *CLI, v *cliValue) bool { return v.x == math.Round(v.x) && v.x >= 2 },
		instead: func(_ *CLI, v *cliValue) string {
			return fmt.Sprintf("Vigil's level multiplier is a whole number >= 2; %d ran", levelMultiplier(v.x))
		}},
	"target_file_size_base": {group: groupDB, def: strp("4194304"), usage: "SST size at which compaction outputs split (Vigil's default 4 MiB; db_bench's 64 MiB)"},
	"open_files": {group: groupDB, def: strp("1000"), usage: "table cache size, -1 = keep every table open (Vigil's default 1000; db_bench's -1)",
		honoured: func(_ *CLI, v *cliValue) bool { return v.i < 0 || v.i >= minOpenFiles },
		instead:  fixed(fmt.Sprintf("Vigil's table cache holds at least %d tables; %d ran", minOpenFiles, minOpenFiles))},
	"readonly":                 {group: groupDB, usage: "open the DB read-only (with --use_existing_db; writes fail)"},
	"disable_auto_compactions": {group: groupDB, usage: "no background compactions (flush and compact benchmarks still work)"},
	"paranoid_memory_checks":   {group: groupDB, usage: "memtable and iterator reads verify key order (RocksDB 9.6's option; kvbench only here)"},
	"scrub_interval":           {group: groupDB, usage: "run the background scrubber with this interval (a Go duration, e.g. 1s; at its default 4 MiB/s); empty: off (kvbench only)"},
	"wal_recovery_mode":        {group: groupDB, usage: "0 tolerate corrupted tail, 1 absolute consistency, 2 point in time, 3 skip any corrupted (RocksDB's numbers; kvbench only here)"},
	"merge_operator": {group: groupDB, usage: "merge operator, which mergerandom and readrandommergerandom need: uint64add " +
		"(8-byte little-endian counters; the merges then send the 8-byte operand 1, whatever --value_size) or put " +
		"(the newest operand wins); RocksDB's UInt64AddOperator, PutOperator and put_v1 too; empty: none"},

	// Honoured only as Vigil always behaves.
	"verify_checksum":                  {group: groupDB, usage: "false: Get and iterators do not verify the checksums of blocks read from disk (vigil.Options.SkipReadChecksums; compactions, Verify and range checksums still do)"},
	"paranoid_checks":                  {honoured: wantBool(true), honouredValues: "true", instead: fixed("Vigil always checks files and stops writes on background errors; that ran")},
	"force_consistency_checks":         {honoured: wantBool(true), honouredValues: "true", instead: fixed("Vigil always checks LSM consistency; that ran")},
	"check_flush_compaction_key_order": {honoured: wantBool(true), honouredValues: "true", instead: fixed("Vigil's flushes and compactions always re-validate key order; that ran")},
	"allow_concurrent_memtable_write": {honoured: wantBool(true), honouredValues: "true",
		instead: fixed("Vigil's skiplist memtable always takes concurrent inserts; that ran")},
	"memtablerep": {honouredValues: "skip_list",
		honoured: func(_ *CLI, v *cliValue) bool { s := strings.ToLower(v.s); return s == "skip_list" || s == "skiplist" },
		instead:  fixed("Vigil's memtable is always a lock-free arena skiplist; the skiplist ran")},
	"num_levels": {honoured: func(_ *CLI, v *cliValue) bool { return v.i == 7 }, honouredValues: "7",
		instead: fixed("Vigil always has 7 levels; 7 ran")},
	"compaction_style": {honoured: func(_ *CLI, v *cliValue) bool { return v.i == 0 }, honouredValues: "0 (level)",
		instead: fixed("Vigil compacts leveled only; leveled ran")},
	"use_fsync":     {group: groupDB, usage: "accepted either way: Vigil syncs files with fsync"},
	"file_checksum": {group: groupDB, usage: "accepted either way: Vigil always records a whole-file checksum per table"},
	"use_tailing_iterator": {honoured: wantBool(false), honouredValues: "false",
		instead: fixed("Vigil iterators are snapshots; seekrandom opened a new iterator per seek")},
	"db_write_buffer_size": {instead: fixed("Vigil has no memory budget for memtables across column families; --write_buffer_size ran"),
		rootOption: "MemoryBudget"},
	"target_file_size_multiplier":  {instead: fixed("Vigil splits compaction outputs at --target_file_size_base at every level")},
	"value_size_distribution_type": {honouredValues: "fixed", instead: fixed("values ran at --value_size")},
	"user_timestamp_size":          {instead: fixed("Vigil has no user-defined timestamps; keys ran without them")},
	"use_uint64_comparator":        {instead: fixed("Vigil orders keys bytewise; the bytewise order ran")},
	"max_scan_distance":            {instead: fixed("seekrandom ran without an iterator bound")},
	"read_random_exp_range":        {instead: fixed("reads ran with uniformly random keys")},
	"num_multi_db":                 {honoured: func(_ *CLI, v *cliValue) bool { return v.i <= 1 }, honouredValues: "0, 1", instead: fixed("one DB ran")},
	"finish_after_writes":          {instead: fixed("the writer of *whilewriting benchmarks ran until the readers finished")},
	"statistics_string":            {instead: fixed("--statistics prints Vigil's counters under RocksDB's names")},

	// Output.
	"histogram":                {group: groupOutput, usage: "print a latency histogram per operation type"},
	"statistics":               {group: groupOutput, usage: "print the RocksDB-named counters and latency histograms Vigil has at the end"},
	"confidence_interval_only": {group: groupOutput, usage: "with [-Xn], print [CI95 n runs] lines instead of [AVG n runs]"},
	"progress_reports":         {group: groupOutput, usage: "progress bar on stderr when it is a terminal"},
	"stats":                    {group: groupOutput, usage: "print DB metrics after each benchmark (kvbench only)"},
	"json":                     {group: groupOutput, usage: "write results as JSON lines (one object per run) to this file (kvbench only)"},
	"cpuprofile":               {group: groupOutput, usage: "write a CPU profile of the whole run to this file (kvbench only)"},

	// gflags.
	"flagfile":   {group: groupGflags, usage: "read more flags from this file (one per line)"},
	"undefok":    {group: groupGflags, usage: "comma-separated flag names to accept even if unknown (give their values with '=')"},
	"fromenv":    {group: groupGflags, usage: "comma-separated flags to take from $FLAGS_<name> (which must be set)"},
	"tryfromenv": {group: groupGflags, usage: "comma-separated flags to take from $FLAGS_<name> when set"},
	"help":       {group: groupGflags, usage: "this help (also -h, --helpfull, --helpshort, ...)"},
	"version":    {group: groupGflags, usage: "print the version and exit"},
}

// outputOnly are db_bench flags that only shape what db_bench prints or
// logs: accepted, and kvbench prints its own way, without a notice.
var outputOnly = []string{
	"report_interval_seconds", "report_file", "report_file_operations", "report_bg_io_stats", "report_open_timing",
	"stats_interval", "stats_interval_seconds", "stats_per_interval", "stats_dump_period_sec", "stats_persist_period_sec",
	"stats_history_buffer_size", "persist_stats_to_disk", "stats_level", "thread_status_per_interval",
	"print_malloc_stats", "dump_malloc_stats", "show_table_properties", "build_info", "perf_level",
	"use_stderr_info_logger", "allow_data_in_errors", "tab_completion_columns", "tab_completion_word",
	"helpfull", "helpshort", "helppackage", "helpxml", "helpmatch", "helpon",
}

// prefixNotes give the note of db_bench flags without their own rule, by
// name prefix, first match wins.
var prefixNotes = []struct{ prefix, note string }{
	{"blob_", "Vigil has no blob files; values stayed in SST blocks"},
	{"enable_blob", "Vigil has no blob files; values stayed in SST blocks"},
	{"use_blob", "Vigil has no blob files; values stayed in SST blocks"},
	{"min_blob_size", "Vigil has no blob files; values stayed in SST blocks"},
	{"prepopulate_blob_cache", "Vigil has no blob files; values stayed in SST blocks"},
	{"charge_blob_cache", "Vigil has no blob files; values stayed in SST blocks"},
	{"use_shared_block_and_blob_cache", "Vigil has no blob files; values stayed in SST blocks"},
	{"universal_", "Vigil compacts leveled only; leveled ran"},
	{"fifo_", "Vigil compacts leveled only; leveled ran"},
	{"compaction_pri", "Vigil picks compaction inputs its own way; that ran"},
	{"transaction", "Vigil has no transaction DB; writes ran as plain batches"},
	{"optimistic_transaction_db", "Vigil has no transaction DB; writes ran as plain batches"},
	{"rate_limit", "Vigil has no I/O rate limiter; I/O ran unthrottled"},
	{"rate_limiter_", "Vigil has no I/O rate limiter; I/O ran unthrottled"},
	{"use_direct_", "Vigil does buffered I/O; buffered I/O ran"},
	{"mmap_", "Vigil reads and writes files with buffered I/O; no mmap ran"},
	{"compressed_secondary_cache", "Vigil has one block cache and no secondary cache"},
	{"use_compressed_secondary_cache", "Vigil has one block cache and no secondary cache"},
	{"secondary_cache_uri", "Vigil has one block cache and no secondary cache"},
	{"compressed_cache_size", "Vigil has one block cache and no compressed cache"},
	{"simcache_size", "Vigil has one block cache and no simulated cache"},
	{"read_cache_", "Vigil has one block cache and no persistent read cache"},
	{"row_cache_size", "Vigil has no row cache"},
	{"cache_", "Vigil's block cache is one CLOCK cache with no shards, priority pools or other types to choose; it ran"},
	{"use_cache_", "Vigil's block cache allocates its blocks outside the Go heap itself; that ran"},
	{"charge_", "Vigil's block cache is charged with blocks only (and memtables with --cost_write_buffer_to_cache)"},
	{"pin_", "Vigil keeps index and filter blocks with the open table, not in the block cache"},
	{"cache_index_and_filter_blocks", "Vigil keeps index and filter blocks with the open table, not in the block cache"},
	{"prepopulate_block_cache", "Vigil fills its block cache on reads only"},
	{"compression_", "Vigil's compression has no dictionary, parallel threads or other settings than zstd's level; it ran without"},
	{"sample_for_compression", "Vigil compresses every level alike"},
	{"wal_compression", "Vigil does not compress its WAL"},
	{"mix_", "only db_bench's mixgraph uses it, and kvbench has no mixgraph"},
	{"sine_", "only db_bench's mixgraph uses it, and kvbench has no mixgraph"},
	{"keyrange_", "only db_bench's mixgraph uses it, and kvbench has no mixgraph"},
	{"key_dist_", "only db_bench's mixgraph uses it, and kvbench has no mixgraph"},
	{"value_k", "only db_bench's mixgraph uses it, and kvbench has no mixgraph"},
	{"value_sigma", "only db_bench's mixgraph uses it, and kvbench has no mixgraph"},
	{"value_theta", "only db_bench's mixgraph uses it, and kvbench has no mixgraph"},
	{"iter_k", "only db_bench's mixgraph uses it, and kvbench has no mixgraph"},
	{"iter_sigma", "only db_bench's mixgraph uses it, and kvbench has no mixgraph"},
	{"iter_theta", "only db_bench's mixgraph uses it, and kvbench has no mixgraph"},
	{"trace_", "kvbench does not trace or replay"},
	{"block_cache_trace", "kvbench does not trace"},
	{"backup_", "kvbench has no backup or restore benchmark"},
	{"restore_", "kvbench has no backup or restore benchmark"},
	{"secondary_", "kvbench opens no secondary instance"},
	{"use_secondary_db", "kvbench opens no secondary instance"},
	{"simulate_", "kvbench runs on the real file system"},
	{"env_uri", "kvbench runs on the real file system"},
	{"fs_uri", "kvbench runs on the real file system"},
	{"enable_numa", "kvbench does not bind threads or set priorities"},
	{"enable_io_prio", "kvbench does not bind threads or set priorities"},
	{"enable_cpu_prio", "kvbench does not bind threads or set priorities"},
	{"num_column_families", "Vigil has no column families; one key space ran"},
	{"num_hot_column_families", "Vigil has no column families; one key space ran"},
	{"column_family_distribution", "Vigil has no column families; one key space ran"},
	{"max_background_", "Vigil runs one flush and one compaction at a time; that ran"},
	{"num_bottom_pri_threads", "Vigil runs one flush and one compaction at a time; that ran"},
	{"num_high_pri_threads", "Vigil runs one flush and one compaction at a time; that ran"},
	{"num_low_pri_threads", "Vigil runs one flush and one compaction at a time; that ran"},
	{"num_deletion_threads", "Vigil deletes obsolete files inline"},
	{"subcompactions", "Vigil runs each compaction on one goroutine"},
	{"level_compaction_dynamic_level_bytes", "Vigil sizes levels statically from --max_bytes_for_level_base; that ran"},
	{"max_bytes_for_level_multiplier_additional", "Vigil uses one multiplier for every level"},
	{"soft_pending_compaction_bytes_limit", "Vigil stalls writes on L0 files and immutable memtables only"},
	{"hard_pending_compaction_bytes_limit", "Vigil stalls writes on L0 files and immutable memtables only"},
	{"max_compaction_bytes", "Vigil sizes compactions its own way"},
	{"periodic_compaction_seconds", "Vigil compacts by size only"},
	{"ttl_seconds", "Vigil compacts by size only"},
	{"preclude_last_level_data_seconds", "Vigil has no tiered storage"},
	{"preserve_internal_time_seconds", "Vigil has no tiered storage"},
	{"index_", "Vigil's SST index has one form"},
	{"partition_index", "Vigil's SST index and filter are not partitioned"},
	{"data_block_hash_table_util_ratio", "Vigil's SST data blocks have no hash index"},
	{"use_data_block_hash_index", "Vigil's SST data blocks have no hash index"},
	{"metadata_block_size", "Vigil's SST index and filter are not partitioned"},
	{"format_version", "Vigil writes its own SST format"},
	{"bloom_locality", "Vigil's bloom filter is one block per table"},
	{"use_ribbon_filter", "Vigil's filter is a bloom filter"},
	{"optimize_filters_", "Vigil builds a filter for every table"},
	{"read_amp_bytes_per_bit", "Vigil does not estimate read amplification"},
	{"enable_index_compression", "Vigil's SST index has one form"},
	{"block_align", "Vigil packs blocks without alignment"},
	{"use_hash_search", "Vigil's SST index has one form"},
	{"use_cuckoo_table", "Vigil has one table format"},
	{"cuckoo_hash_ratio", "Vigil has one table format"},
	{"identity_as_first_hash", "Vigil has one table format"},
	{"use_plain_table", "Vigil has one table format"},
	{"memtable_", "Vigil's skiplist memtable has no such option"},
	{"arena_block_size", "Vigil's memtable arena is sized from --write_buffer_size"},
	{"inplace_update_", "Vigil never updates memtable entries in place"},
	{"skip_list_lookahead", "Vigil's skiplist has no lookahead"},
	{"hash_bucket_count", "Vigil's memtable is a skiplist, not a hash"},
	{"experimental_mempurge_threshold", "Vigil flushes memtables whole"},
	{"max_write_buffer_", "Vigil keeps no flushed memtables for history"},
	{"min_write_buffer_number_to_merge", "Vigil flushes each memtable alone"},
	{"wal_", "Vigil keeps its WAL in the DB directory, unsynced unless --sync"},
	{"manual_wal_flush", "Vigil's WAL writer hands full blocks to the file in the background"},
	{"max_total_wal_size", "Vigil rotates the WAL with the memtable"},
	{"track_and_verify_wals_in_manifest", "Vigil's MANIFEST names the live WAL"},
	{"avoid_flush_during_recovery", "Vigil flushes what it recovered at open"},
	{"bytes_per_sync", "Vigil syncs files when they are finished"},
	{"max_successive_merges", "Vigil combines merge operands at reads, flushes and compactions, never at the write"},
	{"write_thread_", "Vigil's group commit has no write-thread tuning"},
	{"enable_write_thread_adaptive_yield", "Vigil's group commit has no write-thread tuning"},
	{"enable_pipelined_write", "Vigil's group commit writes the WAL, then the memtable"},
	{"unordered_write", "Vigil publishes writes in sequence order"},
	{"advise_random_on_open", "kvbench does not advise the kernel"},
	{"compaction_fadvice", "kvbench does not advise the kernel"},
	{"compaction_readahead_size", "Vigil reads tables without readahead tuning"},
	{"readahead_size", "Vigil reads tables without readahead tuning"},
	{"adaptive_readahead", "Vigil reads tables without readahead tuning"},
	{"async_io", "Vigil reads synchronously"},
	{"initial_auto_readahead_size", "Vigil reads tables without readahead tuning"},
	{"max_auto_readahead_size", "Vigil reads tables without readahead tuning"},
	{"num_file_reads_for_auto_readahead", "Vigil reads tables without readahead tuning"},
	{"log_readahead_size", "Vigil reads tables without readahead tuning"},
	{"random_access_max_buffer_size", "Vigil reads tables without readahead tuning"},
	{"writable_file_max_buffer_size", "Vigil buffers writes its own way"},
	{"file_opening_threads", "Vigil opens tables on demand"},
	{"table_cache_numshardbits", "Vigil's table cache has no shards"},
	{"delete_obsolete_files_period_micros", "Vigil deletes obsolete files as soon as nothing uses them"},
	{"disable_seek_compaction", "Vigil has no seek compaction"},
	{"optimize_multiget_for_io", "kvbench has no multiget benchmark"},
	{"multiread_", "kvbench has no multiget benchmark"},
	{"use_existing_keys", "kvbench generates keys as db_bench does by default"},
	{"overwrite_", "kvbench has no filluniquerandom"},
	{"disposable_entries", "kvbench has no timeseries or disposable-entry benchmark"},
	{"persistent_entries", "kvbench has no timeseries or disposable-entry benchmark"},
	{"expire_style", "kvbench has no timeseries benchmark"},
	{"time_range", "kvbench has no timeseries benchmark"},
	{"num_keys_per", "kvbench has no timeseries benchmark"},
	{"key_id_range", "kvbench has no timeseries benchmark"},
	{"stddev", "kvbench has no timeseries benchmark"},
	{"deletepercent", "kvbench has no randomwithverify benchmark"},
	{"numdistinct", "kvbench has no randomwithverify benchmark"},
	{"truth_db", "kvbench has no randomwithverify benchmark"},
	{"use_single_deletes", "kvbench has no randomreplacekeys benchmark"},
	{"range_tombstone_width", "kvbench writes no range tombstones in fills"},
	{"max_num_range_tombstones", "kvbench writes no range tombstones in fills"},
	{"writes_per_range_tombstone", "kvbench writes no range tombstones in fills"},
	{"writes_before_delete_range", "kvbench writes no range tombstones in fills"},
	{"expand_range_tombstones", "kvbench writes no range tombstones in fills"},
	{"options_file", "kvbench takes options as flags only"},
	{"use_keep_filter", "Vigil has no compaction filter"},
	{"read_with_latest_user_timestamp", "Vigil has no user-defined timestamps"},
}

// defaultNote is the note of a db_bench flag nothing else describes.
const defaultNote = "kvbench has no counterpart; the run went on without it"

// ruleFor returns the rule of a flag.
func ruleFor(f dbBenchFlag) flagRule {
	if r, ok := flagRules[f.name]; ok {
		return r
	}
	switch f.src {
	case srcBlockCacheAnalyzer, srcTraceAnalyzer, srcIOTracerParser:
		return flagRule{group: groupNoEffect}
	case srcGflags:
		if strings.HasPrefix(f.name, "help") {
			return flagRule{group: groupGflags} // more spellings of --help
		}
		return flagRule{group: groupNoEffect}
	}
	if slices.Contains(outputOnly, f.name) {
		return flagRule{group: groupOutput}
	}
	note := defaultNote
	for _, p := range prefixNotes {
		if strings.HasPrefix(f.name, p.prefix) {
			note = p.note
			break
		}
	}
	return flagRule{group: groupNA, instead: fixed(note)}
}

func init() {
	// A few rules change a flag's type: apply them to the table once.
	for i, f := range dbBenchFlags {
		if r, ok := flagRules[f.name]; ok && r.typ != nil {
			dbBenchFlags[i].typ = *r.typ
		}
	}
}

// levelMultiplier is the whole multiplier Vigil runs for x.
func levelMultiplier(x float64) int { return max(int(math.Round(x)), 2) }

// parseChecksumFlag reads --checksum_type: a number or a name. It returns
// RocksDB's number for the type (EngineOptions.ChecksumType).
func parseChecksumFlag(s string) (int, error) {
	t, err := checksum.ParseType(s)
	if err != nil {
		return 0, err
	}
	return int(t.Code()), nil
}

// BenchmarkNames lists the benchmarks kvbench runs, for --help.
func BenchmarkNames() []string {
	var names []string
	for n := range dbBenchmarks {
		names = append(names, n)
	}
	for n := range utilityBenchmarks {
		names = append(names, n)
	}
	for n := range ChecksumBenchmarks {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// WriteHelp prints kvbench's flags grouped: workload, DB options, output,
// gflags' own, then the db_bench flags accepted but not applicable to
// Vigil, and those of the tools linked into db_bench (no effect there
// either).
func (c *CLI) WriteHelp(w io.Writer) {
	groups := []struct {
		g     flagGroup
		title string
	}{
		{groupWorkload, "Workload"},
		{groupDB, "DB options (take effect in Vigil)"},
		{groupOutput, "Output"},
		{groupGflags, "Flag handling (gflags')"},
	}
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		var quiet []string
		width := 0
		for _, name := range c.order {
			v := c.vals[name]
			if r := ruleFor(v.f); r.group == g.g && r.usage != "" {
				width = max(width, len(name)+len(v.f.typ.String())+3)
			}
		}
		for _, name := range c.order {
			v := c.vals[name]
			r := ruleFor(v.f)
			if r.group != g.g {
				continue
			}
			if r.usage == "" {
				quiet = append(quiet, name)
				continue
			}
			def := ""
			if v.def != "" && name != "benchmarks" && g.g != groupGflags {
				def = " (default " + v.def + ")"
			}
			spec := name + "=" + v.f.typ.String()
			if g.g == groupGflags && v.f.typ == flagBool {
				spec = name
			}
			fmt.Fprintf(w, "  --%-*s %s%s\n", width, spec, r.usage, def)
		}
		if len(quiet) > 0 {
			if g.g == groupGflags {
				fmt.Fprintf(w, "  also taken as --help:\n")
			} else {
				fmt.Fprintf(w, "  accepted, output only, no effect on kvbench's output:\n")
			}
			wrapList(w, quiet, "    ")
		}
	}
	var na, noEffect []string
	for _, name := range c.order {
		v := c.vals[name]
		r := ruleFor(v.f)
		switch {
		case r.group == groupNoEffect:
			noEffect = append(noEffect, name)
		case r.group == groupNA:
			s := name
			if r.honouredValues != "" {
				s += " (honoured: " + r.honouredValues + ")"
			}
			if r.rootOption != "" {
				s += " [needs vigil.Options." + strings.Fields(r.rootOption)[0] + "]"
			}
			na = append(na, s)
		}
	}
	fmt.Fprintf(w, "\nAccepted from db_bench %s but not applicable to Vigil (%d flags). Left at db_bench's default\n"+
		"they are silent; set to another value, each is named once on stderr with what ran instead, and\n"+
		"the run goes on:\n", dbBenchVersion, len(na))
	wrapList(w, na, "  ")
	fmt.Fprintf(w, "\nAccepted, no effect (flags of the tools linked into db_bench, which ignores them too):\n")
	wrapList(w, noEffect, "  ")
	fmt.Fprintf(w, "\nBenchmarks (db_bench's semantics; readhot is LevelDB's, crc64 Vigil's):\n")
	wrapList(w, BenchmarkNames(), "  ")
}

// wrapList prints names comma-separated, wrapped at 100 columns.
func wrapList(w io.Writer, names []string, indent string) {
	line := indent
	for i, n := range names {
		s := n
		if i < len(names)-1 {
			s += ","
		}
		if len(line)+len(s)+1 > 100 && line != indent {
			fmt.Fprintln(w, line)
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += s
	}
	if line != indent {
		fmt.Fprintln(w, line)
	}
}
