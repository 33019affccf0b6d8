//go:build windows

package vendortool

import (
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/windows"
)

// othersWrite reports whether a user other than this one, SYSTEM, the
// Administrators and TrustedInstaller may write p (a file's path, its
// links resolved) or put another file in its place, or p or a directory
// above it cannot be looked at. It reads each one's owner and ACL
// (securityInfo.othersMayWrite says what counts); deny entries are not
// subtracted, so an entry that gives every user a right counts even where
// another takes it back.
func othersWrite(p string) bool {
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return true
	}
	me := tu.User.Sid.String()
	for q, last := p, true; ; q, last = filepath.Dir(q), false {
		s, err := readSecurity(q)
		if err != nil || s.othersMayWrite(me, last || q == filepath.Dir(p)) {
			return true
		}
		if q == filepath.Dir(q) {
			return false
		}
	}
}

// readSecurity reads the owner and ACL of the file or directory at p.
func readSecurity(p string) (securityInfo, error) {
	sd, err := windows.GetNamedSecurityInfo(p, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return securityInfo{}, err
	}
	owner, _, err := sd.Owner()
	if err != nil || owner == nil {
		return securityInfo{}, err
	}
	s := securityInfo{owner: owner.String()}
	dacl, _, err := sd.DACL()
	if err != nil || dacl == nil {
		s.noDACL = true
		return s, nil
	}
	for i := range uint32(dacl.AceCount) {
		var ace *windows.ACCESS_ALLOWED_ACE
		if windows.GetAce(dacl, i, &ace) != nil || ace.Header.AceType != windows.ACCESS_ALLOWED_ACE_TYPE || ace.Header.AceFlags&windows.INHERIT_ONLY_ACE != 0 {
			continue
		}
		sid := (*windows.SID)(unsafe.Pointer(&ace.SidStart))
		s.allow = append(s.allow, allowEntry{sid: sid.String(), mask: uint32(ace.Mask)})
	}
	return s, nil
}
