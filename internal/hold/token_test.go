//go:build unix

// Unix only: the token file (~/NPU-TOKEN) is written on Linux only.

package hold

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The token file is a convenience, the ticket is the lock: whatever is at
// its path, the device is held, nothing blocks, and nothing that is not a
// token of npu-hold's is written, followed or removed.
func TestTokenFile(t *testing.T) {
	tokenFileCases(t, []tokenCase{
		{name: "nothing there", written: true},
		{
			name:    "a file of the user's",
			prepare: func(t *testing.T, path, _ string) { os.WriteFile(path, []byte("mine\n"), 0o600) },
			warn:    `a file npu-hold did not write is there \(not a token naming its ticket\), left as it is`,
		},
		{
			name:    "a symlink",
			prepare: func(t *testing.T, path, _ string) { os.Symlink("victim", path) },
			warn:    `a symlink is there, left as it is`,
		},
		{
			name:    "a FIFO",
			prepare: func(t *testing.T, path, _ string) { unix.Mkfifo(path, 0o666) },
			warn:    `a FIFO is there, left as it is`,
		},
		{
			name:    "a directory",
			prepare: func(t *testing.T, path, _ string) { os.Mkdir(path, 0o755) },
			warn:    `a directory is there, left as it is`,
		},
		{
			name: "a stale token",
			prepare: func(t *testing.T, path, locks string) {
				// Its ticket file is gone: its holder released without
				// removing it, or was killed.
				b, _ := json.Marshal(token{Facts: Facts{Ticket: 7, Device: "npu", PID: 1}, LockDir: locks, TicketFile: "npu.h.00000000000000000007"})
				os.WriteFile(path, b, 0o644)
			},
			written: true,
		},
		{
			name: "a stale token whose ticket file is left unlocked",
			prepare: func(t *testing.T, path, locks string) {
				os.MkdirAll(locks, 0o1777)
				f := Facts{Ticket: 7, Device: "npu", PID: 1}
				b, _ := json.Marshal(f)
				os.WriteFile(filepath.Join(locks, "gpu.h.00000000000000000007"), b, 0o644)
				b, _ = json.Marshal(token{Facts: f, LockDir: locks, TicketFile: "gpu.h.00000000000000000007"})
				os.WriteFile(path, b, 0o644)
			},
			written: true,
		},
		{
			name: "the token of a live holder",
			prepare: func(t *testing.T, path, locks string) {
				tk, err := (&Device{Dir: locks, Name: "gpu", Command: "other", TokenFile: path}).Acquire(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { tk.Release() })
			},
			warn: `it holds the token of ticket 1 of gpu, held by \S+ \(pid \d+, "other"\) since .*, which is still held; it is left as it is`,
		},
		{
			name:    "no directory",
			prepare: func(t *testing.T, path, _ string) { os.Remove(filepath.Dir(path)) },
			warn:    `its directory cannot be opened: no such file or directory`,
		},
	})
}

// TestRootTokenFile: a file another user put at the token's path (made
// with chown) is theirs, and left as it is.
func TestRootTokenFile(t *testing.T) {
	needRoot(t)
	tokenFileCases(t, []tokenCase{{
		name: "a file of another user",
		prepare: func(t *testing.T, path, _ string) {
			os.WriteFile(path, []byte("theirs\n"), 0o644)
			os.Chown(path, nobody, nobody)
		},
		warn: `a file of nobody \(uid 65534\) is there, left as it is`,
	}})
}

// tokenCase is something at the token's path while a device is acquired.
type tokenCase struct {
	name string
	// prepare puts something at the token's path.
	prepare func(t *testing.T, path, locks string)
	// warn matches the warning said; "" for none.
	warn string
	// written: the token is written while held (and removed after).
	written bool
}

