package bench

//go:generate go run gen_dbbench_flags.go

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// flagType is a gflags flag type, as db_bench's --helpxml names them.
type flagType uint8

const (
	flagBool flagType = iota
	flagInt32
	flagInt64
	flagUint32
	flagUint64
	flagDouble
	flagString
)

var flagTypeNames = [...]string{"bool", "int32", "int64", "uint32", "uint64", "double", "string"}

func (t flagType) String() string { return flagTypeNames[t] }

// flagSource says which part of db_bench (or of kvbench) defines a flag.
type flagSource uint8

const (
	srcDBBench            flagSource = iota // tools/db_bench_tool.cc
	srcBlockCacheAnalyzer                   // linked-in block cache trace analyzer
	srcTraceAnalyzer                        // linked-in trace analyzer
	srcIOTracerParser                       // linked-in I/O tracer parser
	srcGflags                               // the gflags library itself
	srcVigil                                // kvbench's own flags, not in db_bench 7.8.3
)

// dbBenchFlag is one row of the generated table dbBenchFlags.
type dbBenchFlag struct {
	name string
	typ  flagType
	def  string // db_bench's default, as --helpxml prints it
	src  flagSource
}

// UsageError is a bad command line: kvbench exits with status 2 on it, as
// db_bench does.
type UsageError struct{ Msg string }

// Error returns the message.
func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// cliValue holds one flag's value. It parses values as gflags does (bools
// also as yes/no, y/n, t/f, 1/0), and remembers whether the command line
// set it.
type cliValue struct {
	f   dbBenchFlag
	def string // kvbench's default (differs from f.def for some mapped flags)
	raw string
	set bool
	b   bool
	i   int64
	u   uint64
	x   float64
	s   string
}

func newCLIValue(f dbBenchFlag, def string) *cliValue {
	v := &cliValue{f: f, def: def}
	if err := v.parse(def); err != nil {
		panic(fmt.Sprintf("kvbench: flag %s: bad default %q: %v", f.name, def, err))
	}
	return v
}

func parseGflagsBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "true", "t", "yes", "y", "1":
		return true, nil
	case "false", "f", "no", "n", "0":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a bool (true/false, yes/no, 1/0)", s)
}

// parseGflagsInt parses a decimal or 0x-hex integer.
func parseGflagsInt(s string, bits int) (int64, error) {
	t := strings.TrimSpace(s)
	neg := strings.HasPrefix(t, "-")
	if neg || strings.HasPrefix(t, "+") {
		t = t[1:]
	}
	base := 10
	if strings.HasPrefix(t, "0x") || strings.HasPrefix(t, "0X") {
		base, t = 16, t[2:]
	}
	if neg {
		t = "-" + t
	}
	n, err := strconv.ParseInt(t, base, bits)
	if err != nil {
		return 0, fmt.Errorf("%q is not an int%d", s, bits)
	}
	return n, nil
}

func parseGflagsUint(s string, bits int) (uint64, error) {
	t := strings.TrimSpace(s)
	base := 10
	if strings.HasPrefix(t, "0x") || strings.HasPrefix(t, "0X") {
		base, t = 16, t[2:]
	}
	n, err := strconv.ParseUint(t, base, bits)
	if err != nil {
		return 0, fmt.Errorf("%q is not a uint%d", s, bits)
	}
	return n, nil
}

func (v *cliValue) parse(s string) error {
	var err error
	switch v.f.typ {
	case flagBool:
		v.b, err = parseGflagsBool(s)
	case flagInt32:
		v.i, err = parseGflagsInt(s, 32)
	case flagInt64:
		v.i, err = parseGflagsInt(s, 64)
	case flagUint32:
		v.u, err = parseGflagsUint(s, 32)
	case flagUint64:
		v.u, err = parseGflagsUint(s, 64)
	case flagDouble:
		v.x, err = strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			err = fmt.Errorf("%q is not a number", s)
		}
	case flagString:
		v.s = s
	}
	if err == nil {
		v.raw = s
	}
	return err
}

// Set parses s into the value and marks it set.
func (v *cliValue) Set(s string) error {
	if err := v.parse(s); err != nil {
		return err
	}
	v.set = true
	return nil
}

