package main

import (
	"fmt"
	"io"
)

func runRules(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "palace rules: not yet available")
	return exitUsage
}
