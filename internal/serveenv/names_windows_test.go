package serveenv

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// On Windows a variable's name is one whatever its case: the runner's
// "Path" is PATH, a "github_token" is the token and refused; and the
// system's own variables a program needs to start (SystemRoot above all)
// reach the serve.
func TestBuildWindows(t *testing.T) {
	environ := []string{
		`Path=C:\Windows\system32;C:\Windows`, `SystemRoot=C:\Windows`, `TEMP=C:\Users\runner\AppData\Local\Temp`,
		`PATHEXT=.COM;.EXE;.BAT`, `ProgramFiles(x86)=C:\Program Files (x86)`, `NUMBER_OF_PROCESSORS=8`,
		"github_token=ghs_secret", "Input_Github-Token=ghs_secret", "actions_runtime_token=secret", `github_output=C:\out`,
		"=C:=C:\\actions-runner", "RUNNER_TRACKING_ID=github_1", "OpenVINO_LOG_LEVEL=2",
	}
	got := Build(environ, []string{"path=C:\\serve"}, []string{"runner_tracking_id"}, nil)
	want := []string{
		`SystemRoot=C:\Windows`, `TEMP=C:\Users\runner\AppData\Local\Temp`, `PATHEXT=.COM;.EXE;.BAT`,
		`ProgramFiles(x86)=C:\Program Files (x86)`, `NUMBER_OF_PROCESSORS=8`, "RUNNER_TRACKING_ID=github_1",
		"OpenVINO_LOG_LEVEL=2", `path=C:\serve`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Build on Windows (-want +got):\n%s", diff)
	}
	for _, name := range []string{"github_token", "GitHub_Output", "input_x", "Actions_ID_Token_Request_URL"} {
		if Refused(name) == "" || Allowed(name) {
			t.Errorf("Refused(%q) = %q, Allowed = %v; want it refused whatever its case", name, Refused(name), Allowed(name))
		}
	}
	if v, ok := Lookup(environ, "PATH"); !ok || v != `C:\Windows\system32;C:\Windows` {
		t.Errorf(`Lookup(environ, "PATH") = %q, %v; want Path's value`, v, ok)
	}
	if !slices.ContainsFunc(osNames, same("SYSTEMROOT")) {
		t.Error("SYSTEMROOT is not among osNames")
	}
}
