// Package vendortool finds and starts the device vendors' command-line
// tools the gate reads while a serve runs: nvidia-smi (power, and the
// device memory of the serve's processes) and npu-smi (likewise for
// Ascend's chips).
//
// The gate starts them because of what the serve does (it holds a device
// node), and its own environment holds the step's secrets: the token
// (GITHUB_TOKEN, INPUT_GITHUB-TOKEN), the runtime's and OIDC's request
// tokens (ACTIONS_*), the runner's file commands (GITHUB_OUTPUT, ...) and
// the gate's inputs. So each tool is
//
//   - found once, by Find, on the gate's PATH before any serve starts: a
//     serve cannot put a tool of its own on a PATH directory it can write
//     and have the gate run it later. A relative PATH entry (a directory
//     named from the gate's working directory) is passed over, and so is
//     a directory or a tool another user may write (/tmp on PATH, a
//     directory another user owns, one below a directory any user may
//     write), and a tool found through a link is kept as the file the
//     link named then;
//   - started with the serve's allow-listed environment
//     (internal/serveenv, with nothing given by --serve-env), never the
//     gate's own: a tool gets PATH, the locale, the dynamic linker's path
//     and the device runtimes' variables, and none of the secrets.
//
// A PATH directory the gate's own user can write is not passed over: a
// serve run as that user can replace what that user owns all the same
// (the gate's binary, the runner's files), before this run or during it,
// which no check here mends; a serve run as another user cannot write it.
package vendortool

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/serveenv"
)

// Names are the tools Find looks for.
var Names = []string{"nvidia-smi", "npu-smi"}

// Set is the tools found, and the environment they start with. A nil Set
// finds a tool on the process's PATH when it is looked up (Look), for a
// caller with no serve running (npu-hold doctor, tests).
type Set struct {
	paths map[string]string
	env   []string
}

// Tool is one tool as found.
type Tool struct {
	Name string
	Path string // absolute, its links resolved when it was found
	env  []string
}

// Find finds Names on environ's PATH (environ is NAME=VALUE each, the
// gate's own, os.Environ()), now, and keeps environ's allow-listed
// variables for the tools to start with.
func Find(environ []string) *Set {
	s := &Set{paths: map[string]string{}, env: serveenv.Build(environ, nil, nil, nil)}
	path, _ := serveenv.Lookup(environ, "PATH") // "Path" on Windows
	for _, name := range Names {
		if p, ok := look(name, path); ok {
			s.paths[name] = p
		}
	}
	return s
}

// look finds name in the absolute directories of path, by exec.LookPath's
// test of a file (it exists, is no directory, this user may run it), and
// returns the file it is, its links followed: a link a serve may re-point
// later is not read again. A file another user may write is passed over
// (another user's serve could have put a tool of its own there, in an
// earlier run): one any user may write, or in a directory any user may
// write, or owned by another user than root and this one (its owner may
// write it whatever its mode), or below a directory such a user may
// rename it from (one any user may write without the sticky bit, or
// owned by such a user).
func look(name, path string) (string, bool) {
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		// LookPath of a path finds the file as PATH's search would (on
		// Windows, name with PATHEXT's first extension that is there).
		f, err := exec.LookPath(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		p, err := filepath.EvalSymlinks(f)
		if err != nil {
			continue
		}
		if _, err := exec.LookPath(p); err == nil && !othersWrite(p) {
			return p, true
		}
	}
	return "", false
}

// Look is name as found; the error wraps exec.ErrNotFound where it was
// not (and for a name not among Names).
func (s *Set) Look(name string) (Tool, error) {
	if s == nil {
		s = Find(os.Environ())
	}
	p, ok := s.paths[name]
	if !ok {
		return Tool{}, &exec.Error{Name: name, Err: exec.ErrNotFound}
	}
	return Tool{Name: name, Path: p, env: s.env}, nil
}

// Env is a copy of the environment the tools start with.
func (s *Set) Env() []string {
	if s == nil {
		s = Find(os.Environ())
	}
	return slices.Clone(s.env)
}

// Command is the command that runs t with args, as exec.CommandContext
// makes it, with the tools' environment.
func (t Tool) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, t.Path, args...)
	if t.Name != "" {
		cmd.Args[0] = t.Name // the name it was found by, not its file's
	}
	cmd.Env = slices.Clone(t.env)
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would be the gate's own
	}
	return cmd
}
