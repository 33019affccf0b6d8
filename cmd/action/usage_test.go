package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestFlagHelpReadable: each command's -h shows its flags' help as text, not
// with the tab the flag package indents it with escaped ("\t"); a flag's
// error still names the flag.
func TestFlagHelpReadable(t *testing.T) {
	for _, cmd := range []string{"run", "record", "judge", "publish"} {
		var out, errOut bytes.Buffer
		run(context.Background(), []string{cmd, "-h"}, func(string) string { return "" }, &out, &errOut)
		help := errOut.String()
		if !strings.Contains(help, "\n  -") {
			t.Errorf("%s -h printed no flags: %q", cmd, help)
		}
		if strings.Contains(help, `\t`) || strings.Contains(help, "\t") {
			t.Errorf("%s -h has a tab, escaped or not: %q", cmd, help[:min(len(help), 300)])
		}
	}
	var errOut bytes.Buffer
	run(context.Background(), []string{"run", "--max-tokens", "x"}, func(string) string { return "" }, &bytes.Buffer{}, &errOut)
	if !strings.Contains(errOut.String(), "-max-tokens") {
		t.Errorf("a bad --max-tokens: %q, want the flag named", errOut.String())
	}
}
