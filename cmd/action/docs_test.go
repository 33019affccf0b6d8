package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
	"github.com/npu-serve-smoke/npu-serve-smoke/internal/docs"
)

// checkCommand reads one npu-serve-smoke command line of the pages with the
// command's real flag sets (each subcommand stops once its flags and
// arguments are parsed), and checks that a llama-server serve it runs
// under the llama.cpp preset prints its load lines.
func checkCommand(args []string) error {
	var stderr bytes.Buffer
	e := newEnv(func(string) string { return "" }, io.Discard, &stderr)
	e.parseOnly = true
	if code := e.command(context.Background(), args); code != exitPass {
		return fmt.Errorf("exit %d: %s", code, said(stderr.String()))
	}
	if args[0] != "run" {
		return nil
	}
	c := config.Default()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runFlags(fs, &c)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	words, err := config.SplitWords(c.Serve)
	if err != nil {
		return fmt.Errorf("--serve: %v", err)
	}
	_, own := docs.Setting(args, "fast-route")
	return docs.CheckServe(c.Preset, words, own)
}

// TestDocCommands reads every npu-serve-smoke command in README.md and
// docs/*.md with the real flag sets: a removed or renamed flag, a subcommand
// that no longer exists, or a llama-server serve line its preset cannot
// judge fails here.
func TestDocCommands(t *testing.T) {
	cmds, errs := docs.ShellCommands("../..")
	for _, err := range errs {
		t.Error(err)
	}
	n := 0
	for _, c := range cmds {
		args, ok := docs.Gate(c.Words)
		if !ok {
			continue
		}
		n++
		if len(args) == 0 {
			t.Errorf("%s: no subcommand", c)
			continue
		}
		if err := checkCommand(args); err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
	t.Logf("%d npu-serve-smoke commands read", n)
	if n < 10 {
		t.Errorf("read %d npu-serve-smoke commands in the pages, want at least 10: are the pages' blocks still sh?", n)
	}
}

// The check fails on broken command lines, and passes the same lines
// mended.
func TestCheckCommandBroken(t *testing.T) {
	for _, tt := range []struct {
		line string
		want string // in the error; "" for none
	}{
		{"npu-serve-smoke run --floor 60 --replies 5", ""},
		{"npu-serve-smoke run --flor 60", "flag provided but not defined: -flor"},
		{"npu-serve-smoke run --preset llama.kpp", "llama.kpp"},
		{"npu-serve-smoke rerun out/", `unknown command "rerun"`},
		{"npu-serve-smoke judge out/ --floor 80", ""},
		{"npu-serve-smoke judge out/ --replies 3", "flag provided but not defined: -replies"},
		{"npu-serve-smoke demo --route slow", ""},
		{"npu-serve-smoke demo --route sideways", "sideways"},
		{"npu-serve-smoke demo --route slow --max-tokens 4", ""},
		{"npu-serve-smoke demo --max-tokens 1", "--max-tokens 1"},
		{"npu-serve-smoke report --matrix '{}' --history 3 runs/a runs/b", ""},
		{"npu-serve-smoke publish out --check-name x --comment never", ""},
		{"npu-serve-smoke run --preset llama.cpp --serve 'llama-server -m {model} --port {port} -lv 4'", ""},
		{"npu-serve-smoke run --preset llama.cpp --serve 'llama-server -m {model} --port {port}'", docs.ErrNoVerbosity.Error()},
		{"npu-serve-smoke run --serve '/opt/llama-server -m {model} --port {port}'", "neither the llama.cpp preset nor route rules"},
		{"npu-serve-smoke run --serve 'llama-server -m {model}' --fast-route 'offloaded 29/29'", ""},
	} {
		cmds, err := docs.Commands(docs.Block{File: "test", Info: docs.Shell, Text: tt.line})
		if err != nil || len(cmds) != 1 {
			t.Fatalf("Commands(%q) = %v, %v", tt.line, cmds, err)
		}
		args, _ := docs.Gate(cmds[0].Words)
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

// TestFlagTableDefaults checks the defaults docs/reference.md's flags table
// gives as a number or a duration against the run command's flags: a table
// that says 0.1 where the flag says 0.3 sends people the wrong way.
func TestFlagTableDefaults(t *testing.T) {
	b, err := os.ReadFile("../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	runFlags(fs, &c)
	row := regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)` \\| ([^|]*) \\|")
	checked := 0
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		name, want := m[1], strings.TrimSpace(m[2])
		f := fs.Lookup(name)
		if f == nil {
			continue // another command's flag
		}
		if d, err := time.ParseDuration(want); err == nil {
			if got, err := time.ParseDuration(f.DefValue); err != nil || got != d {
				t.Errorf("docs/reference.md: --%s defaults to %s; the flag's default is %s", name, want, f.DefValue)
			}
			checked++
			continue
		}
		if w, err := strconv.ParseFloat(want, 64); err == nil {
			if got, err := strconv.ParseFloat(f.DefValue, 64); err != nil || got != w {
				t.Errorf("docs/reference.md: --%s defaults to %s; the flag's default is %s", name, want, f.DefValue)
			}
			checked++
		}
	}
	if checked < 10 {
		t.Errorf("checked %d defaults of docs/reference.md's flags table; the table's rows are not read", checked)
	}
}
