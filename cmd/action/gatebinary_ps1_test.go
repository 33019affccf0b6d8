package main

import (
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/release"
)

// gate-binary.ps1 is Windows PowerShell 5.1's, which no machine of the
// project runs: these tests read its text. They pin what it shares with
// gate-binary.sh, which the act tests run: the assets it asks for, the
// words it says, and the order of check, cache and run.

func readScripts(t *testing.T) (ps1, sh string) {
	t.Helper()
	b, err := os.ReadFile("../../gate-binary.ps1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := os.ReadFile("../../gate-binary.sh")
	if err != nil {
		t.Fatal(err)
	}
	return string(b), string(c)
}

// psCode is a PowerShell script without its comments (whole-line # ones,
// the only kind the script has).
func psCode(s string) string {
	var keep []string
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// Windows PowerShell 5.1 reads a .ps1 without a byte order mark in the
// system's ANSI code page: anything but ASCII would be read as other text.
func TestGateBinaryPS1IsASCII(t *testing.T) {
	ps1, _ := readScripts(t)
	for i, r := range ps1 {
		if r > 0x7e || (r < 0x20 && r != '\n' && r != '\t') {
			t.Errorf("gate-binary.ps1 has %q at byte %d: keep it ASCII (and LF)", r, i)
		}
	}
}

// The asset each runner arch downloads is the one the release names.
func TestGateBinaryPS1Assets(t *testing.T) {
	ps1, sh := readScripts(t)
	arches := map[string]string{} // RUNNER_ARCH → GOARCH
	for _, m := range regexp.MustCompile(`(?m)^\t\t'([A-Z0-9]+)' \{ \$goarch = '([a-z0-9]+)'; \$arch = '([a-z0-9]+)' \}$`).FindAllStringSubmatch(ps1, -1) {
		arches[m[1]] = m[2]
		// The tool cache's directory, as gate-binary.sh names it.
		if want := m[1] + ") goarch=" + m[2] + " arch=" + m[3] + " ;;"; !strings.Contains(sh, want) {
			t.Errorf("gate-binary.sh lacks %q: the two scripts map RUNNER_ARCH %s apart", want, m[1])
		}
	}
	if diff := cmp.Diff(map[string]string{"X64": "amd64", "ARM64": "arm64"}, arches); diff != "" {
		t.Errorf("gate-binary.ps1's RUNNER_ARCH → GOARCH (-want +got):\n%s", diff)
	}
	m := regexp.MustCompile(`(?m)^\t\$asset = "([^"]+)"$`).FindStringSubmatch(ps1)
	if m == nil {
		t.Fatal("gate-binary.ps1 names no $asset")
	}
	for _, goarch := range release.Arches {
		got := strings.NewReplacer("${version}", "v1.2.3", "${goarch}", goarch).Replace(m[1])
		if want := (release.Target{OS: "windows", Arch: goarch}).Asset("npu-serve-smoke", "v1.2.3"); got != want {
			t.Errorf("gate-binary.ps1 asks for %q on %s, the release holds %q", got, goarch, want)
		}
	}
	// The linux one, too, for gate-binary.sh.
	m = regexp.MustCompile(`(?m)^\tasset="([^"]+)"$`).FindStringSubmatch(sh)
	if m == nil {
		t.Fatal("gate-binary.sh names no asset")
	}
	for _, goarch := range release.Arches {
		got := strings.NewReplacer("${version}", "v1.2.3", "${goarch}", goarch).Replace(m[1])
		if want := release.Asset("npu-serve-smoke", "v1.2.3", goarch); got != want {
			t.Errorf("gate-binary.sh asks for %q on %s, the release holds %q", got, goarch, want)
		}
	}
}

// The SHA-256 of the copy that runs is checked against checksums.txt
// before it is named as the binary, and a download that differs is refused
// before anything is cached: on both paths (the cache, the download).
func TestGateBinaryPS1ChecksBeforeRun(t *testing.T) {
	ps1, _ := readScripts(t)
	code := psCode(ps1)
	start := strings.Index(code, "function Release {")
	end := strings.Index(code, "function Build {")
	if start < 0 || end < start {
		t.Fatal("gate-binary.ps1 has no Release function before Build")
	}
	rel := code[start:end]

	// want is read from checksums.txt: 64 hex digits on the asset's line.
	for _, s := range []string{
		"$sums = Join-Path $env:ACTION_PATH 'checksums.txt'",
		"if ($f.Count -ge 2 -and $f[1] -ceq $asset -and $f[0] -cmatch '^[0-9a-f]{64}$') {",
		"if ((SourceHash $env:ACTION_PATH) -cne $src) {",
		"(Get-FileHash -LiteralPath $path -Algorithm SHA256).Hash.ToLowerInvariant()",
	} {
		if !strings.Contains(code, s) {
			t.Errorf("gate-binary.ps1 lacks %q", s)
		}
	}
	// Each place that names the binary comes right after its check.
	named := regexp.MustCompile(`\$script:bin = \$copy`).FindAllStringIndex(rel, -1)
	if len(named) != 2 {
		t.Fatalf("Release names the copy as the binary %d times, want 2 (cached, downloaded)", len(named))
	}
	order := func(what string, marks ...string) {
		t.Helper()
		at := 0
		for _, m := range marks {
			i := strings.Index(rel[at:], m)
			if i < 0 {
				t.Errorf("%s: %q is not where it must be (after %q)", what, m, rel[max(0, at-60):at])
				return
			}
			at += i + len(m)
		}
	}
	order("the cached binary",
		"[System.IO.File]::Copy($file, $copy)",
		"if ($copied -and (FileSha256 $copy) -ceq $want) {",
		"$script:bin = $copy",
	)
	order("the downloaded binary",
		"if (-not (Download $url $copy)) {",
		"$got = FileSha256 $copy",
		"if ($got -cne $want) {",
		"Remove-Item -LiteralPath $run -Recurse -Force",
		"The download is refused: nothing was cached or run.",
		"exit 1",
		"[System.IO.File]::Copy($copy, $tmp)",
		"$script:bin = $copy",
	)
	// Between the cached check and the naming, nothing else runs.
	i := strings.Index(rel, "if ($copied -and (FileSha256 $copy) -ceq $want) {")
	if j := strings.Index(rel[i:], "$script:bin = $copy"); i < 0 || strings.Count(rel[i:i+j], "\n") > 2 {
		t.Errorf("the cached copy is named as the binary more than a line after its check:\n%s", rel[i:i+j])
	}
}

// The same words as gate-binary.sh, which the act tests check: the
// refusal, the reasons for no release binary, what it says it runs.
func TestGateBinaryPS1SaysWhatShSays(t *testing.T) {
	ps1, sh := readScripts(t)
	q := `"((?:[^"\\]|\\.)*)"`
	shErrors := regexp.MustCompile(`(?m)^\t+error `+q).FindAllStringSubmatch(sh, -1)
	psErrors := regexp.MustCompile(`(?m)^\t+Fail `+q).FindAllStringSubmatch(ps1, -1)
	norm := strings.NewReplacer(`$script:why`, `$why`, `\"`, `"`)
	var shText, psText []string
	for _, m := range shErrors {
		shText = append(shText, norm.Replace(m[1]))
	}
	// gate-binary.ps1 says one more: its build's failure (bash's set -e
	// ends gate-binary.sh with go's own message).
	builds := 0
	for _, m := range psErrors {
		if strings.HasPrefix(m[1], "go build ./cmd/action failed") {
			builds++
			continue
		}
		psText = append(psText, norm.Replace(m[1]))
	}
	if builds != 1 {
		t.Errorf("gate-binary.ps1 says its build failed in %d places, want 1", builds)
	}
	if len(shText) < 2 {
		t.Errorf("gate-binary.sh has %d errors, want 2 or more: the pattern no longer reads it", len(shText))
	}
	if diff := cmp.Diff(shText, psText); diff != "" {
		t.Errorf("the errors of gate-binary.sh and gate-binary.ps1 (-sh +ps1):\n%s", diff)
	}

	shWhy := regexp.MustCompile(`(?m)^\t+why=`+q).FindAllStringSubmatch(sh, -1)
	psWhy := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\t+\$script:why = `+q).FindAllStringSubmatch(ps1, -1) {
		psWhy[m[1]] = true
	}
	for _, m := range shWhy {
		if strings.Contains(m[1], "RUNNER_") {
			continue // the system and arch: said in each system's own terms
		}
		if !psWhy[m[1]] {
			t.Errorf("gate-binary.ps1 never gives the reason %q", m[1])
		}
	}
	if len(shWhy) < 6 {
		t.Errorf("gate-binary.sh gives %d reasons, want 6 or more: the pattern no longer reads it", len(shWhy))
	}

	for _, said := range []string{
		`"npu-serve-smoke: release $version$origin for $arch, cached and verified (SHA-256 $want); runs as the checked copy $copy"`,
		`"npu-serve-smoke: release $version$origin for $arch, downloaded from $url and verified (SHA-256 $want); runs as the checked copy $copy"`,
		`"::warning title=npu serve smoke::the cached $file does not match checksums.txt; downloading it again"`,
		`"npu-serve-smoke: no release binary ($why); building from the action's source`,
	} {
		if !strings.Contains(sh, said) {
			t.Errorf("gate-binary.sh does not say %s", said)
		}
		if !strings.Contains(norm.Replace(ps1), said) {
			t.Errorf("gate-binary.ps1 does not say %s", said)
		}
	}
}

// What the runner reads is UTF-8 without a byte order mark: Windows
// PowerShell 5.1's Out-File, Set-Content, Add-Content and '>>' write
// UTF-16, or a mark, into GITHUB_OUTPUT. The build is gate-binary.sh's,
// and no text becomes code.
func TestGateBinaryPS1Writes(t *testing.T) {
	ps1, sh := readScripts(t)
	code := psCode(ps1)
	for _, s := range []string{
		"$utf8 = New-Object System.Text.UTF8Encoding $false\n",
		"[System.IO.File]::AppendAllText($env:GITHUB_OUTPUT, \"bin=$script:bin`n\", $utf8)\n",
		"[System.IO.File]::AppendAllText($env:GITHUB_STEP_SUMMARY, \"### $cross npu serve smoke: the gate did not run`n`n$text`n\", $utf8)\n",
		"$cross = [string][char]0x274C\n",
		"& go build -trimpath -o $out ./cmd/action 2>&1",
		"Set-StrictMode -Version 2.0\n$ErrorActionPreference = 'Stop'\n",
	} {
		if !strings.Contains(code, s) {
			t.Errorf("gate-binary.ps1 lacks %q", s)
		}
	}
	if n := strings.Count(code, "GITHUB_OUTPUT"); n != 1 {
		t.Errorf("gate-binary.ps1 writes GITHUB_OUTPUT in %d places, want 1", n)
	}
	if !strings.Contains(sh, `go build -trimpath -o "$bin" ./cmd/action`) {
		t.Error("gate-binary.sh builds otherwise than gate-binary.ps1")
	}
	if !strings.Contains(sh, `printf '### ❌ npu serve smoke: the gate did not run\n\n%s\n'`) || !strings.Contains(string(rune(0x274C)), "❌") {
		t.Error("gate-binary.sh's summary heading is not the one gate-binary.ps1 writes with [char]0x274C")
	}
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(Out-File|Set-Content|Add-Content|Invoke-Expression|iex)\b`),
		regexp.MustCompile(`>>`),
		regexp.MustCompile(`(?i)Encoding\]::UTF8\b`), // has a byte order mark
	} {
		if m := bad.FindString(code); m != "" {
			t.Errorf("gate-binary.ps1 uses %q", m)
		}
	}
}

// The source hash is gate-binary.sh's (and internal/release.SourceHash's):
// the same files, the same lines, the same order.
func TestGateBinaryPS1SourceHash(t *testing.T) {
	ps1, sh := readScripts(t)
	code := psCode(ps1)
	for _, s := range []string{
		// find . -path ./.git -prune: DIR's own .git only.
		"if ($p -cne './.git') {",
		// -type f: no link, no reparse point, is taken or followed.
		"if (($e.Attributes -band [System.IO.FileAttributes]::ReparsePoint) -ne 0) {",
		// -name '*.go' -o -name go.mod -o -name go.sum, -not -name '*_test.go', case by case.
		"$go = $n.EndsWith('.go', [System.StringComparison]::Ordinal) -and -not $n.EndsWith('_test.go', [System.StringComparison]::Ordinal)",
		"if ($go -or $n -ceq 'go.mod' -or $n -ceq 'go.sum') {",
		// sha256sum's line: the hash, two spaces, ./path.
		"$p = $rel + '/' + $e.Name",
		"$todo.Push(@((New-Object System.IO.DirectoryInfo $root), '.'))",
		"$lines.Add((HexOf ($utf8.GetBytes($p))), \"$sum  $p`n\")",
		// LC_ALL=C sort: by bytes, here by their hex, compared ordinally.
		"New-Object 'System.Collections.Generic.SortedDictionary[string,string]' ([System.StringComparer]::Ordinal)",
		"Sha256OfBytes ($utf8.GetBytes((-join @($lines.Values))))",
		"[System.BitConverter]::ToString($bytes).Replace('-', '').ToLowerInvariant()",
	} {
		if !strings.Contains(code, s) {
			t.Errorf("gate-binary.ps1's SourceHash lacks %q", s)
		}
	}
	for _, s := range []string{
		`find . -path ./.git -prune -o -type f \( -name '*.go' -o -name go.mod -o -name go.sum \)`,
		`-not -name '*_test.go' -print0 | LC_ALL=C sort -z`,
	} {
		if !strings.Contains(sh, s) {
			t.Errorf("gate-binary.sh's source_hash lacks %q: gate-binary.ps1's must change with it", s)
		}
	}
	// Hex keeps the bytewise order (two digits a byte, 0-9 before a-f),
	// where .NET's ordinal order of the paths themselves, by UTF-16 code
	// units, would put U+1F600 (a surrogate pair) before U+FFFD.
	paths := []string{"./a", "./a/b.go", "./a.go", "./a\u00e9.go", "./a~.go", "./Z.go", "./\u00e9.go", "./\U0001F600.go", "./\uFFFD.go"}
	for _, a := range paths {
		for _, b := range paths {
			if (a < b) != (hex.EncodeToString([]byte(a)) < hex.EncodeToString([]byte(b))) {
				t.Errorf("%q < %q is %v bytewise, not by hex", a, b, a < b)
			}
		}
	}
}

