//go:build windows

package hold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"
)

// A lock directory must be on a local disk: a UNC path, a device path and
// a drive mapped to a share are refused as bad input, naming the input.
func TestCheckDirPathLocal(t *testing.T) {
	saved := driveType
	defer func() { driveType = saved }()
	driveType = func(root string) uint32 {
		if strings.EqualFold(root, `Z:\`) {
			return windows.DRIVE_REMOTE
		}
		return windows.DRIVE_FIXED
	}
	for _, c := range []struct {
		path, err string
	}{
		{`C:\ProgramData\npu-hold`, ""},
		{`\\?\C:\ProgramData\npu-hold`, ""},
		{`\\.\C:\locks`, ""},
		{`Z:\locks`, `--lock-dir "Z:\\locks" is on Z:, a drive mapped to a network share`},
		{`z:\locks`, `a drive mapped to a network share`},
		{`\\?\Z:\locks`, `a drive mapped to a network share`},
		{`\\server\share\npu-hold`, `--lock-dir "\\\\server\\share\\npu-hold" is not on a local disk (a UNC path, \\server\share)`},
		{`//server/share/npu-hold`, "not on a local disk"},
		{`\\?\UNC\server\share\npu-hold`, "not on a local disk"},
		{`\\.\pipe\npu-hold`, "not on a local disk"},
		{`locks`, "a relative lock directory"},
	} {
		err := CheckDirPath("--lock-dir", c.path)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("CheckDirPath(%s) = %v, want it accepted", c.path, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("CheckDirPath(%s) = %v, want %q", c.path, err, c.err)
		}
	}
	if _, err := openLockDir(`\\server\share\npu-hold`, true); err == nil || !strings.Contains(err.Error(), "not on a local disk") {
		t.Errorf("openLockDir(UNC) = %v, want it refused before anything is made", err)
	}
}

// The lock directory's owner and ACL are judged as Windows gives them
// (Wine keeps no ACL but one made of the Unix mode, and knows one user:
// these are Windows's own descriptors, in SDDL): another user's directory,
// and an entry that lets another user delete, re-ACL or re-own what is in
// it, are refused, naming whom and the fix; CREATOR OWNER, SYSTEM, the
// Administrators and this user may.
func TestLockDirACL(t *testing.T) {
	me, _ := windows.StringToSid("S-1-5-21-1-2-3-1001")
	d := &lockDir{path: `C:\ProgramData\npu-hold`}
	for _, c := range []struct {
		sddl, err string
	}{
		// What mkdir under %ProgramData% gives an administrator.
		{"O:BAD:(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICIIO;GA;;;CO)(A;OICI;0x1200a9;;;BU)(A;CI;0x100116;;;BU)", ""},
		{"O:S-1-5-21-1-2-3-1001D:(A;OICI;FA;;;S-1-5-21-1-2-3-1001)(A;OICI;0x1200a9;;;WD)", ""},
		{"O:SYD:(A;OICI;FA;;;SY)", ""},
		{"O:S-1-5-21-1-2-3-1002D:(A;OICI;FA;;;SY)", "belongs to S-1-5-21-1-2-3-1002, who could remove or replace anyone's ticket in it"},
		{"O:BAD:(A;OICI;0x1200a9;;;WD)(A;OICI;0x10000;;;BU)", `S-1-5-32-545) delete or re-ACL what is in it (access mask 0x10000)`},
		{"O:BAD:(A;OICI;0x40;;;WD)", "(access mask 0x40)"},
		{"O:BAD:(A;OICI;0x40000;;;AU)", "(access mask 0x40000)"},
		{"O:BAD:(A;OICI;0x80000;;;AU)", "(access mask 0x80000)"},
		{"O:BAD:(A;OICI;GA;;;AU)", "(access mask 0x10000000)"},
		{"O:BAD:(D;OICI;FA;;;WD)(A;OICI;0x1200a9;;;WD)", ""},
		{"O:BAD:", ""},
	} {
		sd, err := windows.SecurityDescriptorFromString(c.sddl)
		if err != nil {
			t.Fatalf("%s: %v", c.sddl, err)
		}
		err = d.checkSD(sd, me)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("check(%s) = %v, want it accepted", c.sddl, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("check(%s) = %v, want %q", c.sddl, err, c.err)
		}
	}
	// A NULL DACL, everyone's to do anything in (Wine's SDDL makes
	// NO_ACCESS_CONTROL an empty one, so it is made by hand).
	sd, err := windows.NewSecurityDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	admins, _ := windows.CreateWellKnownSid(windows.WinBuiltinAdministratorsSid)
	if err := sd.SetOwner(admins, false); err != nil {
		t.Fatal(err)
	}
	if err := sd.SetDACL(nil, true, false); err != nil {
		t.Fatal(err)
	}
	if err := d.checkSD(sd, me); err == nil || !strings.Contains(err.Error(), "has no ACL (everyone may do anything in it)") {
		t.Errorf("check(a NULL DACL) = %v, want it refused", err)
	}
}

// allowEveryone gives Everyone mask on dir, inherited by what is made in
// it; the test is skipped where the ACL is not kept.
func allowEveryone(t *testing.T, dir string, mask windows.ACCESS_MASK) {
	t.Helper()
	everyone, err := windows.CreateWellKnownSid(windows.WinWorldSid)
	if err != nil {
		t.Fatal(err)
	}
	sd, err := windows.GetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		t.Fatal(err)
	}
	old, _, _ := sd.DACL()
	acl, err := windows.ACLFromEntries([]windows.EXPLICIT_ACCESS{{
		AccessPermissions: mask,
		AccessMode:        windows.GRANT_ACCESS,
		Inheritance:       windows.SUB_CONTAINERS_AND_OBJECTS_INHERIT,
		Trustee:           windows.TRUSTEE{TrusteeForm: windows.TRUSTEE_IS_SID, TrusteeType: windows.TRUSTEE_IS_WELL_KNOWN_GROUP, TrusteeValue: windows.TrusteeValueFromSID(everyone)},
	}}, old)
	if err != nil {
		t.Fatal(err)
	}
	if err := windows.SetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION, nil, nil, acl, nil); err != nil {
		t.Fatal(err)
	}
	if sd, err = windows.GetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION); err != nil {
		t.Fatal(err)
	}
	dacl, _, err := sd.DACL()
	if err != nil || dacl == nil {
		t.Fatalf("the directory's ACL once set: %v", err)
	}
	for i := range uint32(dacl.AceCount) {
		var ace *windows.ACCESS_ALLOWED_ACE
		if windows.GetAce(dacl, i, &ace) == nil && (*windows.SID)(unsafe.Pointer(&ace.SidStart)).Equals(everyone) && ace.Mask&mask == mask {
			return
		}
	}
	t.Skipf("the ACL set is not kept here (it reads %s): Wine keeps none but one made of the Unix mode; TestLockDirACL judges Windows's own", sd)
}

