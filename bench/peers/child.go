package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/bench"
)

// ChildArg is the hidden argument that makes a vs binary (or a test binary
// whose TestMain checks [IsChild]) run one [Job] from its stdin instead of
// a comparison: `vs -vs-child < job.json`.
const ChildArg = "-vs-child"

// IsChild reports whether args (os.Args) ask for child mode.
func IsChild(args []string) bool { return len(args) == 2 && args[1] == ChildArg }

// Job is one engine run of one scenario, as a child process gets it on its
// stdin. It carries everything Compare's Options say about the run except
// the Open functions: the child opens the engine named Engine among
// DefaultContenders(PebbleCacheCredit).
type Job struct {
	// Scenario is the scenario as the run has it: its KeyShape is the
	// run's key shape (Compare sets it), so the child makes the keys the
	// parent chose, as it takes KeySize from the job.
	Scenario Scenario `json:"scenario"`
	Engine   string   `json:"engine"`
	// Run is 1-based (for the profile's name).
	Run int `json:"run"`
	// Dir is the run's own directory, created (and removed) by the parent;
	// the database is Dir/db and the child's result goes to Dir/result.json.
	Dir               string              `json:"dir"`
	EngineOptions     bench.EngineOptions `json:"engine_options"`
	KeySize           int                 `json:"key_size"`
	ValueSize         int                 `json:"value_size"`
	CompressionRatio  float64             `json:"compression_ratio"`
	Seed              uint64              `json:"seed"`
	PebbleCacheCredit int                 `json:"pebble_cache_credit"`
	CPUProfile        string              `json:"cpu_profile,omitempty"`
	// Verbose sends kvbench's db_bench-style lines to the child's stderr
	// (which the parent passes on).
	Verbose bool `json:"verbose,omitempty"`
}

// JobResult is what a child writes to Dir/result.json once its job is done.
type JobResult struct {
	Results []bench.Result `json:"results"`
	// HWMKiB is the child's VmHWM (/proc/self/status) after the last step.
	HWMKiB int64 `json:"vm_hwm_kib,omitempty"`
}

func resultPath(dir string) string { return filepath.Join(dir, "result.json") }

// ChildMain runs the Job read from stdin in this process and writes its
// JobResult to the job's directory. It returns the exit status: 0, or 1
// after printing the error to stderr.
func ChildMain(stdin io.Reader, stderr io.Writer) int {
	if err := runJob(stdin, stderr); err != nil {
		fmt.Fprintf(stderr, "vs child: %v\n", err)
		return 1
	}
	return 0
}

func runJob(stdin io.Reader, stderr io.Writer) error {
	var job Job
	dec := json.NewDecoder(stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&job); err != nil {
		return fmt.Errorf("reading the job: %w", err)
	}
	if job.Dir == "" {
		return errors.New("job without a directory")
	}
	var c *Contender
	names := []string{}
	for _, dc := range DefaultContenders(job.PebbleCacheCredit) {
		names = append(names, dc.Name)
		if dc.Name == job.Engine {
			c = &dc
		}
	}
	if c == nil {
		return fmt.Errorf("unknown engine %q (have %s)", job.Engine, strings.Join(names, ", "))
	}
	o := Options{
		Engine: job.EngineOptions, KeySize: job.KeySize, ValueSize: job.ValueSize,
		CompressionRatio: job.CompressionRatio, Seed: job.Seed, CPUProfile: job.CPUProfile,
	}
	if job.Verbose {
		o.Log = stderr
	}
	results, err := runEngine(o, job.Scenario, *c, job.Run, job.Dir)
	if err != nil {
		return err
	}
	data, err := json.Marshal(JobResult{Results: results, HWMKiB: selfHWMKiB()})
	if err != nil {
		return err
	}
	f, err := vfs.Default.Create(resultPath(job.Dir))
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// spawn runs job in a child process started with o.ChildCommand and
// returns its result and its peak RSS (KiB) from wait4's rusage. A child
// that fails (or whose result is missing) fails the run, with the tail of
// what it wrote to stdout and stderr in the error.
func spawn(ctx context.Context, o Options, job Job) (*JobResult, int64, error) {
	data, err := json.Marshal(job)
	if err != nil {
		return nil, 0, err
	}
	cmd := exec.CommandContext(ctx, o.ChildCommand[0], o.ChildCommand[1:]...)
	cmd.Stdin = bytes.NewReader(data)
	out := &tailBuffer{max: 32 << 10}
	cmd.Stdout = out
	cmd.Stderr = out
	if o.Log != nil {
		cmd.Stderr = io.MultiWriter(out, o.Log)
	}
	// Once killed (ctx done), do not wait long for the pipes.
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	var rss int64
	if cmd.ProcessState != nil {
		rss = maxRSSKiB(cmd.ProcessState)
	}
	if err != nil {
		if cmd.ProcessState != nil && interrupted(cmd.ProcessState) {
			// Ctrl-C reached the child before the parent's context.
			return nil, rss, fmt.Errorf("child process interrupted: %w", context.Canceled)
		}
		return nil, rss, fmt.Errorf("child process %s: %w%s", cmd.Path, err, out.report())
	}
	raw, err := os.ReadFile(resultPath(job.Dir))
	if err != nil {
		return nil, rss, fmt.Errorf("child process left no result: %w%s", err, out.report())
	}
	var res JobResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, rss, fmt.Errorf("child process result: %w%s", err, out.report())
	}
	return &res, rss, nil
}

// tailBuffer keeps the last max bytes written to it (safe for the two
// copying goroutines of exec.Cmd).
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.dropped = true
	}
	return len(p), nil
}

// report renders the captured output for an error message.
func (t *tailBuffer) report() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimRight(string(t.buf), "\n")
	if s == "" {
		return " (the child wrote nothing to stdout or stderr)"
	}
	head := "\n--- child's stdout and stderr ---\n"
	if t.dropped {
		head = "\n--- child's stdout and stderr (last " + strconv.Itoa(t.max>>10) + " KiB) ---\n"
	}
	return head + s + "\n--- end of child's output ---"
}

// selfHWMKiB returns this process's VmHWM from /proc/self/status, 0 where
// there is none.
func selfHWMKiB() int64 {
	data, err := readSmallFile("/proc/self/status")
	if err != nil {
		return 0
	}
	return parseHWM(string(data))
}

// parseHWM extracts VmHWM (in kB) from a /proc/<pid>/status text.
func parseHWM(status string) int64 {
	for _, line := range strings.Split(status, "\n") {
		v, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0
		}
		return n
	}
	return 0
}
