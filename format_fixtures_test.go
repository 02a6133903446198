package vigil

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
)

// Format fixtures: small DBs written by this build, committed under
// testdata/format-N/ (N the format version that wrote them) and opened,
// read and verified by every later build. A DB a release wrote must open in
// every later release: a change that breaks one of these is a format
// change, which needs a new format version and a reader for the old one.
//
// Each fixture holds tables in L0 and below, point and range deletions, an
// ingested table, and writes left in its WAL for Open to replay; from
// format 2 on, merge operands (AppendMerger) in all of these places. Regenerate
// them (only for a new format version, into a new directory) with
//
//	go test -run TestFormatFixtures -write-format-fixtures .
//
// or add one to the newest version's directory with -format-fixture=NAME.

var (
	writeFormatFixtures = flag.Bool("write-format-fixtures", false, "write the format fixtures of FormatVersionNewest into testdata")
	onlyFormatFixture   = flag.String("format-fixture", "", "with -write-format-fixtures: write only the fixture of this name")
)

type formatFixture struct {
	name string
	opts Options
}

func formatFixtures() []formatFixture {
	var out []formatFixture
	for _, ct := range []ChecksumType{ChecksumNone, ChecksumCRC32c, ChecksumXXHash, ChecksumXXHash64, ChecksumXXH3, ChecksumCRC64} {
		out = append(out, formatFixture{name: ct.String() + "-snappy", opts: Options{ChecksumType: ct, Compression: SnappyCompression}})
	}
	out = append(out,
		formatFixture{name: "xxh3-none", opts: Options{Compression: NoCompression}},
		formatFixture{name: "xxh3-zstd", opts: Options{Compression: ZstdCompression, ZstdLevel: 3}},
		formatFixture{name: "levels-none-zstd", opts: Options{Levels: []LevelOptions{{Compression: NoCompression}, {Compression: ZstdCompression}}}},
		formatFixture{name: "fixedprefix4-snappy", opts: Options{Comparer: fixtureComparer("fixedprefix4-snappy")}})
	return out
}

// fixtureComparer returns the comparer the fixture of this name was
// written with (nil: the default). Its name is recorded in the fixture, so
// it must never change.
func fixtureComparer(name string) *Comparer {
	if strings.HasPrefix(name, "fixedprefix4-") {
		return FixedPrefixComparer(4) // a prefix filter, the comparator property
	}
	return nil
}

