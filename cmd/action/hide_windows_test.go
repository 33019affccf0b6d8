package main

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/windows"
)

// TestHideTokenCommands: the commands that hold the token (run, record,
// publish, report) put a DACL on their process from their start that lets
// no process of this user (the owner included) read its memory, where its
// environment is, or change the DACL back; it can still be told apart,
// waited for and ended. judge, demo and the simulated serve stay readable.
func TestHideTokenCommands(t *testing.T) {
	t.Cleanup(makeDumpable)
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"run"}, false}, {[]string{"record", "--serve", "x"}, false}, {[]string{"publish", "out"}, false}, {[]string{"report", "runs/a"}, false},
		{[]string{"judge", "out"}, true}, {[]string{"fakellm"}, true}, {[]string{"demo"}, true}, {nil, true},
	} {
		makeDumpable()
		if err := hideTokenCommand(tt.args); err != nil {
			t.Errorf("hideTokenCommand(%q) = %v", tt.args, err)
		}
		if d, err := dumpable(); err != nil || d != tt.want {
			t.Errorf("after hideTokenCommand(%q), memory readable = %v, %v; want %v", tt.args, d, err, tt.want)
		}
		if tt.want {
			continue
		}
		for _, right := range []uint32{windows.PROCESS_DUP_HANDLE, windows.PROCESS_SUSPEND_RESUME, windows.PROCESS_VM_WRITE, windows.PROCESS_CREATE_THREAD} {
			if h, err := windows.OpenProcess(right, false, uint32(os.Getpid())); err == nil {
				windows.CloseHandle(h)
				t.Errorf("after hideTokenCommand(%q), right %#x is given", tt.args, right)
			}
		}
		// The owner's implicit WRITE_DAC is what the OWNER RIGHTS entry
		// takes away on Windows; Wine 8 gives it to the owner whatever the
		// DACL says.
		if h, err := windows.OpenProcess(windows.WRITE_DAC, false, uint32(os.Getpid())); err == nil {
			windows.CloseHandle(h)
			t.Logf("after hideTokenCommand(%q), WRITE_DAC is given to the owner (Wine 8 does; Windows, with OWNER RIGHTS, does not)", tt.args)
		}
		h, err := windows.OpenProcess(hiddenRights, false, uint32(os.Getpid()))
		if err != nil {
			t.Errorf("after hideTokenCommand(%q), rights %#x refused: %v", tt.args, hiddenRights, err)
			continue
		}
		windows.CloseHandle(h)
	}
}

// dumpable says whether a process of this user can open this one to read
// its memory (PROCESS_VM_READ): false when refused.
func dumpable() (bool, error) {
	h, err := windows.OpenProcess(windows.PROCESS_VM_READ, false, uint32(os.Getpid()))
	if errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	windows.CloseHandle(h)
	return true, nil
}

// makeDumpable gives this user every right on this process again.
func makeDumpable() { setProcessDACL(windows.PROCESS_ALL_ACCESS) }
