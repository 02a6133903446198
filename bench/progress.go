package bench

import (
	"os"

	"github.com/schollz/progressbar/v3"
)

// progress wraps a progress bar on stderr; a nil *progress does nothing.
type progress struct {
	bar *progressbar.ProgressBar
}

// newProgress returns a bar for a benchmark of total ops when stderr is a
// terminal (or Config.Progress says so); otherwise nil. Results go to
// stdout, so piping stdout keeps the bar out of them either way.
func (r *Runner) newProgress(name string, total int64) *progress {
	show := isTerminal(r.cfg.Stderr)
	if r.cfg.Progress != nil {
		show = *r.cfg.Progress
	}
	if !show || total <= 0 {
		return nil
	}
	return &progress{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(r.cfg.Stderr),
		progressbar.OptionSetDescription(name),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("ops"),
		progressbar.OptionThrottle(100e6),
		progressbar.OptionClearOnFinish(),
	)}
}

func (p *progress) add(n int64) {
	if p != nil {
		_ = p.bar.Add64(n)
	}
}

func (p *progress) finish() {
	if p != nil {
		_ = p.bar.Finish()
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
