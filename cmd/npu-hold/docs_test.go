package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/docs"
)

// checkCommand reads one npu-hold command line of the pages with the real
// flag sets: each subcommand stops once its flags and arguments are parsed.
func checkCommand(args []string) error {
	var stderr bytes.Buffer
	e := &env{getenv: func(string) string { return "" }, stdout: io.Discard, stderr: &stderr, parseOnly: true}
	if code := e.command(args); code != exitOK {
		return fmt.Errorf("exit %d: %s", code, said(stderr.String()))
	}
	return nil
}

// TestDocCommands reads every npu-hold command in README.md and docs/*.md
// with the real flag sets: a removed or renamed flag fails here.
func TestDocCommands(t *testing.T) {
	cmds, errs := docs.ShellCommands("../..")
	for _, err := range errs {
		t.Error(err)
	}
	n := 0
	for _, c := range cmds {
		args, ok := docs.Hold(c.Words)
		if !ok {
			continue
		}
		n++
		if err := checkCommand(args); err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
	t.Logf("%d npu-hold commands read", n)
	if n < 5 {
		t.Errorf("read %d npu-hold commands in the pages, want at least 5: are the pages' blocks still sh?", n)
	}
}

// The check fails on broken command lines, and passes the same lines
// mended.
func TestCheckCommandBroken(t *testing.T) {
	for _, tt := range []struct {
		line string
		want string // in the error; "" for none
	}{
		{"npu-hold --wait 5m -- ./bench.sh", ""},
		{"npu-hold --timeout 5m -- ./bench.sh", "flag provided but not defined: -timeout"},
		{"npu-hold --wait 5m", "no command to run"},
		{"npu-hold status --json", ""},
		{"npu-hold status --jsn", "flag provided but not defined: -jsn"},
		{"npu-hold doctor --device npu", ""},
		{"npu-hold doctor --count 2", "flag provided but not defined: -count"},
	} {
		cmds, err := docs.Commands(docs.Block{File: "test", Info: docs.Shell, Text: tt.line})
		if err != nil || len(cmds) != 1 {
			t.Fatalf("Commands(%q) = %v, %v", tt.line, cmds, err)
		}
		args, _ := docs.Hold(cmds[0].Words)
		err = checkCommand(args)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("checkCommand(%q) = %v, want nil", tt.line, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("checkCommand(%q) = %v, want an error holding %q", tt.line, err, tt.want)
		}
	}
}

// said is what a command said on stderr before its usage, on one line.
func said(stderr string) string {
	for _, u := range []string{"Usage of ", "usage:"} {
		if i := strings.Index(stderr, u); i >= 0 {
			stderr = stderr[:i]
		}
	}
	return strings.Join(strings.Fields(stderr), " ")
}
