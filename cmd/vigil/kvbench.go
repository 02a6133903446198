package main

import (
	"github.com/spf13/cobra"
	"github.com/vigildb/vigil/bench"
)

func newKVBenchCmd() *cobra.Command {
	var cfg bench.Config
	cmd := &cobra.Command{
		Use:   "kvbench",
		Short: "Run db_bench-compatible benchmarks",
		Long: `kvbench runs db_bench-compatible benchmarks and prints db_bench's output format:

  name : X micros/op Y ops/sec Z seconds N operations; W MB/s

Flags take db_bench's names (single or double dash). Benchmarks may carry
db_bench's repeat arguments: readseq[-X10] runs ten times and prints
[AVG 10 runs] and [MEDIAN 10 runs] lines; [-W2] adds two warm-up runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.NumSet = cmd.Flags().Changed("num")
			cfg.Stdout = cmd.OutOrStdout()
			cfg.Stderr = cmd.ErrOrStderr()
			if cfg.BlockSize <= 0 {
				return usageError("--block_size must be positive, got %d", cfg.BlockSize)
			}
			if _, err := bench.ParseSpecs(cfg.Benchmarks); err != nil {
				return usageError("--benchmarks: %v", err)
			}
			return bench.NewRunner(cfg).Run()
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Benchmarks, "benchmarks", "crc32c,xxhash,xxhash64,xxh3,crc64", "comma-separated list of benchmarks, each optionally with [-X<repeats>-W<warmups>]")
	f.Int64Var(&cfg.Num, "num", 1000000, "number of keys (checksum benchmarks: number of blocks hashed; default ~5 GB worth)")
	f.DurationVar(&cfg.Duration, "duration", 0, "run each benchmark for this long instead of by count (e.g. 2s)")
	f.IntVar(&cfg.BlockSize, "block_size", 4096, "block size; also the bytes hashed per op by the checksum benchmarks")
	f.BoolVar(&cfg.Histogram, "histogram", false, "print latency percentiles (P50/P99/P99.9/max)")
	f.StringVar(&cfg.JSONPath, "json", "", "write results as JSON lines to this file")
	return cmd
}
