package stress

import (
	"os/exec"
	"syscall"
)

// setPdeathsig asks Linux to SIGKILL the child when the parent dies.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
