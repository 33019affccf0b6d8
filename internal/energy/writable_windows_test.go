//go:build windows

package energy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/windows"
)

// fakeAccount is an account of a user and its groups.
type fakeAccount struct {
	sids []*windows.SID
	elev bool
}

func (f *fakeAccount) is(sid *windows.SID) bool {
	for _, s := range f.sids {
		if s.Equals(sid) {
			return true
		}
	}
	return false
}
func (f *fakeAccount) elevated() bool { return f.elev }

func wellKnown(t *testing.T, k windows.WELL_KNOWN_SID_TYPE) *windows.SID {
	s, err := windows.CreateWellKnownSid(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The ACL rules, against owners and ACLs as a test sets them (Wine shows
// other accounts' ACLs of no real file).
func TestWritableBy(t *testing.T) {
	dir := tempDir(t)
	file := filepath.Join(dir, "energy_uj")
	os.WriteFile(file, []byte("1"), 0o644)
	system, admins, users := wellKnown(t, windows.WinLocalSystemSid), wellKnown(t, windows.WinBuiltinAdministratorsSid), wellKnown(t, windows.WinBuiltinUsersSid)
	me, err := windows.StringToSid("S-1-5-21-1-2-3-1001")
	if err != nil {
		t.Fatal(err)
	}
	runner := &fakeAccount{sids: []*windows.SID{me, users}}
	safe := secInfo{owner: system, dacl: []ace{
		{sid: system, mask: windows.GENERIC_ALL, allow: true},
		{sid: admins, mask: windows.GENERIC_ALL, allow: true},
		{sid: users, mask: windows.GENERIC_READ | windows.GENERIC_EXECUTE, allow: true},
		{sid: users, mask: windows.GENERIC_WRITE, allow: true, inheritOnly: true}, // for what is made in it, not it
		{sid: users, mask: windows.GENERIC_ALL, allow: false},                     // a deny
	}}
	at := func(p string, s secInfo) func(string) (secInfo, error) {
		return func(q string) (secInfo, error) {
			if q == p {
				return s, nil
			}
			return safe, nil
		}
	}
	for _, c := range []struct {
		name string
		look func(string) (secInfo, error)
		who  account
		want string
	}{
		{"the kernel's and the administrators'", at("", safe), runner, ""},
		{"elevated", at("", safe), &fakeAccount{elev: true}, "the serve runs elevated, as the gate does"},
		{"the file is the serve's", at(file, secInfo{owner: me}), runner, file + " belongs to "},
		{"its directory is the serve's", at(dir, secInfo{owner: me}), runner, dir + " belongs to "},
		{"the file's data granted to Users", at(file, secInfo{owner: system, dacl: []ace{{sid: users, mask: windows.FILE_APPEND_DATA, allow: true}}}), runner, file + " may be changed by "},
		{"a directory's children granted to Users", at(dir, secInfo{owner: system, dacl: []ace{{sid: users, mask: fileDeleteChild, allow: true}}}), runner, dir + " may be changed by "},
		{"a directory's data (adding files) alone", at(dir, secInfo{owner: system, dacl: []ace{{sid: users, mask: windows.FILE_WRITE_DATA | windows.FILE_APPEND_DATA, allow: true}}}), runner, ""},
		{"granted to another account", at(file, secInfo{owner: system, dacl: []ace{{sid: admins, mask: windows.GENERIC_ALL, allow: true}}}), runner, ""},
		{"no DACL", at(dir, secInfo{owner: system, nullDACL: true}), runner, dir + " has no DACL: anyone may write it: the file in it could be replaced"},
		{"unreadable", func(string) (secInfo, error) { return secInfo{}, errors.New("Access denied") }, runner, "its owner and ACL cannot be read: Access denied"},
	} {
		got := writableBy(file, c.who, c.look)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := writableBy(filepath.Join(dir, "none"), runner, at("", safe)); got == "" {
		t.Error("a file that is not there passed")
	}
}

// This account's own file, read for real: its owner is this account (or
// the account is elevated): the serve could set it.
func TestWritableByServeOwn(t *testing.T) {
	file := filepath.Join(tempDir(t), "energy_uj")
	os.WriteFile(file, []byte("1"), 0o644)
	got := WritableByServe(file)
	t.Logf("WritableByServe(own file) = %q", got)
	if got == "" {
		t.Error("a file this account made passed")
	}
}
