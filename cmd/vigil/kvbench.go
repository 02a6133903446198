package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/vigildb/vigil/bench"
	"github.com/vigildb/vigil/checksum"
)

// defaultSuite is what `vigil kvbench` runs with no flags at all: a short
// tour of the db_bench workloads plus the checksum micro-benchmarks.
const (
	defaultSuite    = "fillseq,fillrandom,overwrite,readrandom,readseq,readreverse,seekrandom,crc32c,xxhash,xxhash64,xxh3,crc64"
	defaultSuiteNum = 200000
)

// kvbenchFlags binds db_bench's flag names to a bench.Config.
type kvbenchFlags struct {
	cfg          bench.Config
	checksumType string
	compression  string
	paranoid     bool
	protection   int
	writeBuffer  int
	cacheSize    int64
	bloomBits    int
	disableWAL   bool
	cpuProfile   string
}

func (k *kvbenchFlags) register(f *pflag.FlagSet) {
	c := &k.cfg
	f.StringVar(&c.Benchmarks, "benchmarks", defaultSuite, "comma-separated benchmarks, each optionally with [-X<repeats>-W<warmups>]: "+
		"fillseq, fillrandom, overwrite, readrandom, readseq, readreverse, seekrandom, readwhilewriting, deleterandom, flush, compact, stats, crc32c, xxhash, xxhash64, xxh3, crc64")
	f.Int64Var(&c.Num, "num", 1000000, "number of keys (checksum benchmarks: blocks hashed; default ~5 GB worth)")
	f.Int64Var(&c.Reads, "reads", -1, "number of reads (-1 = --num)")
	f.Int64Var(&c.Writes, "writes", -1, "number of writes (-1 = --num)")
	f.DurationVar(&c.Duration, "duration", 0, "stop each benchmark after this long (e.g. 10s; 0 = run by count)")
	f.IntVar(&c.KeySize, "key_size", 16, "key size in bytes")
	f.IntVar(&c.ValueSize, "value_size", 100, "value size in bytes")
	f.Float64Var(&c.CompressionRatio, "compression_ratio", 0.5, "values compress to this fraction")
	f.Uint64Var(&c.Seed, "seed", 0, "random seed (0 = from the clock, printed)")
	f.StringVar(&c.DB, "db", "", "database directory (default: a temporary directory, removed afterwards)")
	f.BoolVar(&c.UseExistingDB, "use_existing_db", false, "don't wipe the database before fill benchmarks")
	f.IntVar(&k.writeBuffer, "write_buffer_size", 64<<20, "memtable size in bytes")
	f.StringVar(&k.checksumType, "checksum_type", "4", "0/none, 1/crc32c, 2/xxhash, 3/xxhash64, 4/xxh3, 5/crc64 (numbers as in db_bench)")
	f.BoolVar(&k.paranoid, "paranoid_memory_checks", false, "memtable reads verify key order")
	f.IntVar(&k.protection, "memtable_protection_bytes_per_key", 0, "per-entry memtable checksum bytes: 0, 1, 2, 4 or 8")
	f.IntVar(&c.BlockSize, "block_size", 4096, "SST block size; also the bytes hashed per op by the checksum benchmarks")
	f.Int64Var(&k.cacheSize, "cache_size", 64<<20, "block cache size in bytes (0 disables)")
	f.IntVar(&k.bloomBits, "bloom_bits", 10, "bloom filter bits per key (0 disables)")
	f.StringVar(&k.compression, "compression_type", "snappy", "none or snappy")
	f.BoolVar(&c.Sync, "sync", false, "fsync every write")
	f.BoolVar(&k.disableWAL, "disable_wal", false, "write without a WAL")
	f.IntVar(&c.Threads, "threads", 1, "threads per benchmark")
	f.BoolVar(&c.Histogram, "histogram", false, "print latency percentiles (P50/P99/P99.9/max)")
	f.BoolVar(&c.Stats, "stats", false, "print DB metrics after each benchmark")
	f.StringVar(&c.JSONPath, "json", "", "write results as JSON lines (one object per run) to this file")
	f.StringVar(&k.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
}

// finish validates flags and fills the engine options. Problems are usage
// errors (exit status 2).
func (k *kvbenchFlags) finish(flags *pflag.FlagSet) error {
	c := &k.cfg
	c.NumSet = flags.Changed("num")
	if flags.NFlag() == 0 {
		// The short default suite; its checksum benchmarks hash --num
		// blocks instead of db_bench's 5 GB.
		c.Num, c.NumSet = defaultSuiteNum, true
	}
	ct, err := checksum.ParseType(k.checksumType)
	if err != nil {
		return usageError("--checksum_type: %v", err)
	}
	comp := strings.ToLower(k.compression)
	if comp != "none" && comp != "snappy" {
		return usageError("--compression_type %q: want none or snappy", k.compression)
	}
	var problems []string
	if c.Num < 0 {
		problems = append(problems, "--num must be >= 0")
	}
	if c.KeySize < 8 {
		problems = append(problems, "--key_size must be at least 8 (db_bench keys hold an 8-byte index)")
	}
	if c.ValueSize < 0 {
		problems = append(problems, "--value_size must be >= 0")
	}
	if c.BlockSize <= 0 {
		problems = append(problems, "--block_size must be positive")
	}
	if c.Threads < 1 {
		problems = append(problems, "--threads must be >= 1")
	}
	if c.CompressionRatio <= 0 || c.CompressionRatio > 1 {
		problems = append(problems, "--compression_ratio must be in (0, 1]")
	}
	switch k.protection {
	case 0, 1, 2, 4, 8:
	default:
		problems = append(problems, "--memtable_protection_bytes_per_key must be 0, 1, 2, 4 or 8")
	}
	if len(problems) > 0 {
		return usageError("%s", strings.Join(problems, "; "))
	}
	if _, err := bench.ParseSpecs(c.Benchmarks); err != nil {
		return usageError("--benchmarks: %v", err)
	}
	c.Engine = bench.EngineOptions{
		WriteBufferSize:               k.writeBuffer,
		ChecksumType:                  int(ct),
		ParanoidMemoryChecks:          k.paranoid,
		MemtableProtectionBytesPerKey: k.protection,
		BlockSize:                     c.BlockSize,
		CacheSize:                     k.cacheSize,
		BloomBits:                     k.bloomBits,
		Compression:                   comp,
		DisableWAL:                    k.disableWAL,
	}
	return nil
}

func newKVBenchCmd() *cobra.Command {
	k := &kvbenchFlags{}
	cmd := &cobra.Command{
		Use:   "kvbench",
		Short: "Run db_bench-compatible benchmarks",
		Long: `kvbench runs db_bench-compatible benchmarks and prints db_bench's output format:

  name : X micros/op Y ops/sec Z seconds N operations; W MB/s

Flags take db_bench's names (single or double dash). Benchmarks may carry
db_bench's repeat arguments: readseq[-X10] runs ten times and prints
[AVG 10 runs] and [MEDIAN 10 runs] lines; [-W2] adds two warm-up runs.
With no flags at all it runs a short default suite on a temporary directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := k.finish(cmd.Flags()); err != nil {
				return err
			}
			k.cfg.Stdout = cmd.OutOrStdout()
			k.cfg.Stderr = cmd.ErrOrStderr()
			if k.cpuProfile != "" {
				f, err := os.Create(k.cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer func() {
					pprof.StopCPUProfile()
					f.Close()
				}()
			}
			start := time.Now()
			if err := bench.NewRunner(k.cfg).Run(); err != nil {
				return err
			}
			if cmd.Flags().NFlag() == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "(default suite, --num=%s, %v)\n", strconv.Itoa(defaultSuiteNum), time.Since(start).Round(time.Millisecond))
			}
			return nil
		},
	}
	k.register(cmd.Flags())
	return cmd
}
