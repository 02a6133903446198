package peers

import (
	"bufio"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/cockroachdb/pebble/vfs"
)

// Machine describes where a comparison ran, for the header of the table
// and the JSON: figures from different machines must not be compared.
type Machine struct {
	CPU        string `json:"cpu"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	// Pebble is the Pebble module version linked in.
	Pebble string `json:"pebble"`
	// CGO is the build's CGO_ENABLED ("1", "0" or "" if unknown). With
	// cgo, Pebble allocates its memtables and block cache with C malloc;
	// without, on the Go heap: it shapes Pebble's RSS.
	CGO string `json:"cgo_enabled"`
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute averages when the
	// comparison started ("" where unavailable): above the core count, the
	// figures are noisy.
	LoadAvg string `json:"load_avg"`
}

// ThisMachine gathers the Machine of the running process.
func ThisMachine() Machine {
	m := Machine{
		CPU:        "unknown",
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		Pebble:     "unknown",
		LoadAvg:    LoadAvg(),
	}
	if data, err := readSmallFile("/proc/cpuinfo"); err == nil {
		if cpu := CPUModel(data); cpu != "" {
			m.CPU = cpu
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/cockroachdb/pebble" {
				m.Pebble = d.Version
			}
		}
		for _, st := range bi.Settings {
			if st.Key == "CGO_ENABLED" {
				m.CGO = st.Value
			}
		}
	}
	return m
}

// LoadAvg returns the 1, 5 and 15 minute load averages from /proc/loadavg,
// or "" where there is none.
func LoadAvg() string {
	data, err := readSmallFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// CPUModel returns the first "model name" of a /proc/cpuinfo text (x86),
// else its first "Hardware" or "cpu model" line (other architectures), or
// "" if there is none.
func CPUModel(cpuinfo []byte) string {
	var fallback string
	sc := bufio.NewScanner(strings.NewReader(string(cpuinfo)))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "model name":
			return v
		case "Hardware", "cpu model":
			if fallback == "" {
				fallback = v
			}
		}
	}
	return fallback
}

// readSmallFile reads a /proc file (at most 1 MiB: /proc files report size
// 0, so read until EOF under a bound).
func readSmallFile(path string) ([]byte, error) {
	f, err := vfs.Default.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

// String renders the machine as the header lines of the vs output.
func (m Machine) String() string {
	cgo := "cgo " + m.CGO
	switch m.CGO {
	case "1":
		cgo = "cgo on: Pebble's memtables and cache in C malloc"
	case "0":
		cgo = "cgo off: Pebble's memtables and cache on the Go heap"
	}
	return fmt.Sprintf("CPU:      %s (%d CPUs, GOMAXPROCS %d)\nGo:       %s %s/%s; pebble %s; %s\nLoad avg: %s (at start)\n",
		m.CPU, m.NumCPU, m.GOMAXPROCS, m.GoVersion, m.OS, m.Arch, m.Pebble, cgo, m.LoadAvg)
}
