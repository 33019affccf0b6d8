//go:build windows

package config

import (
	"fmt"
	"os"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/vendortool"
)

// exposed says why the token file is not this user's alone, or "", on
// Windows: an ACL that lets every user (Everyone, Authenticated Users,
// Users, INTERACTIVE) read it, or lets another user change it or the
// directories above it (vendortool.ChangeableBy's rule).
func exposed(file string, _ os.FileInfo) string {
	if why := vendortool.ReadableByEveryUser(file); why != "" {
		return fmt.Sprintf("%s; icacls %s /inheritance:r /grant:r %%USERNAME%%:F", why, file)
	}
	if why := vendortool.ChangeableBy(file); why != "" {
		return fmt.Sprintf("%s, who could put a token of theirs in it", why)
	}
	return ""
}
