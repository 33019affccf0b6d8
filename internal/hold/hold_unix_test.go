//go:build unix

package hold

// These tests look at what only Unix has: flock(2) and /proc/locks, SIGKILL
// of a process group, device nodes and sysfs, a file's ctime. Their
// Windows counterparts are in hold_windows_test.go.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// witness takes the exclusive flock of a device's witness file, which only
// a holder of the device takes, without waiting: a holder finds it taken
// only while another holds the device too. Only a holder the test killed
// (its pid in the killed file, written before the kill) may still have it:
// its ticket and its witness go as it exits, in no order the kernel
// promises, so the witness is then waited for.
func witness(path, killed string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			return f, nil
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			return nil, err
		}
		pid := flockers()[fileID{st.Dev, st.Ino}]
		if pid == 0 {
			continue // let go between the try and the look
		}
		b, _ := os.ReadFile(killed)
		if !slices.Contains(strings.Fields(string(b)), strconv.Itoa(pid)) {
			return nil, fmt.Errorf("%s is held by pid %d, which was not killed, while this holder (pid %d) holds the device", filepath.Base(path), pid, os.Getpid())
		}
		if err := flock(f, unix.LOCK_EX); err != nil {
			return nil, err
		}
		return f, nil
	}
}

func TestHolderKilledHandsOver(t *testing.T) {
	e := newEnv(t)
	a, _ := e.start(t, "a", "HOLD_FOR=10m")
	eventually(t, "a holds", func() bool { return strings.Contains(readFile(e.record), "a start") })
	// The token file holds the holder's facts.
	var facts Facts
	if err := json.Unmarshal([]byte(readFile(e.token)), &facts); err != nil || facts.PID != a.Process.Pid || facts.Command != "contender a" || facts.Since.IsZero() {
		t.Errorf("token file = %q (%v), want a's facts", readFile(e.token), err)
	}
	b, _ := e.start(t, "b", "HOLD_FOR=0s")
	eventually(t, "b waits", func() bool {
		st, _ := e.device().Status()
		return st != nil && len(st.Queue) == 1 && st.Queue[0].Command == "contender b"
	})
	st, _ := e.device().Status()
	if !st.Held || st.Holder == nil || st.Holder.PID != a.Process.Pid || !slices.Contains(st.Lockers, a.Process.Pid) {
		t.Errorf("Status() = %+v, want a holding and b queued", st)
	}
	a.Process.Signal(syscall.SIGKILL)
	a.Wait()
	if err := b.Wait(); err != nil {
		t.Errorf("b after a was killed: %v", err)
	}
	if !strings.Contains(readFile(e.record), "b start") {
		t.Errorf("b never held the device after its holder died:\n%s", readFile(e.record))
	}
	// a's token, stale once a was killed, was replaced by b's, which b
	// removed at its release.
	if _, err := os.Lstat(e.token); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the token file after b released = %q (%v), want none", readFile(e.token), err)
	}
	st, _ = e.device().Status()
	if st.Held || st.Holder != nil || len(st.Queue) != 0 {
		t.Errorf("Status() after all = %+v, want free", st)
	}
}

func TestEscapedChildKeepsTheDevice(t *testing.T) {
	e := newEnv(t)
	a, out := e.start(t, "a", "HOLD_CHILD=1")
	line, _ := out.ReadString('\n')
	child, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "child "))
	if err != nil {
		t.Fatalf("a said %q", line)
	}
	defer syscall.Kill(child, syscall.SIGKILL)
	a.Process.Signal(syscall.SIGKILL)
	a.Wait()
	st, _ := e.device().Status()
	if !st.Held || !slices.Contains(st.Lockers, child) {
		t.Errorf("Status() after the holder died = %+v, want the device held by its child %d", st, child)
	}
	d := e.device()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = d.Acquire(ctx)
	cancel()
	if err == nil {
		t.Fatal("Acquire() succeeded while an escaped child held the ticket")
	}
	syscall.Kill(child, syscall.SIGKILL)
	syscall.Wait4(child, nil, 0, nil)
	tk, err := d.Acquire(context.Background())
	if err != nil {
		t.Fatalf("Acquire() once the child died: %v", err)
	}
	tk.Release()
}

