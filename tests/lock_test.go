package tests

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigildb/vigil"
)

// lockChildEnv makes the test binary, run as a child process, try to open
// the DB named by the variable and print what happened.
const lockChildEnv = "VIGIL_LOCK_TEST_CHILD_DIR"

// TestLockChildProcess is the child side of TestLockHoldsPerDirectory; it
// does nothing in a normal run.
func TestLockChildProcess(t *testing.T) {
	dir := os.Getenv(lockChildEnv)
	if dir == "" {
		t.Skip("child process of TestLockHoldsPerDirectory only")
	}
	db, err := vigil.Open(dir, nil)
	if err != nil {
		os.Stdout.WriteString("child: locked out: " + err.Error() + "\n")
		return
	}
	db.Close()
	os.Stdout.WriteString("child: opened\n")
}

// openInChild reports whether another process can open dir.
func openInChild(t *testing.T, dir string) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	switch {
	case strings.Contains(string(out), "child: opened"):
		return true
	case strings.Contains(string(out), "child: locked out"):
		return false
	}
	t.Fatalf("child said nothing useful:\n%s", out)
	return false
}

// The LOCK holds one directory for one handle, however the path is spelled,
// and closing a handle that failed to open cannot release another's lock.
func TestLockHoldsPerDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "db")
	db, err := vigil.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Put([]byte("k"), []byte("v"), vigil.Sync); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, spelling := range []string{dir, link, dir + "/", rel, filepath.Join(root, ".", "db"), link + "/"} {
		db2, err := vigil.Open(spelling, nil)
		if err == nil {
			db2.Close()
			t.Fatalf("a second Open of the same directory as %q succeeded", spelling)
		}
	}
	// The failed opens released nothing: another process is still kept out.
	if openInChild(t, dir) {
		t.Fatal("another process opened the DB while it is open here")
	}
	if openInChild(t, link) {
		t.Fatal("another process opened the DB through a symlink while it is open here")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if !openInChild(t, dir) {
		t.Fatal("after Close another process still cannot open the DB")
	}
	// And this process can open it again, once.
	db, err = vigil.Open(link, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vigil.Open(dir, nil); err == nil {
		t.Fatal("second Open succeeded")
	}
	if v, err := db.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); !errors.Is(err, vigil.ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
}
