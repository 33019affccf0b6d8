package vendortool

import "testing"

// On Windows a tool or a directory on the way up is another user's to
// write by its owner (who may rewrite its ACL) or an allow entry giving
// every user a right that replaces it: the tool and its directory by any
// write, a directory above only by renaming or deleting what is in it.
func TestOthersMayWriteWindows(t *testing.T) {
	const me, other = "S-1-5-21-1-2-3-1001", "S-1-5-21-1-2-3-1002"
	system32 := securityInfo{owner: sidTrustedInstaller, allow: []allowEntry{
		{sid: sidTrustedInstaller, mask: 0x1f01ff},
		{sid: sidSystem, mask: 0x1301bf},
		{sid: sidAdministrators, mask: 0x1301bf},
		{sid: "S-1-5-32-545", mask: 0x1200a9}, // Users: read and run
		{sid: "S-1-15-2-1", mask: 0x1200a9},   // ALL APPLICATION PACKAGES
	}}
	// C:\ as installed: every authenticated user may make a directory in it.
	driveRoot := securityInfo{owner: sidTrustedInstaller, allow: []allowEntry{
		{sid: sidAdministrators, mask: 0x1f01ff},
		{sid: sidSystem, mask: 0x1f01ff},
		{sid: "S-1-5-32-545", mask: 0x1200a9},
		{sid: "S-1-5-11", mask: fileAppendData},
	}}
	with := func(s securityInfo, e allowEntry) securityInfo {
		s.allow = append(append([]allowEntry(nil), s.allow...), e)
		return s
	}
	for _, tc := range []struct {
		name string
		s    securityInfo
		near bool
		want bool
	}{
		{"System32 as installed", system32, true, false},
		{"C:\\ above the tool", driveRoot, false, false},
		{"C:\\ as the tool's directory", driveRoot, true, true},
		{"owned by this user", securityInfo{owner: me}, true, false},
		{"owned by SYSTEM", securityInfo{owner: sidSystem}, true, false},
		{"owned by the Administrators", securityInfo{owner: sidAdministrators}, true, false},
		{"owned by another user", securityInfo{owner: other}, true, true},
		{"owned by another user, above", securityInfo{owner: other}, false, true},
		{"no ACL", securityInfo{owner: me, noDACL: true}, true, true},
		{"no ACL, above", securityInfo{owner: me, noDACL: true}, false, true},
		{"another named user may write", with(system32, allowEntry{sid: other, mask: genericAll}), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.othersMayWrite(me, tc.near); got != tc.want {
				t.Errorf("othersMayWrite(%+v, near %v) = %v, want %v", tc.s, tc.near, got, tc.want)
			}
		})
	}
	// Each right, given to each group of every user, on the tool or its
	// directory and above.
	rights := map[uint32]bool{ // the right: whether it counts above
		fileWriteData: false, fileAppendData: false, genericWrite: false,
		fileDeleteChild: true, accessDelete: true, writeDAC: true, writeOwner: true, genericAll: true,
	}
	for _, sid := range everyUser {
		for right, above := range rights {
			s := with(system32, allowEntry{sid: sid, mask: right | 0x1200a9})
			if !s.othersMayWrite(me, true) {
				t.Errorf("%s given %#x on the tool: othersMayWrite = false, want true", sid, right)
			}
			if got := s.othersMayWrite(me, false); got != above {
				t.Errorf("%s given %#x above the tool: othersMayWrite = %v, want %v", sid, right, got, above)
			}
		}
	}
	// Reading and running are no one's to fear.
	for _, sid := range everyUser {
		if s := with(system32, allowEntry{sid: sid, mask: 0x1200a9}); s.othersMayWrite(me, true) {
			t.Errorf("%s given read and execute: othersMayWrite = true, want false", sid)
		}
	}
}

// changeable says why another user could change a tool or a directory
// above it, in words: the same judgement as othersMayWrite.
func TestChangeableWindows(t *testing.T) {
	const me, other = "S-1-5-21-1-2-3-1001", "S-1-5-21-1-2-3-1002"
	own := securityInfo{owner: me, allow: []allowEntry{{sid: me, mask: 0x1f01ff}, {sid: sidSystem, mask: 0x1f01ff}}}
	with := func(e allowEntry) securityInfo {
		s := own
		s.allow = append(append([]allowEntry(nil), own.allow...), e)
		return s
	}
	for _, tc := range []struct {
		name   string
		s      securityInfo
		near   bool
		change string
	}{
		{"this user's alone", own, true, ""},
		{"another user's", securityInfo{owner: other}, true, "owned by " + other + ", who may rewrite its ACL"},
		{"no ACL", securityInfo{owner: me, noDACL: true}, false, "has no ACL, which lets every user change it"},
		{"Users may add a file", with(allowEntry{sid: "S-1-5-32-545", mask: fileWriteData}), true, "its ACL lets S-1-5-32-545 change it (access mask 0x2)"},
		{"Users may add a file, above", with(allowEntry{sid: "S-1-5-32-545", mask: fileWriteData}), false, ""},
		{"Everyone may delete, above", with(allowEntry{sid: "S-1-1-0", mask: accessDelete}), false, "its ACL lets S-1-1-0 change it (access mask 0x10000)"},
		{"Authenticated Users may read", with(allowEntry{sid: "S-1-5-11", mask: 0x1}), true, ""},
		{"Everyone GENERIC_READ", with(allowEntry{sid: "S-1-1-0", mask: 0x80000000}), true, ""},
		{"INTERACTIVE GENERIC_ALL", with(allowEntry{sid: "S-1-5-4", mask: genericAll}), true, "its ACL lets S-1-5-4 change it (access mask 0x10000000)"},
		{"a named other user may read", with(allowEntry{sid: other, mask: 0x1}), true, ""},
		{"Users may only list", with(allowEntry{sid: "S-1-5-32-545", mask: 0x20}), true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.changeable(me, tc.near); got != tc.change {
				t.Errorf("changeable(near %v) = %q, want %q", tc.near, got, tc.change)
			}
			if got := tc.s.othersMayWrite(me, tc.near); got != (tc.change != "") {
				t.Errorf("othersMayWrite(near %v) = %v, but changeable says %q", tc.near, got, tc.change)
			}
		})
	}
}
