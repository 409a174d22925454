package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill a started redis-server when the test
// binary exits, since the shared server is never stopped explicitly.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
