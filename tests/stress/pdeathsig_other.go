//go:build !linux

package stress

import "os/exec"

// setPdeathsig does nothing outside Linux: a child whose parent died ends
// after its MaxLife.
func setPdeathsig(cmd *exec.Cmd) {}