// docs/runner.md's Windows runner names the assets the release holds and
// gate-binary.ps1 asks for, the labels, and that the path was not run on
// Windows itself.
func TestDocWindowsRunner(t *testing.T) {
	b, err := os.ReadFile("../../docs/runner.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## A Windows runner\n")
	if !ok {
		t.Fatal("docs/runner.md has no section \"## A Windows runner\"")
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	flat := strings.Join(strings.Fields(sec), " ")
	for _, want := range []string{
		(release.Target{OS: "windows", Arch: "amd64"}).Asset("npu-serve-smoke", "v1.2.3") + "` on `X64`",
		(release.Target{OS: "windows", Arch: "arm64"}).Asset("npu-serve-smoke", "v1.2.3") + "` on `ARM64`",
		(release.Target{OS: "windows", Arch: "amd64"}).Asset("npu-hold", "v1.2.3"),
		"runs-on: [self-hosted, windows, npu]",
		"`NT AUTHORITY\\NETWORK SERVICE`",
		"session 0",
		"`npu-hold doctor` from a job on it runs as the service does",
		"was not run on a Windows runner here",
		"`Get-FileHash` checks its SHA-256 against `checksums.txt` at the action's commit",
		"The download is refused: nothing was cached or run",
		windowsShellWords,
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("docs/runner.md's Windows runner does not say %q", want)
		}
	}
	if !strings.HasPrefix(windowsShell, strings.Trim(windowsShellWords, "`")+" ") {
		t.Errorf("docs/runner.md names the shell %s, action.yml's is %s", windowsShellWords, windowsShell)
	}
}

// windowsShellWords is how docs/runner.md names the Windows steps' shell.
const windowsShellWords = "`powershell -NoProfile -ExecutionPolicy Bypass`"
