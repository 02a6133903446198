// Package bench is kvbench, Vigil's db_bench-compatible benchmark engine,
// behind `vigil kvbench`.
//
// It mirrors RocksDB's db_bench 7.8.3: the command line (CLI takes every
// flag of db_bench's --help, generated into dbbench_flags.go from
// `db_bench --helpxml`; flags that map onto Vigil take effect, the others
// are accepted and, when set to a value Vigil cannot honour, reported by
// CLI.Notices), the benchmarks (the same keys and values, drawn in the same
// order from the same generators, so that found counts agree with
// db_bench's for the same --seed), and the output (result lines, the
// [AVG n runs] and [MEDIAN n runs] lines of repeated benchmarks,
// --histogram tables and the --statistics block under RocksDB's names).
//
// The Engine interface lets other stores run the very same workload code:
// bench/peers adds Pebble. bench/cmd/vsrocksdb runs kvbench and RocksDB's own
// db_bench side by side.
package bench
