package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/vigildb/vigil/tests/stress"
)

// stressLong is the help text of `vigil stress`.
const stressLong = `stress runs random Put, Delete, DeleteRange, batches, Get, scans (both
directions, with bounds) and snapshots from several goroutines against a DB,
checking every result against an oracle that knows each key's value, and
verifies the DB after every crash:

  --crash=none       run, then verify the final state (live and after reopen)
  --crash=inprocess  lose unsynced data at random points (strict in-memory FS)
  --crash=kill       run in a child process on a real directory, SIGKILL it at
                     random moments, verify each recovery against its op log
  --faults=RATE      fail file reads/writes/syncs with probability RATE
  --corrupt-memory   flip bits in memtable entries, cached blocks and write
                     batches (before Apply) and count how many the DB reports
                     as corruption
  --corrupt-files    at some reopen points (clean close, crash, kill) flip one
                     bit in a WAL, MANIFEST or CURRENT file of the closed DB,
                     then Open: count detected (ErrCorruption; the bit is
                     restored), no effect, tail (the last record of the newest
                     WAL after a crash, indistinguishable from a crash-cut
                     tail) and missed (an acknowledged write lost or wrong:
                     a divergence)
  --txns             the transactions mode: transfers between accounts in
                     optimistic transactions (retried on conflict, some
                     synced) and audits; after each epoch (a crash with
                     --crash=inprocess, or a clean close) the committed
                     transactions replayed in commit order must reproduce
                     what each read and the recovered balances (a prefix
                     holding every synced commit), and every audit the total
  --merges           the merges mode: Put, Delete, DeleteRange, Merge (alone
                     and in batches), Get, scans both ways and snapshots on a
                     DB with a merge operator (--merger, or drawn from the
                     seed: uint64add counters or append lists whose operands
                     name their writes), small memtables so that flushes and
                     compactions combine operands; every read must return
                     exactly the value the key's history gives, and after
                     each crash (--crash=inprocess) or clean close each key
                     must hold a prefix of its history, the prefixes adding
                     up to a prefix of the commit order holding every
                     durable write

The plan (seed, DB options, workload) is printed first; rerun a failure with
its --seed. Progress goes to stderr; the summary and any failure report to
stdout. Exit status 0 means nothing diverged.

Every mode also issues empty range deletions (DeleteRange(k, k), alone and in
batches: no-ops) and inverted ones (start > end: must fail with
ErrInvalidArgument, leaving nothing behind).`

