//go:build windows

package main

import (
	"math"
	"os"
)

// signalGroup passes nothing on: the console gives Ctrl+C and Ctrl+Break
// to every process attached to it, the command's among them, and Windows
// has no other signal to pass.
func signalGroup(int, os.Signal) {}

// memlockLimit is unlimited: Windows has no RLIMIT_MEMLOCK.
func memlockLimit() uint64 { return math.MaxUint64 }

// isTerminal is false: a Windows console has no foreground process group
// to hand to the command; the command shares it.
func isTerminal(*os.File) bool { return false }

func takeTerminalBack(*os.File) {}
