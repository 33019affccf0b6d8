//go:build unix

// Unix only: another user is played with chown and setuid as root, and
// files with FIFOs; Wine has one user and no ACLs to play one with.

package hold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// The lock directory is shared with every local user. These tests play a
// hostile one: uid 65534 (nobody) where the test runs as root, by chown for
// files and as a real process for deletions.

const nobody = 65534

// needRoot skips a TestRoot test, saying why, where the test does not
// run as root.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("plays another user (uid %d: files made with chown, processes with setuid): needs root, and uid %d is not; run as root: go test -run '^TestRoot' ./internal/hold", nobody, os.Geteuid())
	}
}

// sharedDir is a lock directory another user can reach: root's, mode 1777,
// under directories anyone may enter.
func sharedDir(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	for p := base; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	dir := filepath.Join(base, "locks")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o1777)
	return dir
}

// asNobody runs a shell command as uid 65534.
func asNobody(t *testing.T, script string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// within runs f and fails the test if it has not returned after a minute:
// a hang, not a slow machine.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s still blocked after a minute", what)
	}
}

func TestSymlinksAreNotFollowed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	os.Mkdir(dir, 0o1777)
	mine := filepath.Join(t.TempDir(), "mine")
	os.WriteFile(mine, []byte("precious\n"), 0o600)
	os.Mkdir(filepath.Join(dir, "npu"), 0o777)
	for _, name := range []string{"npu.q.00000000000000000001", "npu.h.00000000000000000001", "npu.seq", "npu.lock", "npu/seq", "npu/lock"} {
		if err := os.Symlink(mine, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	d := &Device{Dir: dir, Name: "npu"}
	tk, err := d.Acquire(context.Background())
	if err != nil {
		t.Fatalf("Acquire() with symlinks in the queue = %v, want the device (they are passed over)", err)
	}
	if st, err := d.Status(); err != nil || st.Holder == nil || st.Holder.PID != os.Getpid() {
		t.Errorf("Status() = %+v, %v; want this process holding", st, err)
	}
	tk.Release()
	b, _ := os.ReadFile(mine)
	fi, _ := os.Stat(mine)
	if string(b) != "precious\n" || fi.Mode().Perm() != 0o600 {
		t.Errorf("the symlinks' target = %q, mode %v; want it unchanged (\"precious\\n\", -rw-------)", b, fi.Mode())
	}

	// The lock directory itself as a symlink: refused.
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(dir, link)
	if _, err := (&Device{Dir: link, Name: "npu"}).Acquire(context.Background()); err == nil || !strings.Contains(err.Error(), "not a directory (a symlink or a file)") {
		t.Errorf("Acquire() in a symlinked lock directory = %v, want it refused", err)
	}
}

func TestFIFOsInTheQueue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	os.Mkdir(dir, 0o1777)
	for _, name := range []string{"npu.q.00000000000000000001", "npu.h.00000000000000000002", "npu.q.00000000000000000004"} {
		if err := unix.Mkfifo(filepath.Join(dir, name), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	fifoDir := filepath.Join(t.TempDir(), "fifo")
	unix.Mkfifo(fifoDir, 0o666)
	within(t, "Acquire() in a FIFO", func() {
		if _, err := (&Device{Dir: fifoDir, Name: "npu"}).Acquire(context.Background()); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("Acquire() with a FIFO as the lock directory = %v, want it refused", err)
		}
	})
	d := &Device{Dir: dir, Name: "npu"}
	within(t, "Status()", func() {
		if st, err := d.Status(); err != nil || st.Held || len(st.Queue) != 0 {
			t.Errorf("Status() with FIFOs in the queue = %+v, %v; want free", st, err)
		}
	})
	var holder *Ticket
	within(t, "Acquire()", func() {
		var err error
		if holder, err = d.Acquire(context.Background()); err != nil {
			t.Fatalf("Acquire() with FIFOs in the queue = %v", err)
		}
	})
	defer holder.Release()
	// A waiter behind the holder and a FIFO still gives up at its time.
	within(t, "a waiter's Acquire()", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := d.Acquire(ctx)
		var te *TimeoutError
		if !errors.As(err, &te) || te.Holder == nil || te.Holder.PID != os.Getpid() {
			t.Errorf("Acquire() behind a holder = %v, want a timeout naming it", err)
		}
	})
}

