// Command release-sums builds a release's binaries the way the release
// workflow does and writes their checksums file:
//
//	go run ./cmd/release-sums v1.2.3
//
// builds npu-serve-smoke and npu-hold for linux/amd64 and linux/arm64 into
// dist/ and writes dist/checksums.txt. The maintainer commits that file as
// checksums.txt beside action.yml before tagging; the release workflow builds
// the tag again and refuses to publish unless it gets the same bytes.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/release"
)

func main() {
	out := flag.String("o", "dist", "directory for the binaries and checksums.txt")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: release-sums [-o DIR] VERSION\n\nBuilds the release's binaries into DIR and writes DIR/checksums.txt.\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	version := flag.Arg(0)
	if err := release.CheckVersion(version); err != nil {
		fmt.Fprintf(os.Stderr, "release-sums: %v\n", err)
		os.Exit(2)
	}
	if err := checkClean("."); err != nil {
		fmt.Fprintf(os.Stderr, "release-sums: %v\n", err)
		os.Exit(2)
	}
	s, err := release.Make(context.Background(), ".", version, *out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "release-sums: %v\n", err)
		os.Exit(1)
	}
	var b bytes.Buffer
	if err := s.Write(&b); err != nil {
		fmt.Fprintf(os.Stderr, "release-sums: %v\n", err)
		os.Exit(1)
	}
	if err := os.WriteFile(filepath.Join(*out, "checksums.txt"), b.Bytes(), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "release-sums: %v\n", err)
		os.Exit(1)
	}
	os.Stdout.Write(b.Bytes())
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
	for _, rec := range strings.Split(string(b), "\x00") {
		if len(rec) > 3 && release.IsSource(rec[3:]) {
			dirty = append(dirty, rec[3:])
		}
	}
	if len(dirty) > 0 {
		return fmt.Errorf("source files differ from the last commit: %s; commit or stash them first", strings.Join(dirty, ", "))
	}
	return nil
}