// String returns the value as last given.
func (v *cliValue) String() string { return v.raw }

// equals reports whether the value equals s parsed as the flag's type (so
// "1" equals "true" for a bool, "1e3" equals "1000" for a double).
func (v *cliValue) equals(s string) bool {
	o := &cliValue{f: v.f}
	if o.parse(s) != nil {
		return false
	}
	switch v.f.typ {
	case flagBool:
		return v.b == o.b
	case flagInt32, flagInt64:
		return v.i == o.i
	case flagUint32, flagUint64:
		return v.u == o.u
	case flagDouble:
		return v.x == o.x || math.Abs(v.x-o.x) <= 1e-12*math.Abs(o.x)
	}
	return v.s == o.s
}

// Notice is one db_bench flag that kvbench accepted but could not honour:
// the flag as given, and what ran instead.
type Notice struct {
	Flag    string // e.g. "--memtablerep=vector"
	Instead string
	// RootOption names the vigil.Options field that would let Vigil honour
	// the flag, when that is all it lacks.
	RootOption string
}

// String renders the notice as kvbench prints it on stderr.
func (n Notice) String() string {
	s := fmt.Sprintf("%s: not applicable to Vigil; %s", n.Flag, n.Instead)
	if n.RootOption != "" {
		s = fmt.Sprintf("%s: not applicable yet (needs vigil.Options.%s); %s", n.Flag, n.RootOption, n.Instead)
	}
	return s
}

// CLI parses kvbench's command line: every flag of db_bench 7.8.3's --help
// (generated into dbBenchFlags from `db_bench --helpxml` of the Debian/Ubuntu
// rocksdb-tools package) plus kvbench's own few, spelled -flag or --flag,
// value after '=' or as the next argument (bools only with '='), --noflag
// for a false bool, and gflags' --flagfile, --undefok, --fromenv and
// --tryfromenv. Flags that map onto Vigil take effect; the others are
// accepted, and any set to a value Vigil cannot honour is reported by
// Notices.
type CLI struct {
	vals    map[string]*cliValue
	order   []string // flag names, table order, kvbench's own last
	help    bool
	version bool
}

// NewCLI returns a CLI with every flag registered at its default.
func NewCLI() *CLI {
	c := &CLI{vals: map[string]*cliValue{}}
	add := func(f dbBenchFlag) {
		def := f.def
		if r, ok := flagRules[f.name]; ok && r.def != nil {
			def = *r.def
		}
		v := newCLIValue(f, def)
		c.vals[f.name] = v
		c.order = append(c.order, f.name)
	}
	for _, f := range dbBenchFlags {
		add(f)
	}
	for _, f := range vigilFlags {
		add(f)
	}
	return c
}

// IsFlag reports whether name is a flag kvbench accepts.
func (c *CLI) IsFlag(name string) bool { _, ok := c.vals[name]; return ok }

// value returns the named flag's value; it panics on a name that is not a
// flag, which is a bug in kvbench.
func (c *CLI) value(name string) *cliValue {
	v, ok := c.vals[name]
	if !ok {
		panic("kvbench: no flag " + name)
	}
	return v
}

func (c *CLI) boolFlag(name string) bool     { return c.value(name).b }
func (c *CLI) intFlag(name string) int64     { return c.value(name).i }
func (c *CLI) uintFlag(name string) uint64   { return c.value(name).u }
func (c *CLI) floatFlag(name string) float64 { return c.value(name).x }
func (c *CLI) strFlag(name string) string    { return c.value(name).s }

// Changed reports whether the command line set the named flag.
func (c *CLI) Changed(name string) bool { v, ok := c.vals[name]; return ok && v.set }

// NFlag is the number of flags the command line set.
func (c *CLI) NFlag() int {
	n := 0
	for _, v := range c.vals {
		if v.set {
			n++
		}
	}
	return n
}

// CPUProfile is --cpuprofile's file, or "".
func (c *CLI) CPUProfile() string { return c.strFlag("cpuprofile") }

// DBBenchVersion is the db_bench whose flags kvbench takes.
const DBBenchVersion = dbBenchVersion