func TestRootLockDirOfAnotherUser(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "locks")
	os.Mkdir(dir, 0o1777)
	os.Chmod(dir, 0o1777)
	os.Chown(dir, nobody, nobody)
	d := &Device{Dir: dir, Name: "npu"}
	want := fmt.Sprintf("the lock directory %s belongs to %s, who could remove or replace anyone's ticket in it; remove it (as root or as its owner) and create it owned by root for every boot with the systemd-tmpfiles line 'd %s 1777 root root -'", dir, owner(nobody), dir)
	_, err := d.Acquire(context.Background())
	if err == nil || err.Error() != want {
		t.Errorf("Acquire() = %v, want %q", err, want)
	}
	if _, err := d.Status(); err == nil || err.Error() != want {
		t.Errorf("Status() = %v, want %q", err, want)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files were made in another user's directory: %v", ents)
	}
}

func TestRootFilesOfAnotherUserAreLeftAlone(t *testing.T) {
	needRoot(t)
	dir := sharedDir(t)
	// A dead waiter of another user, and a live one (its lock taken here,
	// on a descriptor of its own, as its owner's process would).
	dead, live := filepath.Join(dir, "npu.q.00000000000000000001"), filepath.Join(dir, "npu.q.00000000000000000002")
	facts := `{"ticket":2,"device":"npu","user":"nobody","pid":1,"command":"theirs"}` + "\n"
	for _, p := range []string{dead, live} {
		os.WriteFile(p, []byte(facts), 0o600)
		os.Chown(p, nobody, nobody)
	}
	lf, _ := os.Open(live)
	unix.Flock(int(lf.Fd()), unix.LOCK_EX)
	d := &Device{Dir: dir, Name: "npu"}
	st, err := d.Status()
	if err != nil || len(st.Queue) != 1 || st.Queue[0].Command != "theirs" {
		t.Errorf("Status() = %+v, %v; want the live waiter of the other user queued", st, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	if _, err := d.Acquire(ctx); err == nil {
		t.Errorf("Acquire() behind another user's live waiter succeeded")
	}
	cancel()
	lf.Close()
	tk, err := d.Acquire(context.Background())
	if err != nil {
		t.Fatalf("Acquire() once the other user's waiter is gone = %v", err)
	}
	if tk.Facts.Ticket != 3 {
		t.Errorf("ticket = %d, want 3 (after theirs)", tk.Facts.Ticket)
	}
	tk.Release()
	for _, p := range []string{dead, live} {
		var st unix.Stat_t
		b, _ := os.ReadFile(p)
		if err := unix.Stat(p, &st); err != nil || st.Uid != nobody || st.Mode&0o777 != 0o600 || string(b) != facts {
			t.Errorf("%s = uid %d, mode %o, %q (%v); want it unchanged", p, st.Uid, st.Mode&0o777, b, err)
		}
	}
}

// Another user removes and renames whatever they can in the lock directory
// while a holder runs; a second contender must still wait.
func TestRootDeletionsDoNotBreakExclusion(t *testing.T) {
	needRoot(t)
	e := newEnv(t)
	e.dir = sharedDir(t)
	// The other user prepares what they can before anyone comes: the old
	// per-device directory, and names in the queue.
	asNobody(t, fmt.Sprintf("cd %s && mkdir -m 777 npu && touch npu/seq npu/lock npu.q.00000000000000000001 npu.h.00000000000000000009", e.dir))
	a, _ := e.start(t, "a", "HOLD_FOR=10m")
	eventually(t, "a holds", func() bool { return strings.Contains(readFile(e.record), "a start") })
	out := asNobody(t, fmt.Sprintf("cd %s && for f in *; do mv -f $f x$f; rm -rf $f; done; ls -la", e.dir))
	st, _ := e.device().Status()
	if st == nil || st.Holder == nil || st.Holder.PID != a.Process.Pid {
		t.Fatalf("Status() after the other user's removals = %+v, want a holding; the other user saw:\n%s", st, out)
	}
	b, _ := e.start(t, "b", "HOLD_FOR=0s", "HOLD_WAIT=500ms")
	b.Wait()
	if strings.Contains(readFile(e.record), "b start") {
		t.Errorf("b held the device while a held it, after another user removed files:\n%s\n%s", readFile(e.record), out)
	}
}

// Facts in a ticket are another user's words: no control character reaches
// the console, and what is shown is bounded. Status keeps them as written
// (status --json gives the raw facts; only printing escapes them).
func TestHostileFactsAreShownSafely(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	os.Mkdir(dir, 0o1777)
	long := strings.Repeat("x", 50000)
	hostile := Facts{
		Ticket:  1,
		Device:  "npu",
		User:    "mallory\x1b[2J\n::error::owned",
		PID:     1,
		Command: "\n::add-mask::secret\r\x1b]0;title\x07" + long,
		RunURL:  "https://x/\n::stop-commands::t",
		Devices: []string{"npu"},
		Since:   time.Now(),
	}
	b, _ := json.Marshal(hostile)
	p := filepath.Join(dir, "npu.h.00000000000000000001")
	os.WriteFile(p, b, 0o644)
	f, _ := os.Open(p)
	defer f.Close()
	unix.Flock(int(f.Fd()), unix.LOCK_EX)

	d := &Device{Dir: dir, Name: "npu", Every: 10 * time.Millisecond}
	var log syncBuffer
	d.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := d.Acquire(ctx)
	st, _ := d.Status()
	if st == nil || st.Holder == nil {
		t.Fatalf("Status() = %+v, want the hostile holder", st)
	}
	for what, text := range map[string]string{"progress": log.String(), "timeout error": fmt.Sprint(err), "status": st.Holder.String()} {
		for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			if strings.ContainsAny(line, "\x1b\r\x07") || strings.HasPrefix(strings.TrimSpace(line), "::") || len(line) > 1000 {
				t.Errorf("%s line %d = %q (%d bytes): a control character, a workflow command or no bound", what, i, clip(line, 300), len(line))
			}
		}
	}
	want := hostile
	want.Since = time.Time{}
	want.Seen = &Seen{UID: uint32(os.Geteuid()), User: userNamed(uint32(os.Geteuid())), LockPID: os.Getpid()}
	got := *st.Holder
	got.Since = time.Time{}
	if got.Seen != nil {
		seen := *got.Seen
		if seen.Changed.IsZero() {
			t.Errorf("Status().Holder.Seen.Changed is zero, want the file's change time")
		}
		seen.Changed = time.Time{}
		got.Seen = &seen
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Status().Holder (-want +got):\n%s", diff)
	}
}

func TestProgressIsNotRepeatedWithoutNeed(t *testing.T) {
	var log strings.Builder
	d := &Device{Name: "npu", Log: &log, Remind: time.Hour}
	p := progress{d: d}
	holderA := []entry{{kind: holding, n: 1, facts: &Facts{Ticket: 1, User: "a", PID: 10, Command: "serve a", Devices: []string{"npu"}}, seen: Seen{User: "a", LockPID: 10}}}
	holderB := []entry{{kind: holding, n: 2, facts: &Facts{Ticket: 2, User: "b", PID: 20, Command: "serve b", Devices: []string{"npu"}}, seen: Seen{User: "b", LockPID: 20}}}
	waiter := []entry{{kind: waiting, n: 3, facts: &Facts{Ticket: 3, User: "c", PID: 30}, seen: Seen{User: "c", LockPID: 30}}}
	p.say(waiter, holderA)
	p.say(waiter, holderA)
	p.say(waiter, holderA)
	p.say(nil, holderA) // the waiter ahead went: a new place
	p.say(nil, holderB) // a new holder
	p.say(nil, holderB)
	p.at = p.at.Add(-2 * time.Hour) // a reminder is due
	p.say(nil, holderB)
	want := []string{
		`npu-hold: waiting for npu: place 3 in the queue (2 ahead); held by a (pid 10, "serve a")`,
		`npu-hold: waiting for npu: place 2 in the queue (1 ahead); held by a (pid 10, "serve a")`,
		`npu-hold: waiting for npu: place 2 in the queue (1 ahead); held by b (pid 20, "serve b")`,
		`npu-hold: waiting for npu: place 2 in the queue (1 ahead); held by b (pid 20, "serve b")`,
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSpace(log.String()), "\n")); diff != "" {
		t.Errorf("progress lines (-want +got):\n%s", diff)
	}
}

