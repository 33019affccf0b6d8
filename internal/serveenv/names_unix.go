//go:build !windows

package serveenv

import "strings"

// osNames are the system's own variables a serve needs besides Names:
// none here.
var osNames []string

// sameName tells whether two variables' names are one: on Unix, spelled
// the same.
func sameName(a, b string) bool { return a == b }

func hasPrefix(name, prefix string) bool { return strings.HasPrefix(name, prefix) }
