//go:build windows

package config

import (
	"fmt"
	"path/filepath"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/vendortool"
)

// CheckPrivateDir says why another user could change what is written in
// dir, or nil. On Windows every directory from dir up to its volume's
// root, along the path as given and along the one it leads to, must be
// owned by this user, SYSTEM, the Administrators or TrustedInstaller, and
// no allow entry of its ACL may give every user (Everyone, Authenticated
// Users, Users, INTERACTIVE) the right to add or delete a file in dir, or
// to move, delete or re-ACL a directory above it (making a directory in
// C:\, which every user may, is no such right, as /tmp's sticky bit is
// not on Linux). The rule is vendortool.ChangeableBy's. A UNC path is
// refused: its ACL is the server's to change.
func CheckPrivateDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if v := filepath.VolumeName(abs); len(v) >= 2 && v[1] != ':' {
		return fmt.Errorf("%s is on %s, not a local disk: its ACL is another machine's to change; pass a directory on a local drive", abs, v)
	}
	paths := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		paths = append(paths, real)
	}
	for _, path := range paths {
		if why := vendortool.ChangeableBy(path); why != "" {
			return fmt.Errorf("%s, so another user could put a link where the gate writes", why)
		}
	}
	return nil
}
