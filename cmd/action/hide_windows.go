//go:build windows

package main

import (
	"fmt"

	"golang.org/x/sys/windows"
)

// hideHow says how hideProcess hides this process.
const hideHow = "SetSecurityInfo: a process DACL without memory access"

// hiddenRights are what this user's processes (and the process's owner:
// OWNER RIGHTS, which would otherwise keep the right to rewrite the DACL)
// may still do to a hidden process: tell that it runs and what it runs
// (PROCESS_QUERY_LIMITED_INFORMATION), wait for it (SYNCHRONIZE) and end it
// (PROCESS_TERMINATE, as the runner's cancel does). Not read or write its
// memory (its environment is there), duplicate its handles, suspend it,
// start threads in it or change its DACL back. SYSTEM keeps every right;
// an administrator's SeDebugPrivilege passes any DACL, as root passes a
// non-dumpable process on Linux.
const hiddenRights = windows.PROCESS_QUERY_LIMITED_INFORMATION | windows.SYNCHRONIZE | windows.PROCESS_TERMINATE

// hideProcess puts a protected DACL on this process that gives this user
// only hiddenRights, and its owner only READ_CONTROL.
func hideProcess() error {
	return setProcessDACL(hiddenRights)
}

// setProcessDACL gives this process the DACL: SYSTEM all, this user
// rights, the owner READ_CONTROL. Through the pseudo-handle, which has
// every right whatever the DACL says.
func setProcessDACL(rights uint32) error {
	user, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return err
	}
	sddl := fmt.Sprintf("D:P(A;;GA;;;SY)(A;;%#x;;;%s)(A;;RC;;;OW)", rights, user.User.Sid)
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return err
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return err
	}
	return windows.SetSecurityInfo(windows.CurrentProcess(), windows.SE_KERNEL_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
}
