//go:build !unix

package uci

import "os/exec"

// ownGroup leaves cmd as it is: without process groups, killGroup kills
// the engine's process alone.
func ownGroup(*exec.Cmd) {}

// killGroup kills cmd's process.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
