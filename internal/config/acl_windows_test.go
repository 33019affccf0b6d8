package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/windows"
)

// setDACL gives path the protected DACL of sddl's entries, %s standing for
// this user's SID.
func setDACL(t *testing.T, path, entries string) {
	t.Helper()
	me, err := thisUser()
	if err != nil {
		t.Fatal(err)
	}
	sd, err := windows.SecurityDescriptorFromString("D:P" + strings.ReplaceAll(entries, "%s", me.String()))
	if err != nil {
		t.Fatal(err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		t.Fatal(err)
	}
	if err := windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil); err != nil {
		t.Fatal(err)
	}
}

// privateTemp is a directory of this user's alone, removed file by file at
// the end (os.RemoveAll fails under Wine 8).
func privateTemp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "config")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filepath.WalkDir(dir, func(string, os.DirEntry, error) error { return nil })
		var paths []string
		filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error { paths = append(paths, p); return nil })
		for i := len(paths) - 1; i >= 0; i-- {
			os.Remove(paths[i])
		}
	})
	setDACL(t, dir, "(A;OICI;FA;;;%s)(A;OICI;FA;;;SY)")
	return dir
}

// TestCheckPrivateDirACL: an out directory whose ACL lets Everyone write
// in it is refused, naming Everyone; one inside a directory that lets
// Everyone replace what it holds too; one of this user's alone, under
// directories of this user's or the system's, is not.
func TestCheckPrivateDirACL(t *testing.T) {
	dir := privateTemp(t)
	mine := filepath.Join(dir, "mine")
	open := filepath.Join(dir, "open")
	for _, d := range []string{mine, open} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	setDACL(t, open, "(A;OICI;FA;;;%s)(A;OICI;FA;;;WD)")
	under := filepath.Join(open, "out")
	if err := os.Mkdir(under, 0o700); err != nil {
		t.Fatal(err)
	}
	setDACL(t, under, "(A;OICI;FA;;;%s)")
	// The directories above the test's own temporary one are the
	// machine's: judged here only by what they say of dir.
	if err := CheckPrivateDir(mine); err != nil && !strings.Contains(err.Error(), filepath.Dir(dir)) {
		t.Errorf("CheckPrivateDir(a directory of this user's alone) = %v", err)
	}
	if err := CheckPrivateDir(open); err == nil || !strings.Contains(err.Error(), open+" may be written by ") || !strings.Contains(err.Error(), "S-1-1-0") {
		t.Errorf("CheckPrivateDir(a directory Everyone may write) = %v; want it refused, naming Everyone", err)
	}
	// Wine 8 keeps what the parent gave (Everyone's entry) over the DACL
	// set on the child: the child is then refused for itself.
	if err := CheckPrivateDir(under); err == nil || !strings.Contains(err.Error(), "S-1-1-0") || !strings.Contains(err.Error(), open+" lets ") && !strings.Contains(err.Error(), under+" may be written by ") {
		t.Errorf("CheckPrivateDir(a directory in one Everyone may change) = %v; want it refused, naming the parent and Everyone", err)
	}
}

// TestTokenFileACL: a token file whose ACL lets another account read it is
// exposed; one this user's alone is not.
func TestTokenFileACL(t *testing.T) {
	dir := privateTemp(t)
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("ghs_x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	setDACL(t, file, "(A;;FA;;;%s)(A;;FR;;;BU)")
	if why := exposed(file, nil); !strings.Contains(why, "read or write it") || !strings.Contains(why, "S-1-5-32-545") && !strings.Contains(why, "S-1-1-0") {
		t.Errorf("exposed(a token file Users may read) = %q; want it named", why)
	}
	setDACL(t, file, "(A;;FA;;;%s)")
	s, err := readSecurity(file)
	if err != nil {
		t.Fatal(err)
	}
	if who := s.others(rightsRead, nil); strings.Contains(who, "S-1-1-0") {
		// Wine 8 reports Everyone's read on every file whatever DACL was
		// set: the half that needs a private file is Windows' alone.
		t.Logf("a DACL of this user's alone, read back: %s may read it (Wine); not judged", who)
		return
	}
	if why := exposed(file, nil); why != "" {
		t.Errorf("exposed(a token file of this user's alone) = %q", why)
	}
}