// HelpRequested reports whether --help (or another gflags help flag) was given.
func (c *CLI) HelpRequested() bool { return c.help }

// VersionRequested reports whether --version was given.
func (c *CLI) VersionRequested() bool { return c.version }

// maxFlagfileDepth bounds --flagfile nesting.
const maxFlagfileDepth = 10

// Parse parses args (without the command name). Errors are *UsageError.
func (c *CLI) Parse(args []string) error {
	args, err := c.expand(args, 0)
	if err != nil {
		return err
	}
	undefok := map[string]bool{}
	for _, a := range args {
		if name, val, ok := splitFlag(a); ok && name == "undefok" {
			for _, n := range strings.Split(val, ",") {
				undefok[strings.TrimSpace(n)] = true
			}
		}
	}
	set := func(name, val string) error {
		if err := c.vals[name].Set(val); err != nil {
			return usagef("invalid value for --%s: %v", name, err)
		}
		return nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 < len(args) {
				return usagef("unexpected argument %q", args[i+1])
			}
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			msg := fmt.Sprintf("unexpected argument %q", a)
			if _, err := parseGflagsBool(a); err == nil {
				msg += " (a bool flag takes its value after '=': --flag=false)"
			}
			return usagef("%s", msg)
		}
		name, val, hasVal := splitFlag(a)
		switch {
		case name == "h" || isHelpFlag(name):
			c.help = true
			continue
		case name == "version":
			c.version = true
			continue
		}
		if !c.IsFlag(name) {
			if base, ok := strings.CutPrefix(name, "no"); ok && !hasVal && c.IsFlag(base) && c.vals[base].f.typ == flagBool {
				if err := set(base, "false"); err != nil {
					return err
				}
				continue
			}
			if undefok[name] || (strings.HasPrefix(name, "no") && undefok[name[2:]]) {
				// gflags: an undefok flag must carry its value after '='.
				continue
			}
			return usagef("unknown flag --%s: db_bench %s has no such flag either (see vigil kvbench --help)", name, dbBenchVersion)
		}
		switch {
		case hasVal:
		case c.vals[name].f.typ == flagBool:
			val = "true"
		case i+1 < len(args):
			// The value is the next argument, whatever it looks like
			// (--seed -5).
			i++
			val = args[i]
		default:
			return usagef("flag needs an argument: --%s", name)
		}
		if err := set(name, val); err != nil {
			return err
		}
	}
	if err := c.fromEnv(); err != nil {
		return err
	}
	return nil
}

func isHelpFlag(name string) bool {
	switch name {
	case "help", "helpfull", "helpshort", "helppackage", "helpxml", "helpmatch", "helpon":
		return true
	}
	return false
}

// splitFlag splits "-name=value" or "--name=value" (or without value).
func splitFlag(a string) (name, val string, hasVal bool) {
	if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
		return "", "", false
	}
	s := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
	name, val, hasVal = strings.Cut(s, "=")
	return name, val, hasVal
}

// expand replaces each --flagfile=FILE by the flags in FILE: one per line,
// blank lines and lines starting with '#' skipped.
func (c *CLI) expand(args []string, depth int) ([]string, error) {
	var out []string
	for i := 0; i < len(args); i++ {
		name, val, hasVal := splitFlag(args[i])
		if name != "flagfile" {
			out = append(out, args[i])
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, usagef("--flagfile needs a file name")
			}
			i++
			val = args[i]
		}
		if depth >= maxFlagfileDepth {
			return nil, usagef("--flagfile nested more than %d deep", maxFlagfileDepth)
		}
		for _, file := range strings.Split(val, ",") {
			data, err := os.ReadFile(file)
			if err != nil {
				return nil, usagef("--flagfile: %v", err)
			}
			var lines []string
			for _, l := range strings.Split(string(data), "\n") {
				l = strings.TrimSpace(l)
				if l == "" || strings.HasPrefix(l, "#") {
					continue
				}
				lines = append(lines, l)
			}
			sub, err := c.expand(lines, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		}
	}
	return out, nil
}

