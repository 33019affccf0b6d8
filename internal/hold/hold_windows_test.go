//go:build windows

package hold

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// witness takes the locked byte of a device's witness file, which only a
// holder of the device takes, without waiting: a holder finds it taken
// only while another holds the device too. Windows does not say who holds
// a lock, so a holder the test killed (HOLD_KILLED) is waited for a while,
// its lock going "not necessarily at once".
func witness(path, killed string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := lockByte(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY)
		if err == nil {
			return f, nil
		}
		if b, _ := os.ReadFile(killed); len(b) == 0 || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%s is held by another holder while this one (pid %d) holds the device: %v", path, os.Getpid(), err)
		}
		time.Sleep(retryEvery)
	}
}

// The second of two contenders for one ticket waits while the first holds
// it, and is granted when the first releases.
func TestTwoContendersWindows(t *testing.T) {
	e := newEnv(t)
	first, err := e.device().Acquire(context.Background())
	if err != nil {
		t.Fatalf("Acquire() = %v", err)
	}
	b, _ := e.start(t, "b", "HOLD_FOR=0s")
	eventually(t, "b waits", func() bool {
		st, _ := e.device().Status()
		return st != nil && len(st.Queue) == 1 && st.Queue[0].Command == "contender b"
	})
	st, err := e.device().Status()
	if err != nil || !st.Held || st.Holder == nil || st.Holder.PID != os.Getpid() || st.Holder.Ticket != 1 || st.Queue[0].Ticket != 2 {
		t.Fatalf("Status() = %+v, %v; want this process holding ticket 1 and b waiting with ticket 2", st, err)
	}
	if e.recorded("b", "start") {
		t.Fatal("b held the device while this process held it")
	}
	if err := first.Held(); err != nil {
		t.Errorf("Held() while held = %v, want nil", err)
	}
	released := time.Now()
	if err := first.Release(); err != nil {
		t.Fatalf("Release() = %v", err)
	}
	if err := b.Wait(); err != nil {
		t.Fatalf("b after the release: %v", err)
	}
	evs := events(t, e.record)
	if len(evs) != 2 || evs[0].id != "b" || evs[0].what != "start" || evs[0].at < released.UnixNano() {
		t.Errorf("events = %v, want b's start after the release at %d, then its end", evs, released.UnixNano())
	}
	if st, _ := e.device().Status(); st == nil || st.Held || len(st.Queue) != 0 {
		t.Errorf("Status() after all = %+v, want free", st)
	}
}