// buildFixture writes the fixture's DB into dir on fs and returns its
// contents as the DB holds them at Close.
func buildFixture(t *testing.T, fs vfs.FS, dir string, o Options) map[string]string {
	t.Helper()
	o.FS = fs
	o.Merger = AppendMerger
	db, err := Open(dir, &o)
	if err != nil {
		t.Fatal(err)
	}
	model := map[string]string{}
	put := func(k, v string) {
		if err := db.Put([]byte(k), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
		model[k] = v
	}
	merge := func(k, v string) {
		if err := db.Merge([]byte(k), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
		model[k] += v
	}
	for i := range 300 {
		put(fmt.Sprintf("key%04d", i), fmt.Sprintf("value %d %s", i, strings.Repeat("ab", i%17)))
	}
	for i := 0; i < 300; i += 5 { // operands compacted into the bottom tables
		merge(fmt.Sprintf("key%04d", i), fmt.Sprintf("+bottom%d", i))
	}
	for i := 0; i < 300; i += 7 {
		k := fmt.Sprintf("key%04d", i)
		if err := db.Delete([]byte(k), nil); err != nil {
			t.Fatal(err)
		}
		delete(model, k)
	}
	if err := db.DeleteRange([]byte("key0100"), []byte("key0150"), nil); err != nil {
		t.Fatal(err)
	}
	for k := range model {
		if k >= "key0100" && k < "key0150" {
			delete(model, k)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := 200; i < 260; i++ {
		put(fmt.Sprintf("key%04d", i), fmt.Sprintf("second %d", i))
	}
	for i := 30; i < 330; i += 3 { // operands in an L0 table, some over nothing
		merge(fmt.Sprintf("key%04d", i), fmt.Sprintf("+l0-%d", i))
	}
	if err := db.Flush(); err != nil { // an L0 table above the compacted ones
		t.Fatal(err)
	}
	w, err := NewExternalWriter(fs, "ext.sst", &ExternalWriterOptions{ChecksumType: o.ChecksumType, Compression: o.Compression, Comparer: o.Comparer})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		k, v := fmt.Sprintf("ext%03d", i), fmt.Sprintf("ingested %d", i)
		if err := w.Set([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		model[k] = v
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Ingest([]string{"ext.sst"}); err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 30; i++ { // left in the WAL
		put(fmt.Sprintf("key%04d", i), fmt.Sprintf("in the WAL %d", i))
	}
	for i := 20; i < 40; i++ { // merge operands in the WAL, over tables' values and operands
		merge(fmt.Sprintf("key%04d", i), fmt.Sprintf("+wal%d", i))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return model
}

// formatContents renders a DB's contents, one key=value per line, sorted.
func formatContents(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s=%s\n", strconv.Quote(k), strconv.Quote(m[k]))
	}
	return sb.String()
}

// fixtureFiles are the DB files a fixture keeps: everything but the LOG
// and the lock file.
func fixtureFiles(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if n == "LOCK" || strings.HasPrefix(n, "LOG") {
			continue
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func TestFormatFixtures(t *testing.T) {
	root := filepath.Join("testdata", fmt.Sprintf("format-%d", FormatVersionNewest))
	if *writeFormatFixtures {
		for _, fx := range formatFixtures() {
			if *onlyFormatFixture != "" && fx.name != *onlyFormatFixture {
				continue
			}
			fs := vfs.NewMem()
			model := buildFixture(t, fs, "db", fx.opts)
			dst := filepath.Join(root, fx.name)
			if err := os.RemoveAll(dst); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, n := range fixtureFiles(t, fs, "db") {
				f, err := fs.Open(fs.PathJoin("db", n))
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(f)
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dst, n), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dst, "CONTENTS"), []byte(formatContents(model)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Every format version's fixtures, the older ones included.
	dirs, _ := filepath.Glob(filepath.Join("testdata", "format-*", "*"))
	if len(dirs) == 0 {
		t.Fatal("no format fixtures in testdata/format-*")
	}
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) { checkFormatFixture(t, dir) })
	}
}

// checkFormatFixture opens a copy of the fixture in dir (Open replays its
// WAL and writes), reads every key and compares with CONTENTS, and
// verifies every table and the memtable.
func checkFormatFixture(t *testing.T, dir string) {
	want, err := os.ReadFile(filepath.Join(dir, "CONTENTS"))
	if err != nil {
		t.Fatal(err)
	}
	fs := vfs.NewMem()
	if err := fs.MkdirAll("db", 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "CONTENTS" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		f, err := fs.Create(fs.PathJoin("db", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	// Open with options other than the writer's: files keep their own
	// checksum type and compression.
	// With a Merger: a fixture of format 1 (no operands) is raised to the
	// newest version, and one of format 2 holds operands of AppendMerger.
	db, err := Open("db", &Options{FS: fs, ChecksumType: checksum.CRC32c, WALRecoveryMode: WALAbsoluteConsistency, Merger: AppendMerger,
		Comparer: fixtureComparer(filepath.Base(dir))})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	got := map[string]string{}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		got[string(it.Key())] = string(it.Value())
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if g := formatContents(got); !bytes.Equal([]byte(g), want) {
		t.Fatalf("contents differ from CONTENTS:\n%s", firstDiff(g, string(want)))
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	if n := db.Metrics().Recovery.Batches; n == 0 {
		t.Errorf("Open replayed no batch from the fixture's WAL")
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: got %s, want %s", i+1, x, y)
		}
	}
	return "(equal)"
}

// TestNewerFormatVersionRefused: a DB whose MANIFEST records a format
// version newer than this build's fails Open with ErrInvalidArgument
// naming both versions, and the DB is left as it was.
func TestNewerFormatVersionRefused(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, nil)
	if err := db.Put([]byte("a"), []byte("1"), nil); err != nil {
		t.Fatal(err)
	}
	db.mu.Lock()
	db.vs.formatVersion = FormatVersionNewest + 1 // as a newer build would record it
	db.vs.manifestSize = maxManifestSize          // the next edit starts a new MANIFEST
	db.mu.Unlock()
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := Open("db", &Options{FS: fs})
	want := fmt.Sprintf("format version is %d, newer than this build's %d", FormatVersionNewest+1, FormatVersionNewest)
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open of a newer format: %v, want ErrInvalidArgument saying %q", err, want)
	}
	if _, err := Open("db2", &Options{FS: fs, FormatVersion: FormatVersionNewest + 1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Options.FormatVersion above the newest: %v", err)
	}
}