// fromEnv applies gflags' --fromenv (required) and --tryfromenv (if set)
// lists: flag NAME takes the value of the environment variable FLAGS_NAME.
func (c *CLI) fromEnv() error {
	for _, list := range []string{"fromenv", "tryfromenv"} {
		for _, name := range strings.Split(c.strFlag(list), ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			if !c.IsFlag(name) {
				return usagef("--%s: unknown flag %q", list, name)
			}
			val, ok := os.LookupEnv("FLAGS_" + name)
			if !ok {
				if list == "fromenv" {
					return usagef("--fromenv: FLAGS_%s is not set", name)
				}
				continue
			}
			if err := c.vals[name].Set(val); err != nil {
				return usagef("FLAGS_%s: %v", name, err)
			}
		}
	}
	return nil
}

// Notices returns one Notice per flag whose value Vigil cannot honour, in
// flag-table order. Flags left at db_bench's default are not reported
// unless another flag makes that default one Vigil cannot honour
// (--whole_key_filtering under --prefix_size); flags that only shape
// output, and flags of the tools linked into db_bench, never are.
func (c *CLI) Notices() []Notice {
	var out []Notice
	for _, name := range c.order {
		v := c.vals[name]
		r := ruleFor(v.f)
		if r.instead == nil || !v.set && (r.atDefault == nil || !r.atDefault(c)) {
			continue
		}
		if r.honoured != nil {
			if r.honoured(c, v) {
				continue
			}
		} else if v.equals(v.f.def) {
			continue
		}
		flag := fmt.Sprintf("--%s=%s", name, v.raw)
		if !v.set {
			flag += " (db_bench's default)"
		}
		out = append(out, Notice{
			Flag:       flag,
			Instead:    r.instead(c, v),
			RootOption: r.rootOption,
		})
	}
	return out
}

// durationFlag reads a --duration-style flag: whole seconds, as db_bench
// takes it, or a Go duration ("1m30s").
func durationFlag(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, errors.New("must be >= 0")
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is neither whole seconds nor a duration like 90s", s)
	}
	return d, nil
}

// compressionNames are db_bench's --compression_type names; Vigil has
// none, snappy and zstd.
var compressionNames = []string{"none", "snappy", "zlib", "bzip2", "lz4", "lz4hc", "xpress", "zstd"}

// Config builds the run's Config from the parsed flags. The engine options
// honour every flag that maps onto Vigil; problems are *UsageError.
func (c *CLI) Config() (Config, error) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	cfg := c.workload(bad)
	checkWorkload(&cfg, bad)
	eo := c.engineOptions(&cfg, bad)
	checkPrefixes(&cfg, eo.PrefixSize, bad)
	if len(problems) > 0 {
		return cfg, usagef("%s", strings.Join(problems, "; "))
	}
	if _, err := ParseSpecs(cfg.Benchmarks); err != nil {
		return cfg, usagef("--benchmarks: %v", err)
	}
	cfg.Engine = eo
	return cfg, nil
}

