// Package docs reads the project's Markdown pages (README.md and docs/*.md)
// as their tests need them: each fenced block with its info string, and the
// command lines of the shell blocks split into words. The tests of the
// commands check those lines with the commands' real flag sets, so a page
// that names a removed flag fails CI.
package docs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Kinds of fenced block, by info string. Every block must say which it is:
// a block without an info string, or with one not named here, is an error.
const (
	Shell = "sh"   // commands: each is checked
	YAML  = "yaml" // workflow and Helm snippets: the action's inputs are checked
	Text  = "text" // output, diagrams, log lines: not commands, skipped
	Conf  = "conf" // lines of a file the machine reads (tmpfiles.d, pools): skipped
	INI   = "ini"  // systemd unit files and drop-ins: skipped
)

// Kinds lists the info strings a block may have.
var Kinds = []string{Shell, YAML, Text, Conf, INI}

// Block is one fenced block of a page.
type Block struct {
	File string // the page, as given to Read
	Line int    // the line of the opening fence, from 1
	Info string // the info string's first word
	Text string // the lines between the fences
}

func (b Block) String() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// Pages are README.md and docs/*.md under root, the pages the project
// publishes.
func Pages(root string) ([]string, error) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	if len(pages) == 0 {
		return nil, fmt.Errorf("no pages in %s", filepath.Join(root, "docs"))
	}
	return append([]string{filepath.Join(root, "README.md")}, pages...), nil
}

// Read returns the fenced blocks of a Markdown page, in order. A fence is
// three or more backticks at the start of a line, or indented (in a list
// item); it closes at a fence of at least as many backticks.
func Read(file string) ([]Block, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		blocks []Block
		open   *Block
		fence  string
		indent string
		lines  []string
		n      int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if open == nil {
			if ticks := leadingTicks(trimmed); ticks >= 3 {
				open = &Block{File: file, Line: n}
				fence = strings.Repeat("`", ticks)
				indent = line[:len(line)-len(trimmed)]
				if words := strings.Fields(trimmed[ticks:]); len(words) > 0 {
					open.Info = words[0]
				}
				lines = nil
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, "`")) == "" {
			open.Text = strings.Join(lines, "\n")
			blocks = append(blocks, *open)
			open = nil
			continue
		}
		lines = append(lines, strings.TrimPrefix(line, indent))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if open != nil {
		return nil, fmt.Errorf("%s: the block opened here is never closed", open)
	}
	return blocks, nil
}

func leadingTicks(s string) int {
	return len(s) - len(strings.TrimLeft(s, "`"))
}

// ShellCommands is every command of the sh blocks of the pages under root
// (README.md and docs/*.md); a block whose commands cannot be read is an
// error of its own in errs, and the rest are still read.
func ShellCommands(root string) (cmds []Command, errs []error) {
	pages, err := Pages(root)
	if err != nil {
		return nil, []error{err}
	}
	for _, p := range pages {
		blocks, err := Read(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, b := range blocks {
			if b.Info != Shell {
				continue
			}
			cs, err := Commands(b)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			cmds = append(cmds, cs...)
		}
	}
	return cmds, errs
}

// Command is one simple command of a shell block: its words, quotes
// removed, with no operator (&&, ||, ;, |, parentheses) and no comment.
type Command struct {
	Block Block
	Line  int // the page's line the command starts on
	Words []string
}

func (c Command) String() string {
	return fmt.Sprintf("%s:%d: %s", c.Block.File, c.Line, strings.Join(c.Words, " "))
}

// Commands splits a shell block into simple commands. It reads the shell's
// quoting (single and double quotes, backslashes, a backslash before a line
// break), comments from an unquoted # that starts a word, and the operators
// that separate commands. Variables and command substitutions are left as
// written. Leading variable assignments (NAME=value) are dropped, and so is
// a command left with no words.
func Commands(b Block) ([]Command, error) {
	if b.Info != Shell {
		return nil, fmt.Errorf("%s: a %q block, not %q", b, b.Info, Shell)
	}
	var (
		cmds  []Command
		words []string
		word  strings.Builder
		inW   bool // a word has begun (possibly empty, as '')
		start = b.Line + 1
		line  = b.Line + 1
	)
	endWord := func() {
		if inW {
			words = append(words, word.String())
		}
		word.Reset()
		inW = false
	}
	endCmd := func() {
		endWord()
		for len(words) > 0 && isAssignment(words[0]) {
			words = words[1:]
		}
		if len(words) > 0 {
			cmds = append(cmds, Command{Block: b, Line: start, Words: words})
		}
		words = nil
		start = line
	}
	s := b.Text
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && s[i+1] == '\n':
			i++
			line++
		case c == '\\' && i+1 < len(s):
			word.WriteByte(s[i+1])
			inW = true
			i++
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("%s: line %d: a single quote is never closed", b, line)
			}
			word.WriteString(s[i+1 : i+1+j])
			line += strings.Count(s[i+1:i+1+j], "\n")
			inW = true
			i += j + 1
		case c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && strings.IndexByte("\"\\$`", s[j+1]) >= 0 {
					j++
				}
				word.WriteByte(s[j])
				if s[j] == '\n' {
					line++
				}
			}
			if j == len(s) {
				return nil, fmt.Errorf("%s: line %d: a double quote is never closed", b, line)
			}
			inW = true
			i = j
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			// A command substitution stays in its word, as written.
			depth, j := 0, i+1
			for ; j < len(s); j++ {
				if s[j] == '(' {
					depth++
				} else if s[j] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			if j == len(s) {
				return nil, fmt.Errorf("%s: line %d: a $( is never closed", b, line)
			}
			word.WriteString(s[i : j+1])
			inW = true
			i = j
		case c == '#' && !inW:
			for i < len(s) && s[i] != '\n' {
				i++
			}
			i-- // the line break ends the command
		case c == '\n':
			endCmd()
			line++
			start = line
		case c == ' ' || c == '\t':
			endWord()
		case c == ';' || c == '|' || c == '&' || c == '(' || c == ')':
			if c == '&' && (i+1 >= len(s) || s[i+1] != '&') {
				return nil, fmt.Errorf("%s: line %d: a command in the background (&) is not a command a reader can run as shown", b, line)
			}
			if (c == '&' || c == '|') && i+1 < len(s) && s[i+1] == c {
				i++
			}
			endCmd()
		default:
			word.WriteByte(c)
			inW = true
		}
	}
	endCmd()
	return cmds, nil
}

