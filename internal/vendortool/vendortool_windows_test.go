package vendortool

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/wintest"
	"golang.org/x/sys/windows"
)

// On Windows a tool is found by its name with PATHEXT's extensions, on
// the absolute entries of a PATH separated by ";", and only where no one
// but this user, SYSTEM, the Administrators or TrustedInstaller may
// replace it (its owner and ACL, and the directories' above it).
func TestFindWindows(t *testing.T) {
	root := wintest.TempDir(t)
	dir := filepath.Join(root, "bin")
	os.MkdirAll(dir, 0o755)
	want := filepath.Join(dir, "nvidia-smi.exe")
	if err := os.WriteFile(want, []byte("MZ"), 0o755); err != nil {
		t.Fatal(err)
	}
	me, err := readSecurity(want)
	if err != nil {
		t.Fatalf("readSecurity(%s) = %v", want, err)
	}
	t.Logf("%s: owner %s, %d allow entries", want, me.owner, len(me.allow))
	got, err := Find([]string{"PATH=relative;" + dir}).Look("nvidia-smi")
	if err != nil || !sameFile(got.Path, want) {
		t.Errorf("Look(nvidia-smi) = %+v, %v; want %s", got, err, want)
	}
	// Every user (WD: Everyone) may now add a file to its directory
	// (0x2, FILE_ADD_FILE), which lets one put nvidia-smi.com before it:
	// passed over.
	sd, err := windows.SecurityDescriptorFromString("D:(A;;FA;;;OW)(A;;0x2;;;WD)")
	if err != nil {
		t.Fatal(err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		t.Fatal(err)
	}
	if err := windows.SetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := Find([]string{"PATH=" + dir}).Look("nvidia-smi"); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Look(nvidia-smi) in a directory every user may add a file to = %+v, %v; want not found", got, err)
	}
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
