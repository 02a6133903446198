package vfsutil

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// fileSystems are the two kinds RenameNoReplace and MkdirTemp treat
// differently: the OS's (its own exclusive primitives) and any other
// (checked under nameMu).
func fileSystems(t *testing.T) map[string]struct {
	fs   vfs.FS
	root string
} {
	return map[string]struct {
		fs   vfs.FS
		root string
	}{"mem": {vfs.NewMem(), ""}, "os": {vfs.Default, t.TempDir()}}
}

// MkdirTemp makes a new directory each call, beside its target, named
// target + TempSuffix + 16 hex digits, and creates missing parents.
func TestMkdirTemp(t *testing.T) {
	for name, c := range fileSystems(t) {
		t.Run(name, func(t *testing.T) {
			target := c.fs.PathJoin(c.root, "a", "b", "snap")
			seen := map[string]bool{}
			for i := 0; i < 10; i++ {
				d, err := MkdirTemp(c.fs, target)
				if err != nil {
					t.Fatal(err)
				}
				suffix, ok := strings.CutPrefix(d, target+TempSuffix)
				if !ok || len(suffix) != 16 || seen[d] {
					t.Fatalf("MkdirTemp(%s) = %s", target, d)
				}
				seen[d] = true
				if fi, err := c.fs.Stat(d); err != nil || !fi.IsDir() {
					t.Fatalf("%s: %v", d, err)
				}
			}
		})
	}
}

// RenameNoReplace publishes a directory only where nothing is: an empty
// directory, a full one and a file in the way all stay as they were.
func TestRenameNoReplace(t *testing.T) {
	for name, c := range fileSystems(t) {
		t.Run(name, func(t *testing.T) {
			p := func(n string) string { return c.fs.PathJoin(c.root, n) }
			src, err := MkdirTemp(c.fs, p("target"))
			if err != nil {
				t.Fatal(err)
			}
			if err := WriteFile(c.fs, c.fs.PathJoin(src, "f"), []byte("new")); err != nil {
				t.Fatal(err)
			}
			// In the way: an empty directory, a directory with a file, a file.
			if err := c.fs.MkdirAll(p("empty"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := c.fs.MkdirAll(p("full"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := WriteFile(c.fs, p("full/f"), []byte("old")); err != nil {
				t.Fatal(err)
			}
			if err := WriteFile(c.fs, p("file"), []byte("old")); err != nil {
				t.Fatal(err)
			}
			for _, to := range []string{"empty", "full", "file"} {
				if err := RenameNoReplace(c.fs, src, p(to)); !errors.Is(err, ErrExists) {
					t.Fatalf("RenameNoReplace onto %s = %v, want ErrExists", to, err)
				}
			}
			if names, _ := c.fs.List(p("empty")); len(names) != 0 {
				t.Fatalf("empty holds %v", names)
			}
			for _, f := range []string{"full/f", "file", c.fs.PathBase(src) + "/f"} {
				if _, err := c.fs.Stat(p(f)); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
			}
			if err := RenameNoReplace(c.fs, src, p("target")); err != nil {
				t.Fatal(err)
			}
			if _, err := c.fs.Stat(p("target/f")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Of concurrent RenameNoReplace calls to one target exactly one wins.
func TestRenameNoReplaceRace(t *testing.T) {
	for name, c := range fileSystems(t) {
		t.Run(name, func(t *testing.T) {
			for r := 0; r < 20; r++ {
				target := c.fs.PathJoin(c.root, fmt.Sprintf("t%d", r))
				const n = 4
				errs := make([]error, n)
				var wg sync.WaitGroup
				for i := range errs {
					src, err := MkdirTemp(c.fs, target)
					if err != nil {
						t.Fatal(err)
					}
					if err := WriteFile(c.fs, c.fs.PathJoin(src, "f"), []byte{byte(i)}); err != nil {
						t.Fatal(err)
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[i] = RenameNoReplace(c.fs, src, target)
					}()
				}
				wg.Wait()
				won := 0
				for _, err := range errs {
					if err == nil {
						won++
					} else if !errors.Is(err, ErrExists) {
						t.Fatal(err)
					}
				}
				if won != 1 {
					t.Fatalf("round %d: %d renames won: %v", r, won, errs)
				}
			}
		})
	}
}

// ReplaceFile leaves the new content durable on a strict file system, and
// WriteFile's errors name the file.
func TestReplaceFileDurable(t *testing.T) {
	fs := vfs.NewStrictMem()
	if err := fs.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(fs, ""); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceFile(fs, "d/x.tmp", "d/x", []byte("one"), nil); err != nil {
		t.Fatal(err)
	}
	fs.ResetToSyncedState()
	f, err := fs.Open("d/x")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	n, _ := f.Read(buf)
	f.Close()
	if string(buf[:n]) != "one" {
		t.Fatalf("d/x after a crash holds %q", buf[:n])
	}
	if err := WriteFile(fs, "nodir/x", nil); err == nil || !strings.Contains(err.Error(), "nodir/x") {
		t.Fatalf("WriteFile into a missing directory = %v", err)
	}
}