// workload reads the workload and output flags into a Config.
func (c *CLI) workload(bad func(string, ...any)) Config {
	var cfg Config

	cfg.Benchmarks = c.strFlag("benchmarks")
	cfg.Num = c.intFlag("num")
	cfg.NumSet = c.Changed("num")
	cfg.Reads = c.intFlag("reads")
	cfg.Writes = c.intFlag("writes")
	cfg.Deletes, cfg.DeletesSet = c.intFlag("deletes"), true
	d, err := durationFlag(c.value("duration").raw)
	if err != nil {
		bad("--duration: %v", err)
	}
	cfg.Duration = d
	cfg.KeySize = int(c.intFlag("key_size"))
	ks, err := ParseKeyShape(c.strFlag("key_shape"))
	if err != nil {
		bad("--key_shape: %v", err)
	}
	cfg.KeyShape = ks
	cfg.ValueSize = int(c.intFlag("value_size"))
	cfg.ValueSizeMax = int(c.intFlag("value_size_max"))
	cfg.CompressionRatio = c.floatFlag("compression_ratio")
	cfg.Seed = uint64(c.intFlag("seed"))
	cfg.Threads = int(c.intFlag("threads"))
	cfg.BatchSize = c.intFlag("batch_size")
	cfg.ReadWritePercent = int(c.intFlag("readwritepercent"))
	cfg.MergeReadPercent = int(c.intFlag("mergereadpercent"))
	cfg.MergeKeys = c.intFlag("merge_keys")
	cfg.SeekNexts = int(c.intFlag("seek_nexts"))
	cfg.ReverseIterator = c.boolFlag("reverse_iterator")
	cfg.KeysPerPrefix = c.intFlag("keys_per_prefix")
	cfg.TotalOrderSeek = c.boolFlag("total_order_seek")
	cfg.PrefixSameAsStart = c.boolFlag("prefix_same_as_start")
	cfg.AutoPrefixMode = c.boolFlag("auto_prefix_mode")
	cfg.SeekMissingPrefix = c.boolFlag("seek_missing_prefix")
	cfg.WriteRateLimit = int64(c.uintFlag("benchmark_write_rate_limit"))
	cfg.ReadRateLimit = int64(c.uintFlag("benchmark_read_rate_limit"))
	cfg.OpsBetweenDurationChecks = c.intFlag("ops_between_duration_checks")
	cfg.Sync = c.boolFlag("sync")
	cfg.DB = c.strFlag("db")
	cfg.UseExistingDB = c.boolFlag("use_existing_db")
	cfg.SkipFillsOnExistingDB = true
	cfg.Histogram = c.boolFlag("histogram")
	cfg.Statistics = c.boolFlag("statistics")
	cfg.ConfidenceIntervalOnly = c.boolFlag("confidence_interval_only")
	cfg.Stats = c.boolFlag("stats")
	cfg.JSONPath = c.strFlag("json")
	cfg.BlockSize = int(c.intFlag("block_size"))
	if c.Changed("progress_reports") && !c.boolFlag("progress_reports") {
		off := false
		cfg.Progress = &off
	}

	return cfg
}

// checkWorkload reports workload values db_bench would refuse too.
func checkWorkload(cfg *Config, bad func(string, ...any)) {
	if cfg.Num < 0 {
		bad("--num must be >= 0")
	}
	if cfg.KeySize < 1 {
		bad("--key_size must be >= 1")
	}
	if cfg.ValueSize < 0 {
		bad("--value_size must be >= 0")
	}
	if cfg.BlockSize <= 0 {
		bad("--block_size must be positive")
	}
	if cfg.Threads < 1 {
		bad("--threads must be >= 1")
	}
	if cfg.CompressionRatio <= 0 || cfg.CompressionRatio > 1 {
		bad("--compression_ratio must be in (0, 1]")
	}
	if cfg.BatchSize < 1 {
		bad("--batch_size must be >= 1")
	}
	if cfg.ReadWritePercent < 0 || cfg.ReadWritePercent > 100 {
		bad("--readwritepercent must be in [0, 100]")
	}
	if cfg.MergeReadPercent < 0 || cfg.MergeReadPercent > 100 {
		bad("--mergereadpercent must be in [0, 100]")
	}
	if cfg.MergeKeys == 0 {
		bad("--merge_keys must be >= 1, or negative for --num")
	}
	if cfg.SeekNexts < 0 {
		bad("--seek_nexts must be >= 0")
	}
	if cfg.OpsBetweenDurationChecks < 1 {
		bad("--ops_between_duration_checks must be >= 1")
	}
}

// maxPrefixSize bounds --prefix_size, as db_bench's flag validator does.
const maxPrefixSize = 2000000000