// A holder with a command line of 1.5 MB: its ticket stays small, and a
// waiter's line says a bounded part of it.
func TestLongCommandLineIsBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	long := "serve " + strings.Repeat("--flag ", 220000)
	a := &Device{Dir: dir, Name: "npu", Command: long}
	tk, err := a.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Release()
	if fi, err := os.Stat(filepath.Join(dir, tk.name)); err != nil || fi.Size() > 8<<10 {
		t.Errorf("the holder's ticket is %d bytes (%v), want at most 8 KiB", fi.Size(), err)
	}
	var log syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	(&Device{Dir: dir, Name: "npu", Log: &log}).Acquire(ctx)
	line, _, _ := strings.Cut(log.String(), "\n")
	if !strings.Contains(line, `"serve --flag --flag`) || !strings.Contains(line, `…"`) || len(line) > 400 {
		t.Errorf("progress line = %q (%d bytes), want the command cut to 200 characters", clip(line, 500), len(line))
	}
}

// Dead files of another user, under the first numbers and the last ones,
// neither use the numbers up nor block anyone: numbers follow the live
// tickets, past the names the dead ones hold.
func TestRootTicketNumbersPassOverDeadFiles(t *testing.T) {
	needRoot(t)
	dir := sharedDir(t)
	theirs := func(n uint64) string {
		p := filepath.Join(dir, entryName("npu", waiting, n))
		os.WriteFile(p, nil, 0o644)
		os.Chown(p, nobody, nobody)
		return p
	}
	for _, n := range []uint64{math.MaxUint64, math.MaxUint64 - 1, 1, 2} {
		theirs(n)
	}
	d := &Device{Dir: dir, Name: "npu"}
	for i := range 2 {
		tk, err := d.Acquire(context.Background())
		if err != nil {
			t.Fatalf("Acquire() #%d = %v, want the device", i+1, err)
		}
		if tk.Facts.Ticket != 3 {
			t.Errorf("Acquire() #%d = ticket %d, want 3 (numbers from the live tickets, none; past the dead files' names 1 and 2)", i+1, tk.Facts.Ticket)
		}
		tk.Release()
	}

	// A live ticket of theirs right below the last dead names leaves no
	// number while it lives: the error names it, and it passes with it.
	live := theirs(math.MaxUint64 - 2)
	lf, _ := os.Open(live)
	unix.Flock(int(lf.Fd()), unix.LOCK_EX)
	_, err := d.Acquire(context.Background())
	want := fmt.Sprintf("the ticket numbers of npu are used up: the live ticket %s of %s has number %d, and the names after it are taken; new tickets can be taken once it is gone", live, owner(nobody), uint64(math.MaxUint64-2))
	if err == nil || err.Error() != want {
		t.Errorf("Acquire() behind a live ticket with the last number = %v, want %q", err, want)
	}
	lf.Close()
	tk, err := d.Acquire(context.Background())
	if err != nil || tk.Facts.Ticket != 3 {
		t.Fatalf("Acquire() once the live ticket is gone = %v, want ticket 3", err)
	}
	tk.Release()
}