// isAssignment reports whether w is a shell variable assignment.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Gate returns the arguments of a command that runs npu-serve-smoke, and
// whether it is one: `npu-serve-smoke ARGS`, `./npu-serve-smoke ARGS`,
// `go run ./cmd/action ARGS`. A line of flags alone (it starts with --) is
// a fragment of `npu-serve-smoke run`, as the pages show serve lines and
// route rules.
func Gate(words []string) ([]string, bool) {
	switch {
	case len(words) == 0:
		return nil, false
	case filepath.Base(words[0]) == "npu-serve-smoke":
		return words[1:], true
	case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/action":
		return words[3:], true
	case strings.HasPrefix(words[0], "--"):
		return append([]string{"run"}, words...), true
	}
	return nil, false
}

// Hold returns the arguments of a command that runs npu-hold, and whether
// it is one.
func Hold(words []string) ([]string, bool) {
	if len(words) > 0 && filepath.Base(words[0]) == "npu-hold" {
		return words[1:], true
	}
	return nil, false
}

// Others are the programs the pages' shell blocks may run besides the
// project's own commands, each with where it is checked or why it is not.
var Others = map[string]string{
	"go":               "the Go tool: set-up and test commands are checked against .ci/run",
	".ci/tools":        "checked against .ci/run",
	".ci/ollama":       "checked against .ci/run",
	".ci/llama-server": "builds the llama-server of realserve/'s llama.cpp tests (docs/development.md); .ci/run does not run it",
	"cd":               "checked against .ci/run where the README names it",
	"curl":             "a release's download (docs/runner.md): the release workflow's assets",
	"sha256sum":        "a release's checksums (docs/runner.md, docs/releasing.md)",
	"install":          "installing npu-hold (docs/runner.md)",
	"cp":               "a release's checksums (docs/releasing.md)",
	"git":              "a release's tag (docs/releasing.md)",
	"./config.sh":      "GitHub's runner registration (docs/runner.md)",
	"./svc.sh":         "GitHub's runner service (docs/runner.md)",
	"sudo":             "root for the runner's set-up (docs/runner.md)",
	"setpriv":          "the suite run as the CI user (docs/development.md)",
	"systemctl":        "the runner's service (docs/runner.md)",
	"systemd-tmpfiles": "the lock directory (docs/runner.md)",
	"usermod":          "the device node's group (docs/runner.md)",
	"cat":              "reading /proc from a job (docs/runner.md)",
	"ls":               "reading a cgroup's owner from a job (docs/runner.md)",
	"ulimit":           "reading the memlock limit from a job (docs/runner.md)",
	"helm":             "a runner scale set (docs/runner.md)",
	"kubectl":          "a runner scale set (docs/runner.md)",
	"llama-server":     "a serve run under npu-hold's ticket (docs/runner.md)",
	"./bench.sh":       "a command run under npu-hold (docs/runner.md)",
	"./tp2-serve.sh":   "a command run under npu-hold (docs/runner.md)",
}

// Known reports whether a command's program is the project's own or one of
// Others.
func Known(words []string) bool {
	if _, ok := Gate(words); ok {
		return true
	}
	if _, ok := Hold(words); ok {
		return true
	}
	_, ok := Others[words[0]]
	return ok
}

// Setting returns the value of a flag given as --name VALUE or --name=VALUE
// among words (the last one given), and whether it was given.
func Setting(words []string, name string) (string, bool) {
	var v string
	var found bool
	for i, w := range words {
		w = strings.TrimPrefix(w, "-")
		switch {
		case w == "-"+name || w == name:
			if i+1 < len(words) {
				v, found = words[i+1], true
			}
		case strings.HasPrefix(w, name+"=") || strings.HasPrefix(w, "-"+name+"="):
			_, v, _ = strings.Cut(w, "=")
			found = true
		}
	}
	return v, found
}

// ErrNoVerbosity is a llama-server serve line judged by the llama.cpp
// preset without -lv 4: today's llama-server prints no model-loading line
// at its default verbosity, so the route would be "neither".
var ErrNoVerbosity = errors.New("a llama-server serve under the llama.cpp preset without -lv 4: today's llama-server prints its load lines only at verbosity 4, and the route would be judged neither")

// CheckServe checks a serve's command line against the preset that judges
// it: a llama-server serve has -lv 4 under the llama.cpp preset, and a
// preset (or route rules of its own) at all.
func CheckServe(preset string, serveWords []string, ownRoutes bool) error {
	if len(serveWords) == 0 || filepath.Base(serveWords[0]) != "llama-server" {
		return nil
	}
	switch {
	case preset == "llama.cpp":
		if i := slices.Index(serveWords, "-lv"); i < 0 || i+1 >= len(serveWords) || serveWords[i+1] != "4" {
			return ErrNoVerbosity
		}
	case preset == "" && !ownRoutes:
		return errors.New("a llama-server serve with neither the llama.cpp preset nor route rules of its own: the default rules are the reference serve's, and the route would be judged neither")
	}
	return nil
}