// newStressCmd is `vigil stress`: random concurrent operations against a
// DB checked by an oracle, with crashes, I/O faults, and bit flips in memory
// and in files.
func newStressCmd() *cobra.Command {
	var (
		cfg    stress.Config
		crash  string
		child  string
		txns   bool
		merges bool
		merger string
	)
	cmd := &cobra.Command{
		Use:   "stress",
		Short: "Crash, fault and corruption stress test (exit status 1 on any divergence)",
		Long:  stressLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if child != "" {
				os.Exit(stress.RunChild(ctx, child, cmd.ErrOrStderr()))
			}
			mode, err := stress.ParseCrashMode(crash)
			if err != nil {
				return usageError("%v", err)
			}
			if txns && merges {
				return usageError("--txns and --merges are separate modes: pick one")
			}
			if txns {
				return runTxnStress(ctx, cmd, cfg, mode)
			}
			if merges {
				return runMergeStress(ctx, cmd, cfg, mode, merger)
			}
			if merger != "" {
				return usageError("--merger goes with --merges")
			}
			cfg.Crash = mode
			cfg.Out = cmd.OutOrStdout()
			cfg.Log = cmd.ErrOrStderr()
			if mode == stress.CrashKill {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("kill mode needs its own executable: %w", err)
				}
				cfg.ChildCommand = stress.SelfCommand(exe, "stress")
			}
			res, err := stress.Run(ctx, cfg)
			if err != nil {
				return err
			}
			if res.Failure != nil {
				return &exitError{code: 1, err: fmt.Errorf("stress: divergence (seed %d)", res.Seed)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&cfg.Seed, "seed", 0, "random seed (0 = from the clock; printed)")
	f.DurationVar(&cfg.Duration, "duration", 0, fmt.Sprintf("run time (default %v unless --ops is given)", stress.DefaultDuration))
	f.Int64Var(&cfg.Ops, "ops", 0, "stop after this many operations (alternative to --duration)")
	f.IntVar(&cfg.Threads, "threads", 4, "worker goroutines (1 = reproducible operation sequence)")
	f.StringVar(&crash, "crash", "none", "crash mode: none, inprocess or kill")
	f.Float64Var(&cfg.FaultRate, "faults", 0, "probability of an injected I/O error per file read, write or sync")
	f.BoolVar(&cfg.CorruptMemory, "corrupt-memory", false, "flip bits in memtable entries, cached blocks and write batches")
	f.BoolVar(&cfg.CorruptFiles, "corrupt-files", false, "flip a bit in a WAL, MANIFEST or CURRENT file at some reopens and check that Open detects it or it is harmless")
	f.StringVar(&cfg.Dir, "dir", "", "directory for --crash=kill (default: a temporary directory)")
	f.IntVar(&cfg.Keys, "keys", 0, "key-space size (default: drawn from the seed)")
	f.BoolVar(&cfg.Verbose, "verbose", false, "log every crash, reopen, kill and flip")
	f.DurationVar(&cfg.ProgressInterval, "progress", 5*time.Second, "time between progress lines on stderr")
	f.BoolVar(&txns, "txns", false, "the transactions mode (with --crash=none or inprocess; --keys sets the number of accounts)")
	f.BoolVar(&merges, "merges", false, "the merges mode (with --crash=none or inprocess; --keys sets the key space)")
	f.StringVar(&merger, "merger", "", "merge operator of --merges: uint64add (counter) or append (default: drawn from the seed)")
	f.StringVar(&child, "child", "", "internal: run as a kill-mode child with this configuration file")
	_ = f.MarkHidden("child")
	return cmd
}

// runTxnStress is `vigil stress --txns`.
func runTxnStress(ctx context.Context, cmd *cobra.Command, cfg stress.Config, mode stress.CrashMode) error {
	if mode == stress.CrashKill || cfg.CorruptMemory || cfg.CorruptFiles || cfg.FaultRate > 0 {
		return usageError("--txns runs with --crash=none or inprocess, without --corrupt-*, --faults")
	}
	res, err := stress.RunTxns(ctx, stress.TxnConfig{Seed: cfg.Seed, Duration: cfg.Duration, Threads: cfg.Threads,
		Crash: mode, Accounts: cfg.Keys, Out: cmd.OutOrStdout(), ProgressInterval: cfg.ProgressInterval})
	if err != nil {
		return err
	}
	if res.Failure != nil {
		return &exitError{code: 1, err: fmt.Errorf("stress --txns: divergence (seed %d)", res.Seed)}
	}
	return nil
}

// runMergeStress is `vigil stress --merges`.
func runMergeStress(ctx context.Context, cmd *cobra.Command, cfg stress.Config, mode stress.CrashMode, merger string) error {
	if mode == stress.CrashKill || cfg.CorruptMemory || cfg.CorruptFiles || cfg.FaultRate > 0 {
		return usageError("--merges runs with --crash=none or inprocess, without --corrupt-*, --faults")
	}
	op, err := stress.ParseMergeOperator(merger)
	if err != nil {
		return usageError("%v", err)
	}
	res, err := stress.RunMerges(ctx, stress.MergeConfig{Seed: cfg.Seed, Duration: cfg.Duration, Ops: cfg.Ops, Threads: cfg.Threads,
		Crash: mode, Keys: cfg.Keys, Operator: op, Out: cmd.OutOrStdout(), Log: cmd.ErrOrStderr(), ProgressInterval: cfg.ProgressInterval})
	if err != nil {
		return err
	}
	if res.Failure != nil {
		return &exitError{code: 1, err: fmt.Errorf("stress --merges: divergence (seed %d)", res.Seed)}
	}
	return nil
}
