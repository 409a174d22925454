//go:build unix

package uci

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, killed whole by
// killGroup: an engine started by a wrapper script (to set its directory
// or environment) outlived a kill of the wrapper, searching on.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills cmd's process group.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
