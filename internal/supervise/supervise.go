package supervise

import (
	"fmt"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/supervise/stage1"
)

// Command is the supervisor's command name, after the binary's.
const Command = stage1.Command

// ContainEnv names the environment variable that picks the mechanism;
// unset or "auto", the first that works of Mechanisms.
const ContainEnv = stage1.ContainEnv

// CheckContain fails when want names no mechanism.
func CheckContain(want string) error {
	if want == "" || want == "auto" {
		return nil
	}
	for _, m := range Mechanisms {
		if want == m {
			return nil
		}
	}
	return fmt.Errorf("%s=%q: pass auto or one of %s", ContainEnv, want, strings.Join(Mechanisms, ", "))
}
