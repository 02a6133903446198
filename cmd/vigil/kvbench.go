package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"
	"github.com/vigildb/vigil/bench"
)

const kvbenchAbout = `kvbench runs db_bench-compatible benchmarks and prints db_bench's output format:

  name : X micros/op Y ops/sec Z seconds N operations; W MB/s

It takes every flag of RocksDB db_bench 7.8.3, spelled -flag=v or --flag=v
(value also as the next argument; bools only with '=', or --noflag), plus
gflags' --flagfile, --undefok and --fromenv. Flags that map onto Vigil take
effect. The others are accepted: one left at db_bench's default is silent,
one set to a value Vigil cannot honour is named once on stderr with what ran
instead, and the run goes on. A name db_bench does not have either is an
error (exit status 2).

Benchmarks draw keys and values exactly as db_bench does (same --seed, same
keys), so found counts compare with db_bench's line by line. They may carry
db_bench's repeat arguments: readseq[-X10] runs ten times and prints
[AVG 10 runs] and [MEDIAN 10 runs] lines; [-W2] adds two warm-up runs.
With no flags at all it runs a short default suite on a temporary directory.

mergerandom and readrandommergerandom need --merge_operator=uint64add or put
(RocksDB's names), as in db_bench. With uint64add each merge sends the 8-byte
little-endian operand 1, whatever --value_size: db_bench sends a --value_size
value, which RocksDB's uint64add adds as 0 unless it has 8 bytes, and Vigil's
refuses.`

func newKVBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kvbench [--flag=value ...]",
		Short: "Run db_bench-compatible benchmarks",
		Long:  kvbenchAbout,
		// kvbench parses its own flags: db_bench's ~430 names and gflags'
		// spellings, which cobra's parser cannot take.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runKVBench(args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) { writeKVBenchHelp(c.OutOrStdout()) })
	return cmd
}

func writeKVBenchHelp(w io.Writer) {
	fmt.Fprintf(w, "%s\n\nUsage:\n  vigil kvbench [--flag=value ...]\n", kvbenchAbout)
	bench.NewCLI().WriteHelp(w)
}

// runKVBench parses args (normalizeArgs has already turned -flag into
// --flag), reports not-applicable flags on stderr, and runs.
func runKVBench(args []string, stdout, stderr io.Writer) error {
	cli := bench.NewCLI()
	if err := cli.Parse(args); err != nil {
		var ue *bench.UsageError
		if errors.As(err, &ue) {
			return usageError("%s", ue.Msg)
		}
		return err
	}
	if cli.HelpRequested() {
		writeKVBenchHelp(stdout)
		return nil
	}
	if cli.VersionRequested() {
		fmt.Fprintf(stdout, "%s; kvbench takes db_bench %s's flags\n", versionString(), bench.DBBenchVersion)
		return nil
	}
	cfg, err := cli.Config()
	if err != nil {
		var ue *bench.UsageError
		if errors.As(err, &ue) {
			return usageError("%s", ue.Msg)
		}
		return err
	}
	defaultSuite := cli.NFlag() == 0
	if defaultSuite {
		// The short default suite; its checksum benchmarks hash --num
		// blocks instead of db_bench's 5 GB.
		cfg.Num, cfg.NumSet = bench.DefaultSuiteNum, true
	}
	for _, n := range cli.Notices() {
		fmt.Fprintf(stderr, "kvbench: %s\n", n)
	}
	cfg.Stdout, cfg.Stderr = stdout, stderr
	if path := cli.CPUProfile(); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	start := time.Now()
	if err := bench.NewRunner(cfg).Run(); err != nil {
		return err
	}
	if defaultSuite {
		fmt.Fprintf(stdout, "(default suite, --num=%d, %v)\n", bench.DefaultSuiteNum, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