// checkPrefixes reports the prefix flags' values db_bench refuses too
// (--prefix_size out of range or longer than the keys, --seek_missing_prefix
// without a prefix of more than 8 bytes) and a --keys_per_prefix larger
// than the key space, where db_bench divides by zero prefixes.
func checkPrefixes(cfg *Config, prefixSize int, bad func(string, ...any)) {
	if prefixSize < 0 || prefixSize >= maxPrefixSize {
		bad("--prefix_size must be in [0, %d)", maxPrefixSize)
	}
	if _, maxLen := cfg.KeyShape.KeyLen(cfg.KeySize); prefixSize > maxLen {
		bad("--prefix_size=%d is larger than the key size (%d bytes)", prefixSize, maxLen)
	}
	if cfg.SeekMissingPrefix && prefixSize <= 8 {
		bad("--seek_missing_prefix needs --prefix_size > 8, as in db_bench")
	}
	kpp := cfg.KeysPerPrefix
	if kpp <= 0 || cfg.KeyShape != KeyDBBench {
		return
	}
	if cfg.Num > 0 && kpp > cfg.Num {
		bad("--keys_per_prefix=%d is more than --num=%d: no whole prefix (db_bench divides by zero)", kpp, cfg.Num)
	}
	specs, _ := ParseSpecs(cfg.Benchmarks)
	for _, s := range specs {
		if isMergeBenchmark(s.Name) && cfg.MergeKeys > 0 && kpp > cfg.MergeKeys {
			bad("--keys_per_prefix=%d is more than --merge_keys=%d: no whole prefix (db_bench divides by zero)", kpp, cfg.MergeKeys)
			return
		}
	}
}

// engineOptions maps the DB-option flags onto Vigil's engine options.
func (c *CLI) engineOptions(cfg *Config, bad func(string, ...any)) EngineOptions {
	eo := EngineOptions{
		WriteBufferSize:               int(c.intFlag("write_buffer_size")),
		ParanoidMemoryChecks:          c.boolFlag("paranoid_memory_checks"),
		ScrubInterval:                 c.scrubInterval(bad),
		SkipReadChecksums:             !c.boolFlag("verify_checksum"),
		MemtableProtectionBytesPerKey: int(c.uintFlag("memtable_protection_bytes_per_key")),
		BatchProtectionBytesPerKey:    int(c.uintFlag("write_batch_protection_bytes_per_key")),
		BlockSize:                     cfg.BlockSize,
		BlockRestartInterval:          int(c.intFlag("block_restart_interval")),
		CacheSize:                     c.intFlag("cache_size"),
		MemtableFilterRatio:           c.memtableFilterRatio(),
		CostWriteBufferToCache:        c.boolFlag("cost_write_buffer_to_cache"),
		BloomBits:                     int(c.intFlag("bloom_bits")),
		PrefixSize:                    int(c.intFlag("prefix_size")),
		DisableWAL:                    c.boolFlag("disable_wal"),
		DisableAutomaticCompactions:   c.boolFlag("disable_auto_compactions"),
		ReadOnly:                      c.boolFlag("readonly"),
	}
	op, err := parseMergeOperator(c.strFlag("merge_operator"))
	if err != nil {
		bad("--merge_operator %v", err)
	}
	eo.MergeOperator = op
	c.integrityOptions(&eo, bad)
	c.shapeOptions(&eo, bad)
	return eo
}

// memtableFilterRatio is --memtable_bloom_size_ratio as
// EngineOptions.MemtableFilterRatio: off (-1) when <= 0, or with
// --memtable_whole_key_filtering=false (Vigil's memtable filter holds
// whole keys or nothing).
func (c *CLI) memtableFilterRatio() float64 {
	if r := c.floatFlag("memtable_bloom_size_ratio"); r > 0 && c.boolFlag("memtable_whole_key_filtering") {
		return r
	}
	return -1
}

// integrityOptions reads the checksum, protection and compression flags
// into eo.
func (c *CLI) integrityOptions(eo *EngineOptions, bad func(string, ...any)) {
	ct, err := parseChecksumFlag(c.strFlag("checksum_type"))
	if err != nil {
		bad("--checksum_type: %v", err)
	}
	eo.ChecksumType = ct
	switch p := eo.MemtableProtectionBytesPerKey; p {
	case 0, 1, 2, 4, 8:
	default:
		bad("--memtable_protection_bytes_per_key must be 0, 1, 2, 4 or 8")
	}
	switch p := eo.BatchProtectionBytesPerKey; p {
	case 0, 1, 2, 4, 8:
	default:
		bad("--write_batch_protection_bytes_per_key must be 0, 1, 2, 4 or 8")
	}
	comp := strings.ToLower(c.strFlag("compression_type"))
	_, runs := parseCompression(comp)
	switch {
	case runs && comp != "":
		eo.Compression = comp
	case slices.Contains(compressionNames, comp):
		eo.Compression = "snappy" // reported by Notices
	default:
		bad("--compression_type %q: want one of %s", c.strFlag("compression_type"), strings.Join(compressionNames, ", "))
	}
	if l := c.intFlag("compression_level"); l >= 1 && l <= 22 {
		eo.ZstdLevel = int(l)
	}
	if m := c.intFlag("min_level_to_compress"); m > 0 {
		eo.MinLevelToCompress = int(min(m, 7))
	}
}

