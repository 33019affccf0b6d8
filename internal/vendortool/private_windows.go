//go:build windows

package vendortool

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// ChangeableBy says who, other than this user, SYSTEM, the Administrators
// and TrustedInstaller, could change what p holds or put another file in
// its place ("" when no one): the owner of p or of a directory above it,
// a missing ACL, or an allow entry giving every user (Everyone,
// Authenticated Users, Users, INTERACTIVE) a right that writes p or its
// directory, or moves a directory above away. It is the rule of a vendor's
// tool (othersWrite), said in words for a directory or file the gate
// writes or reads a secret from (internal/config on Windows). A path
// that cannot be read is said so.
func ChangeableBy(p string) string {
	me, err := currentSID()
	if err != nil {
		return fmt.Sprintf("cannot tell this user's SID: %v", err)
	}
	for q, last := p, true; ; q, last = filepath.Dir(q), false {
		s, err := readSecurity(q)
		if err != nil {
			return fmt.Sprintf("%s: cannot read its owner and ACL: %v", q, err)
		}
		if why := s.changeable(me, last || q == filepath.Dir(p)); why != "" {
			return q + ": " + why
		}
		if q == filepath.Dir(q) {
			return ""
		}
	}
}

// ReadableByEveryUser says which group of every user may read the file p
// ("" when none): an allow entry giving Everyone, Authenticated Users,
// Users or INTERACTIVE read access, or no ACL at all.
func ReadableByEveryUser(p string) string {
	s, err := readSecurity(p)
	if err != nil {
		return fmt.Sprintf("cannot read its ACL: %v", err)
	}
	return s.readable()
}

func currentSID() (string, error) {
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return "", err
	}
	return tu.User.Sid.String(), nil
}
