package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := map[string]string{
		"line":       "ghs_abc123\n",
		"bare":       "ghs_abc123",
		"white":      " \t\r\nghs_abc123 \r\n\n",
		"at the max": strings.Repeat("x", MaxTokenFile-len("ghs_abc123")) + "ghs_abc123",
	}
	for name, text := range good {
		got, err := ReadTokenFile(write(name, text))
		if want := strings.TrimSpace(text); err != nil || got != want {
			t.Errorf("ReadTokenFile(%s) = %q, %v; want the token", name, got, err)
		}
	}
	bad := []struct{ name, text, want string }{
		{"empty", "", "holds no token; write the token in it, or set GITHUB_TOKEN instead"},
		{"blank", " \n\n", "holds no token"},
		{"two lines", "ghs_one\nghs_two\n", "holds more than one word"},
		{"two words", "ghs_zero ghs_one", "holds more than one word"},
		{"a control", "ghs_\x01one", "holds more than one word"},
		{"not ASCII", "ghs_ønë", "holds more than one word"},
		{"one over", strings.Repeat("x", MaxTokenFile+1), "more than 4096 bytes"},
	}
	for _, tt := range bad {
		p := write(tt.name, tt.text)
		got, err := ReadTokenFile(p)
		if err == nil || got != "" || !strings.Contains(err.Error(), "--github-token-file "+p+": "+tt.want) {
			t.Errorf("ReadTokenFile(%s) = %q, %v; want %q", tt.name, got, err, tt.want)
			continue
		}
		// Never what the file holds.
		for _, w := range strings.Fields(tt.text) {
			if len(w) > 3 && strings.Contains(err.Error(), w) {
				t.Errorf("ReadTokenFile(%s) error shows the file's %q: %v", tt.name, w, err)
			}
		}
	}
	missing := filepath.Join(dir, "missing")
	if _, err := ReadTokenFile(missing); err == nil || err.Error() != "--github-token-file "+missing+": no such file or directory; pass a file holding the token, readable by this user" {
		t.Errorf("ReadTokenFile(missing) = %v", err)
	}
	if _, err := ReadTokenFile(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("ReadTokenFile(a directory) = %v", err)
	}
}

// Check reads --github-token-file with the other settings: its problem
// among theirs, nothing created; the file's token wins over the
// environment's.
func TestCheckTokenFile(t *testing.T) {
	c := good(t)
	c.GitHubToken = "ghs_from_env"
	c.GitHubTokenFile = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(c.GitHubTokenFile, []byte("ghs_from_file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := c.Check(found("llama-server"))
	if err != nil || p.GitHubToken != "ghs_from_file" {
		t.Fatalf("Check() token = %v, %v; want the file's", p, err)
	}
	c = good(t)
	c.GitHubTokenFile = filepath.Join(t.TempDir(), "none")
	c.Replies = 0
	_, err = c.Check(found("llama-server"))
	if err == nil || !strings.Contains(err.Error(), "--github-token-file "+c.GitHubTokenFile+": no such file") || !strings.Contains(err.Error(), "--replies 0") {
		t.Errorf("Check() = %v; want both problems", err)
	}
	if _, err := os.Stat(c.Out); !os.IsNotExist(err) {
		t.Errorf("Check() with a bad token file created --out: %v", err)
	}
}

// The vendors' tools are found by Check, before anything starts, and the
// energy readings run the same ones.
func TestCheckFindsTools(t *testing.T) {
	dir := t.TempDir()
	nv := filepath.Join(dir, "nvidia-smi")
	if err := os.WriteFile(nv, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	c := good(t)
	p, err := c.Check(found("llama-server"))
	if err != nil {
		t.Fatal(err)
	}
	if tool, err := p.Tools.Look("nvidia-smi"); err != nil || tool.Path != nv {
		t.Errorf("Plan.Tools nvidia-smi = %+v, %v; want %s", tool, err, nv)
	}
	if p.EnergyEnv.Tools != p.Tools {
		t.Error("the energy readings' tools are not the plan's")
	}
}

// A file another user may read or write is refused, as ssh refuses a key
// others may read: a serve run as another user (nobody) reads the path on
// the gate's command line and then the token, and a file its group or
// every user may write can be replaced. So is a file another user owns
// (its owner may read it whatever its mode). The error says what to do.
func TestReadTokenFileMode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	if err := os.WriteFile(p, []byte("ghs_abc123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o600, 0o400, 0o640, 0o700, 0o650} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadTokenFile(p); err != nil || got != "ghs_abc123" {
			t.Errorf("ReadTokenFile(mode %04o) = %q, %v; want the token", mode, got, err)
		}
	}
	for _, mode := range []os.FileMode{0o644, 0o604, 0o602, 0o666, 0o660, 0o620} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		got, err := ReadTokenFile(p)
		want := fmt.Sprintf("--github-token-file %s: mode %04o: ", p, mode)
		if err == nil || got != "" || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "; chmod 600 "+p) {
			t.Errorf("ReadTokenFile(mode %04o) = %q, %v; want refused, %q...", mode, got, err, want)
		}
	}
}

// Another user's file: refused, its owner may read it. Root's is not.
func TestReadTokenFileOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte("ghs_abc123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadTokenFile(p); err != nil || got != "ghs_abc123" {
		t.Errorf("ReadTokenFile(root's) = %q, %v; want the token", got, err)
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	got, err := ReadTokenFile(p)
	if want := "--github-token-file " + p + ": owned by uid 65534, not this user (uid 0) nor root: its owner may read it; chown it to this user"; err == nil || got != "" || err.Error() != want {
		t.Errorf("ReadTokenFile(nobody's) = %q, %v; want %q", got, err, want)
	}
}

// A byte order mark (a file saved by Windows' Notepad) is no part of the
// token.
func TestReadTokenFileBOM(t *testing.T) {
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte("\ufeffghs_abc123\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadTokenFile(p); err != nil || got != "ghs_abc123" {
		t.Errorf("ReadTokenFile(with a BOM, CRLF) = %q, %v; want the token", got, err)
	}
}