func tokenFileCases(t *testing.T, tests []tokenCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, locks := filepath.Join(t.TempDir(), "home"), filepath.Join(t.TempDir(), "locks")
			os.Mkdir(home, 0o755)
			path := filepath.Join(home, "NPU-TOKEN")
			if tt.prepare != nil {
				tt.prepare(t, path, locks)
			}
			before := snapshot(path)
			var log syncBuffer
			d := &Device{Dir: locks, Name: "npu", Command: "serve", TokenFile: path, Log: &log}
			var tk *Ticket
			var err error
			within(t, "Acquire()", func() { tk, err = d.Acquire(context.Background()) })
			if err != nil {
				t.Fatalf("Acquire() = %v, want the device whatever is at the token's path", err)
			}
			if tt.written {
				var got token
				if err := json.Unmarshal([]byte(readFile(path)), &got); err != nil || got.Ticket != tk.Facts.Ticket || got.PID != os.Getpid() || got.TicketFile != tk.name {
					t.Errorf("the token while held = %q (%v), want this holder's", readFile(path), err)
				}
			} else if now := snapshot(path); now != before {
				t.Errorf("the token's path while held = %s, want it as it was: %s", now, before)
			}
			want := "^$"
			if tt.warn != "" {
				want = `^npu-hold: warning: the token file ` + regexp.QuoteMeta(path) + ` is not written: ` + tt.warn + `; the ticket holds the device all the same\n$`
			}
			if !regexp.MustCompile(want).MatchString(log.String()) {
				t.Errorf("Acquire() said %q, want it to match %s", log.String(), want)
			}
			tk.Release()
			now := snapshot(path)
			if tt.written && now != "none" {
				t.Errorf("the token after release = %s, want none", now)
			}
			if !tt.written && now != before {
				t.Errorf("the token's path after release = %s, want it as it was: %s", now, before)
			}
		})
	}
}

// snapshot says what is at path, without following or opening it but to
// read a regular file.
func snapshot(path string) string {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return "none"
	}
	if err != nil {
		return err.Error()
	}
	s := fi.Mode().String()
	if fi.Mode()&os.ModeSymlink != 0 {
		target, _ := os.Readlink(path)
		s += " -> " + target
	}
	if fi.Mode().IsRegular() {
		s += " " + readFile(path)
	}
	return s
}

// A token replaced while held (by the user, or by another holder of
// theirs) is not the holder's to remove at release.
func TestTokenReplacedWhileHeldIsKept(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, "NPU-TOKEN")
	d := &Device{Dir: filepath.Join(t.TempDir(), "locks"), Name: "npu", TokenFile: path}
	for _, replace := range []func(){
		func() { os.Remove(path); os.WriteFile(path, []byte("mine\n"), 0o644) },
		func() { os.WriteFile(path, []byte("mine\n"), 0o644) }, // the same file, new words
	} {
		tk, err := d.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		replace()
		tk.Release()
		if got := readFile(path); got != "mine\n" {
			t.Errorf("the token file after release = %q, want the user's %q", got, "mine\n")
		}
		os.Remove(path)
	}
}

// A stale token (its holder killed) is removed by ClearStaleToken, a live
// one and anything else is not.
func TestClearStaleToken(t *testing.T) {
	home, locks := t.TempDir(), filepath.Join(t.TempDir(), "locks")
	path := filepath.Join(home, "NPU-TOKEN")
	tk, err := (&Device{Dir: locks, Name: "npu", Command: "serve", TokenFile: path}).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f, err := ClearStaleToken(path); f != nil || err != nil || snapshot(path) == "none" {
		t.Errorf("ClearStaleToken() while held = %v, %v; want the token kept", f, err)
	}
	// What a SIGKILL leaves: the token, and the ticket's file unlocked and
	// gone (a waiter passing over a dead file of its own user removes it).
	text := readFile(path)
	tk.Release()
	os.WriteFile(path, []byte(text), 0o644)
	f, err := ClearStaleToken(path)
	if err != nil || f == nil || f.Ticket != tk.Facts.Ticket || f.PID != os.Getpid() {
		t.Errorf("ClearStaleToken() once released = %+v, %v; want ticket %d removed", f, err, tk.Facts.Ticket)
	}
	if s := snapshot(path); s != "none" {
		t.Errorf("the token after ClearStaleToken() = %s, want none", s)
	}
	for _, other := range []string{"mine\n", `{"ticket":1}`} {
		os.WriteFile(path, []byte(other), 0o644)
		if f, err := ClearStaleToken(path); f != nil || err != nil || readFile(path) != other {
			t.Errorf("ClearStaleToken() of %q = %v, %v, left %q; want it kept", other, f, err, readFile(path))
		}
	}
	os.Remove(path)
	os.Symlink(filepath.Join(home, "target"), path)
	os.WriteFile(filepath.Join(home, "target"), []byte(text), 0o644)
	if f, err := ClearStaleToken(path); f != nil || err != nil || !strings.HasPrefix(snapshot(path), "L") {
		t.Errorf("ClearStaleToken() of a symlink to a stale token = %v, %v; want it kept", f, err)
	}
}
