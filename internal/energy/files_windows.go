//go:build windows

package energy

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"golang.org/x/sys/windows"
)

// osKinds are the sources auto tries where the preset names none: NVIDIA's
// through nvidia-smi, and the platform's Energy Meter Interface. hwmon,
// RAPL's powercap and npu-smi are Linux's.
var osKinds = []string{"nvml", "emi"}

// withOSKinds is the order auto tries: the preset's (named for Linux:
// hwmon, rapl), then what Windows has that it does not name.
func withOSKinds(order []string) []string {
	out := slices.Clone(order)
	for _, k := range osKinds {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// localAbs reports whether a sensor file's path is absolute on a local
// drive (C:\...): a UNC path's file is another machine's to write.
func localAbs(path string) bool {
	v := filepath.VolumeName(path)
	return filepath.IsAbs(path) && len(v) == 2 && v[1] == ':'
}

// absHint is what an absolute path looks like here.
const absHint = ` on a local drive (C:\...), not a UNC path`

// readNumberOf is readNumber refusing, where serve is not 0, a file the
// serve's account owns: on Windows the serve runs as the gate's own
// account, so a file that account owns (one it made in the sensor's place)
// is refused. The file must be a file on a disk: a pipe or a device is
// refused, never read or waited on.
func readNumberOf(path string, serve uint32) (float64, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", path, err)
	}
	h, err := windows.CreateFile(p, windows.GENERIC_READ, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return 0, readErr(path, err)
	}
	defer windows.CloseHandle(h)
	var fi windows.ByHandleFileInformation
	if t, _ := windows.GetFileType(h); t != windows.FILE_TYPE_DISK || windows.GetFileInformationByHandle(h, &fi) != nil || fi.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY != 0 {
		return 0, fmt.Errorf("%s is not a regular file", path)
	}
	if serve != 0 {
		if who, err := ownedByUs(h); err != nil {
			return 0, fmt.Errorf("%s: its owner cannot be read: %v", path, err)
		} else if who != "" {
			return 0, fmt.Errorf("%s belongs to %s, the serve's account (the gate's own), which could set it", path, who)
		}
	}
	buf := make([]byte, maxFile+1)
	var n uint32
	if err := windows.ReadFile(h, buf, &n, nil); err != nil && !errors.Is(err, windows.ERROR_HANDLE_EOF) {
		return 0, readErr(path, err)
	}
	return number(path, buf, int(n))
}

// whoAmI names this process's account in a reason.
func whoAmI() string {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return "this account"
	}
	if acct, dom, _, err := u.User.Sid.LookupAccount(""); err == nil {
		return dom + `\` + acct
	}
	return u.User.Sid.String()
}

// ownedByUs is this process's account's name when it owns the open file,
// "" when another does.
func ownedByUs(h windows.Handle) (string, error) {
	sd, err := windows.GetSecurityInfo(h, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION)
	if err != nil {
		return "", err
	}
	owner, _, err := sd.Owner()
	if err != nil {
		return "", err
	}
	me, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return "", err
	}
	if !owner.Equals(me.User.Sid) {
		return "", nil
	}
	if acct, dom, _, err := owner.LookupAccount(""); err == nil {
		return dom + `\` + acct, nil
	}
	return owner.String(), nil
}
