//go:build windows

package serveenv

import "strings"

// osNames are Windows's own variables a serve needs besides Names: where
// Windows is (without SystemRoot a program's Winsock and its random
// numbers fail to start), the user's profile and its folders, the
// temporary directory, the shell and the extensions a program's name
// takes, the processors.
var osNames = []string{
	"SystemRoot", "windir", "SystemDrive", "ComSpec", "PATHEXT", "OS",
	"TEMP", "TMP", "USERPROFILE", "USERNAME", "USERDOMAIN", "HOMEDRIVE", "HOMEPATH",
	"APPDATA", "LOCALAPPDATA", "ProgramData", "ALLUSERSPROFILE", "PUBLIC",
	"ProgramFiles", "ProgramFiles(x86)", "ProgramW6432",
	"CommonProgramFiles", "CommonProgramFiles(x86)", "CommonProgramW6432",
	"NUMBER_OF_PROCESSORS", "PROCESSOR_ARCHITECTURE", "PROCESSOR_IDENTIFIER", "COMPUTERNAME",
}

// sameName tells whether two variables' names are one: on Windows,
// whatever their case ("Path" is PATH, "github_token" GITHUB_TOKEN).
func sameName(a, b string) bool { return strings.EqualFold(a, b) }

func hasPrefix(name, prefix string) bool {
	return len(name) >= len(prefix) && strings.EqualFold(name[:len(prefix)], prefix)
}