// shapeOptions reads the memtable, L0, level and table-cache flags into eo:
// each only when given, so that Vigil's defaults stand otherwise.
func (c *CLI) shapeOptions(eo *EngineOptions, bad func(string, ...any)) {
	if c.Changed("max_write_buffer_number") {
		n := c.intFlag("max_write_buffer_number")
		if n < 1 {
			bad("--max_write_buffer_number must be >= 1")
		}
		// (1 is reported by Notices and runs as 2.)
		// RocksDB counts the mutable memtable; Vigil counts those waiting.
		eo.MaxImmutableMemtables = int(max(n-1, 1))
	}
	if c.Changed("level0_file_num_compaction_trigger") {
		if eo.L0CompactionTrigger = int(c.intFlag("level0_file_num_compaction_trigger")); eo.L0CompactionTrigger < 1 {
			bad("--level0_file_num_compaction_trigger must be >= 1")
		}
	}
	if c.Changed("level0_stop_writes_trigger") {
		if eo.L0StopWritesTrigger = int(c.intFlag("level0_stop_writes_trigger")); eo.L0StopWritesTrigger < 1 {
			bad("--level0_stop_writes_trigger must be >= 1")
		}
	}
	if c.Changed("level0_slowdown_writes_trigger") {
		if eo.L0SlowdownWritesTrigger = int(c.intFlag("level0_slowdown_writes_trigger")); eo.L0SlowdownWritesTrigger < 1 {
			bad("--level0_slowdown_writes_trigger must be >= 1")
		}
	}
	if c.Changed("delayed_write_rate") {
		if eo.DelayedWriteRate = int64(c.uintFlag("delayed_write_rate")); eo.DelayedWriteRate < 1 {
			bad("--delayed_write_rate must be >= 1")
		}
	}
	if c.Changed("max_bytes_for_level_base") {
		if eo.LBaseMaxBytes = int64(c.uintFlag("max_bytes_for_level_base")); eo.LBaseMaxBytes < 1 {
			bad("--max_bytes_for_level_base must be >= 1")
		}
	}
	if c.Changed("max_bytes_for_level_multiplier") {
		x := c.floatFlag("max_bytes_for_level_multiplier")
		if x <= 0 {
			bad("--max_bytes_for_level_multiplier must be positive")
		}
		eo.LevelMultiplier = float64(levelMultiplier(x))
	}
	if c.Changed("target_file_size_base") {
		if eo.TargetFileSize = c.intFlag("target_file_size_base"); eo.TargetFileSize < 1 {
			bad("--target_file_size_base must be >= 1")
		}
	}
	if c.Changed("open_files") {
		n := c.intFlag("open_files")
		switch {
		case n < 0:
			eo.MaxOpenFiles = -1
		default:
			eo.MaxOpenFiles = int(max(n, minOpenFiles))
		}
	}
	if c.Changed("wal_recovery_mode") {
		m := c.intFlag("wal_recovery_mode")
		if m < 0 || m > 3 {
			bad("--wal_recovery_mode must be 0, 1, 2 or 3 (RocksDB's numbering)")
		}
		eo.WALRecoveryMode, eo.WALRecoveryModeSet = int(m), true
	}
}

// minOpenFiles is Vigil's smallest table cache; smaller --open_files are
// raised to it (and reported).
const minOpenFiles = 16

// scrubInterval is --scrub_interval: a Go duration, empty for none.
func (c *CLI) scrubInterval(bad func(string, ...any)) time.Duration {
	v := c.strFlag("scrub_interval")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		bad("--scrub_interval %q: want a positive Go duration, e.g. 1s", v)
		return 0
	}
	return d
}