// A lock directory whose ACL lets another user delete in it is refused by
// CheckDir (the gate's check before anything starts: exit 2), by status
// and by the doctor.
func TestLockDirReplaceableByOthers(t *testing.T) {
	e := newEnv(t)
	if err := e.device().CheckDir(); err != nil {
		t.Fatalf("CheckDir(a directory of this user) = %v", err)
	}
	allowEveryone(t, e.dir, windows.FILE_GENERIC_READ|windows.DELETE)
	err := e.device().CheckDir()
	if err == nil || !strings.Contains(err.Error(), "delete or re-ACL what is in it") || !strings.Contains(err.Error(), "/remove S-1-1-0") {
		t.Errorf("CheckDir(a directory Everyone may delete in) = %v, want it refused naming Everyone and the fix", err)
	}
	if _, err := e.device().Status(); err == nil {
		t.Errorf("Status() of that directory = nil error, want it refused")
	}
}

// The pools file is %ProgramData%\npu-hold\pools unless said otherwise, and
// one of this user's is read (one of another user's, who could have
// declared anyone's pools, is refused: Wine has one user, so that is
// judged by trusted, as the lock directory's owner is in TestLockDirACL).
func TestPoolsFileWindows(t *testing.T) {
	if want := filepath.Join(DefaultDir(), "pools"); DefaultPools != want || !strings.HasSuffix(DefaultPools, `\npu-hold\pools`) {
		t.Errorf("DefaultPools = %q, want %q", DefaultPools, want)
	}
	path := filepath.Join(tempDir(t), "pools")
	if err := os.WriteFile(path, []byte("npu env=ASCEND_RT_VISIBLE_DEVICES npu0=0 npu1=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err := LoadPools(path)
	if err != nil {
		t.Fatalf("LoadPools(a file of this user's) = %v", err)
	}
	if p, err := ps.Resolve("npu", 2, "--count"); err != nil || p == nil || len(p.Members) != 2 {
		t.Errorf("Resolve(npu, 2) = %v, %v", p, err)
	}
	os.Remove(path)
}