func TestDoctor(t *testing.T) {
	root := t.TempDir()
	mk := func(path, text string) {
		p := filepath.Join(root, path)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(text), 0o644)
	}
	lockDir := filepath.Join(root, "run/lock/npu-hold")

	cs := Doctor(root, lockDir, 8<<20)
	want := []Check{
		{"FAIL", "no device node /dev/accel/accel*: load the NPU driver (modprobe amdxdna, or intel_vpu) and check the NPU is enabled in the firmware setup"},
		{"warn", "memlock limit: 8192 KiB; NPU runtimes pin buffers and want it unlimited: LimitMEMLOCK=infinity in the runner's systemd unit, or '* - memlock unlimited' in /etc/security/limits.d/"},
		{"FAIL", "lock directory " + lockDir + " does not exist: create it for every boot with the systemd-tmpfiles line 'd " + lockDir + " 1777 root root -' (docs/runner.md)"},
	}
	if diff := cmp.Diff(want, cs); diff != "" {
		t.Errorf("Doctor() of a machine without an NPU (-want +got):\n%s", diff)
	}

	mk("dev/accel/accel0", "")
	mk("sys/class/accel/accel0/device/fw_version", "1.0.0.166\n")
	mk("sys/class/accel/accel0/device/vbnv", "RyzenAI-npu5\n")
	mk("sys/module/amdxdna/version", "2.19.0\n")
	os.MkdirAll(filepath.Join(root, "sys/bus/pci/drivers/amdxdna"), 0o755)
	os.Symlink("../../../../bus/pci/drivers/amdxdna", filepath.Join(root, "sys/class/accel/accel0/device/driver"))
	os.MkdirAll(lockDir, 0o755)
	cs = Doctor(root, lockDir, unix.RLIM_INFINITY)
	want = []Check{
		{"ok", "/dev/accel/accel0 opens (amdxdna 2.19.0, RyzenAI-npu5, firmware 1.0.0.166)"},
		{"ok", "memlock limit: unlimited"},
		{"FAIL", "lock directory " + lockDir + " is mode drwxr-xr-x, want drwxrwxrwt (1777) so every user and runner can queue: chmod 1777 " + lockDir},
	}
	if diff := cmp.Diff(want, cs); diff != "" {
		t.Errorf("Doctor() of an NPU machine (-want +got):\n%s", diff)
	}
	os.Chmod(lockDir, 0o777|os.ModeSticky)
	mk("dev/accel/accel1", "")
	cs = Doctor(root, lockDir, unix.RLIM_INFINITY)
	if cs[1] != (Check{"ok", "/dev/accel/accel1 opens (unknown driver, firmware version not in sysfs (dmesg shows it at load))"}) || cs[3] != (Check{"ok", "lock directory " + lockDir + " is shared (1777)"}) {
		t.Errorf("Doctor() = %v", cs)
	}
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o644)
	if cs := Doctor(root, file, unix.RLIM_INFINITY); cs[len(cs)-1].Level != "FAIL" || !strings.Contains(cs[len(cs)-1].What, "is not a directory") {
		t.Errorf("Doctor() of a file as the lock directory = %v", cs[len(cs)-1])
	}
	if os.Geteuid() != 0 {
		os.Chmod(filepath.Join(root, "dev/accel/accel0"), 0o000)
		if cs := Doctor(root, lockDir, unix.RLIM_INFINITY); cs[0].Level != "FAIL" || !strings.Contains(cs[0].What, "usermod -aG render") {
			t.Errorf("Doctor() of an unopenable node = %v", cs[0])
		}
	}
}

// Held checks the lock from a description of its own: a lock dropped
// through a shared descriptor is seen, and so is a lock that another
// process took after it was dropped. A check on the holder's own
// description would take the lock again and see nothing.
func TestTicketHeld(t *testing.T) {
	dir := t.TempDir()
	tk, err := (&Device{Dir: dir, Name: "npu"}).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Release()
	if err := tk.Held(); err != nil {
		t.Fatalf("Held() of a fresh ticket = %v, want nil", err)
	}
	if err := tk.Held(); err != nil {
		t.Fatalf("Held() again = %v, want nil: the check leaves the lock as it was", err)
	}
	// A process that shares the descriptor (a serve that inherited it)
	// unlocks it.
	shared, err := unix.Dup(int(tk.Files()[0].Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(shared)
	if err := unix.Flock(shared, unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := tk.Held(); err == nil || !strings.Contains(err.Error(), "was not locked any more: a process that shared its descriptor unlocked it") {
		t.Errorf("Held() after LOCK_UN through a shared descriptor = %v, want it lost", err)
	}
	if err := tk.Held(); err == nil {
		t.Errorf("Held() checked twice = nil: the first check kept a lock")
	}
	// Another process takes the unlocked file's lock.
	name := filepath.Join(dir, tk.name)
	other := exec.Command("flock", "--exclusive", name, "sh", "-c", "echo locked; exec sleep 60")
	out, err := other.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Skipf("no flock(1): %v", err)
	}
	defer func() {
		other.Process.Kill()
		other.Wait()
	}()
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if err := tk.Held(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("not by its holder (pid %d): its lock was dropped and taken again", os.Getpid())) {
		t.Errorf("Held() with the lock taken by pid %d = %v, want it named", other.Process.Pid, err)
	}
}

// Without /proc, Held opens the ticket anew by its name, and only while it
// is still the ticket's own file: a description of its own, on which the
// holder's lock is seen.
func TestTicketReopenByName(t *testing.T) {
	dir := t.TempDir()
	tk, err := (&Device{Dir: dir, Name: "npu"}).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Release()
	var st unix.Stat_t
	if err := unix.Fstat(int(tk.Files()[0].Fd()), &st); err != nil {
		t.Fatal(err)
	}
	fd, err := tk.reopenByName(&st)
	if err != nil {
		t.Fatalf("reopenByName() = %v", err)
	}
	if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("a shared lock on the reopened ticket = %v, want EWOULDBLOCK while held", err)
	}
	unix.Close(fd)
	// Another file under the ticket's name (only its owner could put it
	// there) is not the ticket.
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, filepath.Join(dir, tk.name)); err != nil {
		t.Fatal(err)
	}
	if fd, err := tk.reopenByName(&st); err == nil || !strings.Contains(err.Error(), "was replaced in the lock directory by another file") {
		if err == nil {
			unix.Close(fd)
		}
		t.Errorf("reopenByName() of a replaced ticket = %v, want it refused", err)
	}
}

