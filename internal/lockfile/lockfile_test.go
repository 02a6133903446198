package lockfile

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// childEnv makes the test binary, run as a child process, try to Acquire
// the directory it names and print the outcome.
const childEnv = "VIGIL_LOCKFILE_TEST_CHILD_DIR"

// TestChildProcess is the child side of TestAcquireAcrossProcesses; it does
// nothing in a normal run.
func TestChildProcess(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("child process of TestAcquireAcrossProcesses only")
	}
	l, err := Acquire(vfs.Default, dir, filepath.Join(dir, "LOCK"))
	switch {
	case errors.Is(err, ErrLocked):
		os.Stdout.WriteString("child: locked out\n")
	case err != nil:
		os.Stdout.WriteString("child: error: " + err.Error() + "\n")
	default:
		_ = l.Close()
		os.Stdout.WriteString("child: acquired\n")
	}
}

// acquireInChild reports whether another process can Acquire dir.
func acquireInChild(t *testing.T, dir string) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	switch {
	case strings.Contains(string(out), "child: acquired"):
		return true
	case strings.Contains(string(out), "child: locked out"):
		return false
	}
	t.Fatalf("child did not say locked out or acquired:\n%s", out)
	return false
}

func acquire(t *testing.T, dir string) *Lock {
	t.Helper()
	l, err := Acquire(vfs.Default, dir, filepath.Join(dir, "LOCK"))
	if err != nil {
		t.Fatalf("Acquire(%s): %v", dir, err)
	}
	return l
}

// TestAcquireSpellings checks, on the operating system's file system, that
// a held directory cannot be acquired again in this process under any
// spelling of its path (the error wraps ErrLocked), that a failed Acquire
// releases nothing, and that Close makes it available again, once.
func TestAcquireSpellings(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "db")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l := acquire(t, dir)
	spellings := []string{dir, dir + string(os.PathSeparator), filepath.Join(root, ".", "db")}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, dir); err == nil {
			spellings = append(spellings, rel)
		}
	}
	if link := filepath.Join(root, "link"); os.Symlink(dir, link) == nil {
		// (Windows needs a privilege for symlinks, and Wine makes ones it
		// cannot follow: only a link that resolves is a spelling.)
		if _, err := os.Stat(link); err == nil {
			spellings = append(spellings, link)
		}
	}
	if runtime.GOOS == "windows" {
		spellings = append(spellings, strings.ToUpper(dir)) // paths ignore case
	}
	for _, s := range spellings {
		l2, err := Acquire(vfs.Default, s, filepath.Join(s, "LOCK"))
		if err == nil {
			l2.Close()
			t.Fatalf("a second Acquire of the directory as %q succeeded", s)
		}
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("second Acquire as %q: %v, want ErrLocked", s, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v, want the first's result", err)
	}
	l = acquire(t, spellings[len(spellings)-1])
	if _, err := Acquire(vfs.Default, dir, filepath.Join(dir, "LOCK")); !errors.Is(err, ErrLocked) {
		t.Fatalf("Acquire while reacquired: %v, want ErrLocked", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLockOSPerHandle checks the operating system's lock without the
// in-process table: a second descriptor of this very process is refused
// (with ErrLocked), and closing the first releases it. This is what keeps
// two handles apart where the table cannot tell they name one directory,
// and what POSIX record locks, owned by the process, would not do.
func TestLockOSPerHandle(t *testing.T) {
	name := filepath.Join(t.TempDir(), "LOCK")
	f, err := lockOS(name)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := lockOS(name); err == nil {
		g.Close()
		t.Fatal("a second descriptor of this process took the lock")
	} else if !errors.Is(err, ErrLocked) {
		t.Fatalf("second lockOS: %v, want ErrLocked", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := lockOS(name)
	if err != nil {
		t.Fatalf("lockOS after the holder closed: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAcquireAcrossProcesses checks that another process is kept out while
// the lock is held and gets it once it is released.
func TestAcquireAcrossProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	dir := t.TempDir()
	l := acquire(t, dir)
	if acquireInChild(t, dir) {
		t.Fatal("another process acquired a held directory")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if !acquireInChild(t, dir) {
		t.Fatal("another process cannot acquire a released directory")
	}
}

// TestAcquireMemFS checks the table on another file system: one handle per
// cleaned path of one file system value, none across values.
func TestAcquireMemFS(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/db", 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(fs, "/db", "/db/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(fs, "/db/", "/db/LOCK"); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Acquire: %v, want ErrLocked", err)
	}
	other := vfs.NewMem()
	if err := other.MkdirAll("/db", 0o755); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(other, "/db", "/db/LOCK")
	if err != nil {
		t.Fatalf("Acquire on another file system: %v", err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Acquire(fs, "/db", "/db/LOCK")
	if err != nil {
		t.Fatalf("Acquire after Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
