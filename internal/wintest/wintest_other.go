//go:build !windows

package wintest

import "testing"

// Wine is false: only a Windows program runs under Wine.
func Wine() bool { return false }

func emptyAtEnd(testing.TB, string) {}
