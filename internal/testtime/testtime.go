// Package testtime reads the event stream of `go test -json` as it comes:
// it writes what `go test` without -json would show (each package's result
// line, a failed test's output, build errors) and keeps each test's time,
// so that a run ends with the suite's slowest tests and packages.
package testtime

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
}

// Timed is a test's (or, with Test empty, a package's) time, and how it
// ended.
type Timed struct {
	Package, Test string
	Elapsed       time.Duration
	Action        string // pass, fail or skip
}

func (t Timed) String() string {
	name := t.Package
	if t.Test != "" {
		name += " " + t.Test
	}
	return fmt.Sprintf("%8.2fs  %s  %s", t.Elapsed.Seconds(), t.Action, name)
}

// Run holds what a stream said.
type Run struct {
	Tests    []Timed // every test that ended, subtests included
	Packages []Timed
}

// Copy reads r, a `go test -json` stream, writes to w what `go test`
// without -json shows, and returns each test's and package's time. A line
// that is not an event (the go command's own errors) is written as it is.
func Copy(w io.Writer, r io.Reader) (Run, error) {
	var run Run
	held := map[[2]string]*strings.Builder{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		key := [2]string{ev.Package, ev.Test}
		switch {
		case ev.Action == "build-output":
			io.WriteString(w, ev.Output)
		case ev.Action == "output" && ev.Test == "":
			// The package's own lines: its result, a panic, a timeout.
			if ev.Output != "PASS\n" {
				io.WriteString(w, ev.Output)
			}
		case ev.Action == "output":
			b := held[key]
			if b == nil {
				b = &strings.Builder{}
				held[key] = b
			}
			b.WriteString(ev.Output)
		case ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip":
			t := Timed{Package: ev.Package, Test: ev.Test, Elapsed: time.Duration(ev.Elapsed * float64(time.Second)), Action: ev.Action}
			if ev.Test == "" {
				run.Packages = append(run.Packages, t)
				continue
			}
			run.Tests = append(run.Tests, t)
			if ev.Action == "fail" {
				io.WriteString(w, held[key].String())
			}
			delete(held, key)
		}
	}
	// A test that never ended (its package timed out or crashed): its
	// output is what says why.
	for _, k := range slices.SortedFunc(maps.Keys(held), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	}) {
		io.WriteString(w, held[k].String())
	}
	return run, sc.Err()
}

// Slowest returns the n slowest tests that have no subtests of their own
// (a parent's time is its subtests'), slowest first.
func (r Run) Slowest(n int) []Timed {
	parent := map[[2]string]bool{}
	for _, t := range r.Tests {
		if i := strings.LastIndexByte(t.Test, '/'); i > 0 {
			for p := t.Test[:i]; ; {
				parent[[2]string{t.Package, p}] = true
				j := strings.LastIndexByte(p, '/')
				if j < 0 {
					break
				}
				p = p[:j]
			}
		}
	}
	var leaves []Timed
	for _, t := range r.Tests {
		if !parent[[2]string{t.Package, t.Test}] {
			leaves = append(leaves, t)
		}
	}
	return slowest(leaves, n)
}

// SlowestPackages returns the n slowest packages, slowest first.
func (r Run) SlowestPackages(n int) []Timed { return slowest(slices.Clone(r.Packages), n) }

func slowest(ts []Timed, n int) []Timed {
	slices.SortStableFunc(ts, func(a, b Timed) int { return cmp.Compare(b.Elapsed, a.Elapsed) })
	return ts[:min(n, len(ts))]
}