// A process of the holder's user (the serve) cannot unlock the holder's
// description, but it can take the holding file's name away: removed,
// renamed, or renamed away and back. A waiter then sees no holder and is
// granted the device while the first still holds it. Held must see each of
// these, even when the name is back in place at the check.
func TestTicketNameTakenAway(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(dir, ticket string) error
		back func(dir, ticket string) error // once the second run is done
	}{
		{"removed", func(dir, tk string) error { return os.Remove(filepath.Join(dir, tk)) }, nil},
		{"renamed", func(dir, tk string) error { return os.Rename(filepath.Join(dir, tk), filepath.Join(dir, "x")) }, nil},
		{"renamed and back", func(dir, tk string) error { return os.Rename(filepath.Join(dir, tk), filepath.Join(dir, "x")) },
			func(dir, tk string) error { return os.Rename(filepath.Join(dir, "x"), filepath.Join(dir, tk)) }},
		{"linked elsewhere and back", func(dir, tk string) error {
			if err := os.Link(filepath.Join(dir, tk), filepath.Join(dir, "x")); err != nil {
				return err
			}
			return os.Remove(filepath.Join(dir, tk))
		}, func(dir, tk string) error {
			if err := os.Link(filepath.Join(dir, "x"), filepath.Join(dir, tk)); err != nil {
				return err
			}
			return os.Remove(filepath.Join(dir, "x"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tk, err := (&Device{Dir: dir, Name: "npu"}).Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer tk.Release()
			if err := tc.do(dir, tk.name); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			second, err := (&Device{Dir: dir, Name: "npu"}).Acquire(ctx)
			cancel()
			if err == nil {
				// The attack's effect: two holders of one device. The
				// second run ends before the name is put back.
				second.Release()
			}
			if tc.back != nil {
				if err := tc.back(dir, tk.name); err != nil {
					t.Fatal(err)
				}
			}
			if err := tk.Held(); err == nil {
				t.Errorf("Held() after its holding file was %s = nil, want the ticket lost (second Acquire: %v)", tc.name, err)
			}
		})
	}
}

// A lock directory of the holder's own user (NPU_HOLD_DIR, shared by its
// runner instances) can be renamed by the serve: the next waiter makes the
// directory anew, finds no holder, and is granted the device.
func TestTicketDirTakenAway(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	tk, err := (&Device{Dir: dir, Name: "npu"}).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Release()
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	second, serr := (&Device{Dir: dir, Name: "npu"}).Acquire(ctx)
	cancel()
	if serr == nil {
		second.Release()
	}
	if err := tk.Held(); err == nil || !strings.Contains(err.Error(), "is not the directory the ticket npu.h.00000000000000000001 was taken in") {
		t.Errorf("Held() after its lock directory was renamed = %v, want the ticket lost (second Acquire: %v)", err, serr)
	}
}

// removable is for Windows's tests under Wine: t.TempDir removes its own
// here.
func removable(testing.TB, string) {}

// checkShared checks that a lock directory made by a ticket is open to
// every user to queue in: mode 1777.
func checkShared(t *testing.T, dir string) {
	t.Helper()
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("%s mode = %v, want 1777 so every user can queue", dir, fi.Mode())
	}
}
