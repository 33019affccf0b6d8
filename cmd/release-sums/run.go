package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/release"
)

const (
	exitOK    = 0
	exitFault = 1 // a build or a file failed
	exitUsage = 2 // bad arguments or a tree that cannot be released
)

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("release-sums", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "dist", "directory for the binaries and checksums.txt")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: release-sums [-o DIR] VERSION\n\nBuilds the release's binaries into DIR and writes DIR/checksums.txt.\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	version := fs.Arg(0)
	if err := release.CheckVersion(version); err != nil {
		fmt.Fprintf(stderr, "release-sums: %v\n", err)
		return exitUsage
	}
	if err := checkClean("."); err != nil {
		fmt.Fprintf(stderr, "release-sums: %v\n", err)
		return exitUsage
	}
	s, err := release.Make(context.Background(), ".", version, *out)
	if err != nil {
		fmt.Fprintf(stderr, "release-sums: %v\n", err)
		return exitFault
	}
	var b bytes.Buffer
	if err := s.Write(&b); err != nil {
		fmt.Fprintf(stderr, "release-sums: %v\n", err)
		return exitFault
	}
	if err := os.WriteFile(filepath.Join(*out, "checksums.txt"), b.Bytes(), 0o644); err != nil {
		fmt.Fprintf(stderr, "release-sums: %v\n", err)
		return exitFault
	}
	stdout.Write(b.Bytes())
	return exitOK
}

// checkClean refuses a tree whose source differs from what git has
// committed: the action hashes the files of the commit it runs, so sums of
// anything else would never match.
func checkClean(dir string) error {
	cmd := exec.Command("git", "status", "--porcelain", "--untracked-files=all", "-z")
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git status: %v (run it in a clone of the repository)", err)
	}
	var dirty []string
	recs := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	for i := 0; i < len(recs); i++ {
		rec := recs[i]
		if len(rec) < 4 {
			continue
		}
		paths := []string{rec[3:]}
		if rec[0] == 'R' || rec[0] == 'C' {
			// A rename or copy: its source path is the next record.
			if i+1 < len(recs) {
				paths = append(paths, recs[i+1])
				i++
			}
		}
		for _, p := range paths {
			if release.IsSource(p) {
				dirty = append(dirty, p)
			}
		}
	}
	if len(dirty) > 0 {
		slices.Sort(dirty)
		return fmt.Errorf("source files differ from the last commit: %s; commit or stash them first", strings.Join(dirty, ", "))
	}
	return nil
}
