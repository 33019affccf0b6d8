//go:build unix

package main

import "golang.org/x/sys/unix"

// hideHow says how hideProcess hides this process.
const hideHow = "prctl PR_SET_DUMPABLE"

// hideProcess makes this process not dumpable.
func hideProcess() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }
