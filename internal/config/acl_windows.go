//go:build windows

package config

import (
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Windows has no mode bits: what Linux reads in a file's owner and mode,
// Windows keeps in its security descriptor, an owner and a DACL. The
// checks below read both (GetNamedSecurityInfo, the path followed) and
// judge the allow entries that apply to the object itself; a deny entry
// is not counted, so a right an entry allows and another denies counts as
// given.

// Rights of a file or directory, as the checks group them.
const (
	// rightsWrite write a file, or make, remove and replace what a
	// directory holds, or give themselves any of it (the DACL, the owner).
	rightsWrite = windows.FILE_WRITE_DATA | windows.FILE_APPEND_DATA | fileDeleteChild | windows.DELETE |
		windows.WRITE_DAC | windows.WRITE_OWNER | windows.GENERIC_WRITE | windows.GENERIC_ALL
	// rightsReplace remove or replace what a directory holds, or the
	// directory itself, or give themselves that: a directory on the way
	// to another, whose other rights (making new entries: C:\ gives every
	// user that) replace nothing, as the sticky bit allows on Linux.
	rightsReplace = fileDeleteChild | windows.DELETE | windows.WRITE_DAC | windows.WRITE_OWNER | windows.GENERIC_ALL
	// rightsRead read a file, or give themselves that.
	rightsRead = windows.FILE_READ_DATA | windows.GENERIC_READ | windows.GENERIC_ALL | windows.WRITE_DAC | windows.WRITE_OWNER
	// fileDeleteChild: FILE_DELETE_CHILD, a directory's right to remove
	// any entry in it.
	fileDeleteChild = 0x40
)

// Well-known accounts that own and may write system files: no ordinary
// user, and a serve of one never runs as them.
const (
	sidSystem           = "S-1-5-18"
	sidAdministrators   = "S-1-5-32-544"
	sidTrustedInstaller = "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464"
	sidCreatorOwner     = "S-1-3-0" // stands for the creator in inherited entries alone
	sidOwnerRights      = "S-1-3-4" // stands for the owner
)

// systemAccount tells whether sid is SYSTEM, Administrators or
// TrustedInstaller.
func systemAccount(sid *windows.SID) bool {
	switch sid.String() {
	case sidSystem, sidAdministrators, sidTrustedInstaller:
		return true
	}
	return false
}

// security is a file's owner and the allow entries of its DACL that apply
// to it.
type security struct {
	owner  *windows.SID
	grants []grant
}

type grant struct {
	sid  *windows.SID
	mask uint32
}

// everyone is the SID of Everyone, to whom a NULL DACL gives every right.
var everyone, _ = windows.StringToSid("S-1-1-0")

// readSecurity reads path's owner and DACL.
func readSecurity(path string) (security, error) {
	sd, err := windows.GetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return security{}, fmt.Errorf("%s: its owner and ACL cannot be read: %v", path, err)
	}
	owner, _, err := sd.Owner()
	if err != nil || owner == nil {
		return security{}, fmt.Errorf("%s: cannot tell its owner", path)
	}
	s := security{}
	if s.owner, err = owner.Copy(); err != nil {
		return security{}, err
	}
	dacl, _, err := sd.DACL()
	if err != nil || dacl == nil {
		// No DACL: every right to everyone.
		s.grants = []grant{{everyone, windows.GENERIC_ALL}}
		return s, nil
	}
	for i := range uint32(dacl.AceCount) {
		var ace *windows.ACCESS_ALLOWED_ACE
		if windows.GetAce(dacl, i, &ace) != nil {
			return security{}, fmt.Errorf("%s: its ACL cannot be read", path)
		}
		if ace.Header.AceType != windows.ACCESS_ALLOWED_ACE_TYPE || ace.Header.AceFlags&windows.INHERIT_ONLY_ACE != 0 {
			continue
		}
		sid, err := (*windows.SID)(unsafe.Pointer(&ace.SidStart)).Copy()
		if err != nil {
			return security{}, err
		}
		switch sid.String() {
		case sidCreatorOwner:
			continue
		case sidOwnerRights:
			sid = s.owner
		}
		s.grants = append(s.grants, grant{sid, uint32(ace.Mask)})
	}
	return s, nil
}

// others names the accounts the DACL gives any of mask to, but SYSTEM,
// Administrators, TrustedInstaller and those ok says are fine ("" when
// none).
func (s security) others(mask uint32, ok func(*windows.SID) bool) string {
	var who []string
	for _, g := range s.grants {
		if g.mask&mask != 0 && !systemAccount(g.sid) && (ok == nil || !ok(g.sid)) {
			who = append(who, account(g.sid))
		}
	}
	return strings.Join(who, ", ")
}

// account names sid: DOMAIN\name (SID), or the SID.
func account(sid *windows.SID) string {
	name, domain, _, err := sid.LookupAccount("")
	if err != nil || name == "" {
		return sid.String()
	}
	if domain != "" {
		name = domain + `\` + name
	}
	return name + " (" + sid.String() + ")"
}

// thisUser is the SID of the user this process runs as.
func thisUser() (*windows.SID, error) {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("this process's user cannot be told: %v", err)
	}
	return u.User.Sid.Copy()
}