// A holder killed (TerminateProcess) frees its ticket: the kernel drops
// its lock, and the waiter is granted.
func TestHolderKilledWindows(t *testing.T) {
	e := newEnv(t)
	a, out := e.start(t, "a", "HOLD_FOR=10m")
	eventually(t, "a holds", func() bool { return e.recorded("a", "start") })
	b, _ := e.start(t, "b", "HOLD_FOR=0s")
	eventually(t, "b waits", func() bool {
		st, _ := e.device().Status()
		return st != nil && len(st.Queue) == 1 && st.Queue[0].Command == "contender b"
	})
	if e.recorded("b", "start") {
		t.Fatal("b held the device while a held it")
	}
	dir, err := openLockDir(e.dir, false)
	if err != nil {
		t.Fatal(err)
	}
	held, _, err := dir.open(entryName("npu", holding, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	killed := time.Now()
	if err := a.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a.Wait()
	exited := time.Since(killed)
	for isLive(held) {
		time.Sleep(time.Millisecond)
	}
	t.Logf("a's lock went %v after its kill; its exit was seen %v after it", time.Since(killed), exited)
	if err := b.Wait(); err != nil {
		line, _ := out.ReadString('\n')
		t.Fatalf("b after a was killed: %v (%s)", err, strings.TrimSpace(line))
	}
	var granted int64
	for _, ev := range events(t, e.record) {
		if ev.id == "b" && ev.what == "start" {
			granted = ev.at
		}
	}
	if granted == 0 {
		t.Fatalf("b never held the device after its holder was killed:\n%s", readFile(e.record))
	}
	t.Logf("the ticket went to the waiter %v after its holder was killed", time.Duration(granted-killed.UnixNano()))
	if st, _ := e.device().Status(); st == nil || st.Held || len(st.Queue) != 0 {
		t.Errorf("Status() after all = %+v, want free", st)
	}
}

// The holder's handle is never inherited, and its facts stay readable to
// others while its byte is locked.
func TestTicketHandleWindows(t *testing.T) {
	e := newEnv(t)
	tk, err := e.device().Acquire(context.Background())
	if err != nil {
		t.Fatalf("Acquire() = %v", err)
	}
	defer tk.Release()
	var flags uint32
	getInfo := windows.NewLazySystemDLL("kernel32.dll").NewProc("GetHandleInformation")
	if ok, _, err := getInfo.Call(tk.Files()[0].Fd(), uintptr(unsafe.Pointer(&flags))); ok == 0 || flags&windows.HANDLE_FLAG_INHERIT != 0 {
		t.Errorf("the ticket's handle flags = %#x (%v), want not inheritable", flags, err)
	}
	dir, err := openLockDir(e.dir, false)
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := dir.open(tk.name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !isLive(f) {
		t.Error("isLive(the held ticket) = false, want true")
	}
	if got := string(read(f)); !strings.Contains(got, `"pid":`) {
		t.Errorf("the held ticket reads %q, want its facts", got)
	}
	if err := lockByte(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY); !errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		t.Errorf("a second lock of the held ticket = %v, want ERROR_LOCK_VIOLATION", err)
	}
}

// removable empties a test's directory with os.Remove before t.TempDir's
// own cleanup, whose os.RemoveAll Wine refuses ("Invalid function") for
// every file. A contender killed at the test's end may still have its
// ticket open for a moment: what it kept is removed again until it goes.
func removable(t testing.TB, dir string) {
	t.Cleanup(func() {
		top := filepath.Dir(dir)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(retryEvery) {
			var paths []string
			filepath.WalkDir(top, func(p string, _ fs.DirEntry, err error) error {
				paths = append(paths, p)
				return nil
			})
			for _, p := range slices.Backward(paths) {
				os.Remove(p)
			}
			if _, err := os.Lstat(top); errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
				return
			}
		}
	})
}

// checkShared checks that a lock directory made by a ticket is one every
// run may trust: its owner and ACL pass openLockDir's check.
func checkShared(t *testing.T, dir string) {
	t.Helper()
	if _, err := openLockDir(dir, false); err != nil {
		t.Errorf("openLockDir(%s) = %v, want it accepted", dir, err)
	}
}

// The doctor on Windows, on the machine it runs on (under Wine: no NPU,
// and whatever display adapter Wine makes up), ends with the lock
// directory, missing and then shared.
func TestDoctorWindows(t *testing.T) {
	e := newEnv(t)
	missing := Doctor("", e.dir, 0)
	last := missing[len(missing)-1]
	if last.Level != "FAIL" || !strings.Contains(last.What, "does not exist") || !hasCheck(missing, "ok", "memlock limit: none on Windows") {
		t.Errorf("Doctor(no lock directory) = %q, want the directory missing last", missing)
	}
	if err := e.device().CheckDir(); err != nil {
		t.Fatal(err)
	}
	got := Doctor("", e.dir, 0)
	if last := got[len(got)-1]; last != (Check{"ok", "lock directory " + e.dir + " is shared: owned by this user, SYSTEM or the Administrators, and its ACL lets no one else delete in it"}) {
		t.Errorf("Doctor(a lock directory made by CheckDir) = %q", got)
	}
	for _, c := range got {
		t.Logf("%-5s %s", c.Level, c.What)
	}
}
