//go:build windows

package config

import (
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// exposed says why the token file file is not this user's alone, or "",
// as ssh refuses a key others may read: on Windows its owner must be this
// user (or SYSTEM, Administrators, TrustedInstaller), and its ACL must let
// no other account read or write it, or give itself that.
func exposed(file string, _ os.FileInfo) string {
	s, err := readSecurity(file)
	if err != nil {
		return err.Error()
	}
	me, err := thisUser()
	if err != nil {
		return err.Error()
	}
	mine := func(sid *windows.SID) bool { return sid.Equals(me) }
	if !mine(s.owner) && !systemAccount(s.owner) {
		return fmt.Sprintf("owned by %s, not this user (%s): its owner may read it; take it (takeown /f %s)", account(s.owner), account(me), file)
	}
	if who := s.others(rightsRead|rightsWrite, mine); who != "" {
		return fmt.Sprintf("its ACL lets %s read or write it; give this user alone access (icacls %s /inheritance:r /grant:r %%USERNAME%%:F)", who, file)
	}
	return ""
}
