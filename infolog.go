package vigil

import (
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/vfs"
)

// infoLog writes the human-readable LOG file of a DB directory: opens,
// flushes, rotations, compactions, stalls and errors, one timestamped line
// each. It is for people debugging a DB, not for recovery; failures to write
// it are ignored after the first (which is remembered).
//
// Lines are queued in memory and written by a goroutine of the log's own,
// so a caller holding the DB mutex never waits for the file system. The
// queue is bounded (maxPendingLog bytes): past it lines are dropped and the
// count is written once the writer catches up.
//
// Safe for concurrent use.
type infoLog struct {
	mu      sync.Mutex
	cond    sync.Cond
	f       vfs.File
	err     error
	pending []byte
	dropped int
	closing bool
	done    chan struct{}
}

// maxPendingLog bounds the LOG lines waiting for the writer.
const maxPendingLog = 1 << 20

// openInfoLog moves an existing LOG to LOG.old and starts a new one. A nil
// fs or read-only DB gets a log that discards everything.
func openInfoLog(fs vfs.FS, dir string) *infoLog {
	name := makeFilename(fs, dir, fileTypeInfoLog, 0)
	if _, err := fs.Stat(name); err == nil {
		_ = fs.Rename(name, fs.PathJoin(dir, "LOG.old"))
	}
	f, err := fs.Create(name)
	if err != nil {
		return &infoLog{err: err}
	}
	l := &infoLog{f: f, done: make(chan struct{})}
	l.cond.L = &l.mu
	go l.writer()
	return l
}

// Infof logs one event.
func (l *infoLog) Infof(format string, args ...any) {
	if l == nil {
		return
	}
	l.write("INFO", format, args...)
}

// Errorf logs one error event.
func (l *infoLog) Errorf(format string, args ...any) {
	if l == nil {
		return
	}
	l.write("ERROR", format, args...)
}

func (l *infoLog) write(level, format string, args ...any) {
	line := fmt.Sprintf("%s %-5s %s\n", time.Now().UTC().Format("2006/01/02-15:04:05.000000"), level, fmt.Sprintf(format, args...))
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil || l.closing {
		return
	}
	if len(l.pending)+len(line) > maxPendingLog {
		l.dropped++
		return
	}
	l.pending = append(l.pending, line...)
	l.cond.Signal()
}

// writer hands queued lines to the file until Close.
func (l *infoLog) writer() {
	defer close(l.done)
	var buf []byte
	for {
		l.mu.Lock()
		for len(l.pending) == 0 && l.dropped == 0 && !l.closing {
			l.cond.Wait()
		}
		if l.dropped > 0 {
			l.pending = fmt.Appendf(l.pending, "%s ERROR (%d LOG lines dropped: the LOG writer fell behind)\n",
				time.Now().UTC().Format("2006/01/02-15:04:05.000000"), l.dropped)
			l.dropped = 0
		}
		buf, l.pending = l.pending, buf[:0]
		closing := l.closing
		l.mu.Unlock()
		if len(buf) > 0 {
			if _, err := l.f.Write(buf); err != nil {
				l.mu.Lock()
				if l.err == nil {
					l.err = err
				}
				l.mu.Unlock()
			}
		}
		if closing {
			l.mu.Lock()
			empty := len(l.pending) == 0
			l.mu.Unlock()
			if empty {
				return
			}
		}
	}
}

// Close writes what is queued, syncs and closes the log.
func (l *infoLog) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if l.f == nil || l.closing {
		l.mu.Unlock()
		return nil
	}
	l.closing = true
	l.cond.Signal()
	l.mu.Unlock()
	<-l.done
	_ = l.f.Sync()
	return l.f.Close()
}

// Logger receives the DB's info log lines (RocksDB's name for its LOG):
// opens, flushes, rotations, compactions, stalls and errors, for people
// reading them. (EventListener, not this, is for programs reacting to
// events.) By default they go to the LOG file of the
// DB directory; Options.Logger sends them elsewhere instead. Its methods
// may be called from any goroutine, and must not call back into the DB.
type Logger interface {
	Infof(format string, args ...any)
	Errorf(format string, args ...any)
}

// infoLogger is what the DB logs through: the LOG file (infoLog), the
// user's Logger, or nothing (read-only).
type infoLogger interface {
	Logger
	Close() error
}

// userLogger adapts a Logger.
type userLogger struct{ Logger }

func (userLogger) Close() error { return nil }

// discardLogger logs nothing (read-only DBs write no LOG).
type discardLogger struct{}

func (discardLogger) Infof(string, ...any)  {}
func (discardLogger) Errorf(string, ...any) {}
func (discardLogger) Close() error          { return nil }