// TestFactsNameAnExitedHolder: a holder that died while something it started
// keeps its ticket open is not shown as if it still ran.
func TestFactsNameAnExitedHolder(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	for _, tc := range []struct {
		pid  int
		want bool
	}{{dead, true}, {os.Getpid(), false}} {
		got := Facts{User: "u", PID: tc.pid}.String()
		if strings.Contains(got, ", exited") != tc.want {
			t.Errorf("Facts{PID: %d}.String() = %q, want \"exited\" %v", tc.pid, got, tc.want)
		}
	}
}

// TestFactsNameAnUnseenHolder: a ticket whose lock /proc/locks does not show
// and whose pid is none here is held from another PID namespace (another
// container, or the host seen from one): it is said to be out of sight, not
// to have exited.
func TestFactsNameAnUnseenHolder(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	for _, tc := range []struct {
		name  string
		facts Facts
		want  string
	}{
		{"no lock shown", Facts{User: "u", PID: dead, Seen: &Seen{User: "u"}}, unseenText},
		{"its locker exited", Facts{User: "u", PID: dead, Seen: &Seen{User: "u", LockPID: dead}}, ", exited"},
		{"running", Facts{User: "u", PID: os.Getpid(), Seen: &Seen{User: "u"}}, ""},
	} {
		got := tc.facts.String()
		for _, say := range []string{unseenText, ", exited"} {
			if strings.Contains(got, say) != (say == tc.want) {
				t.Errorf("%s: String() = %q, want %q said: %v", tc.name, got, say, say == tc.want)
			}
		}
		te := &TimeoutError{Device: "npu", Holder: &tc.facts}
		if strings.Contains(te.Error(), "which has exited") != (tc.want == ", exited") {
			t.Errorf("%s: TimeoutError = %q", tc.name, te.Error())
		}
	}
}
