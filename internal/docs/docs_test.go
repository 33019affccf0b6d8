package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
)

const root = "../.."

// TestPages checks every page's blocks and links, the action's steps in the
// repository's own workflows, and that the README's set-up and test commands
// are the ones CI runs.
func TestPages(t *testing.T) {
	inputs, err := ActionInputs(filepath.Join(root, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	var ci []string
	for _, f := range []string{".ci/run", ".ci/tools"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		ci = append(ci, string(b))
	}
	setUp := 0
	for _, p := range pages {
		blocks, err := Read(p)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, err := range Check(blocks, inputs) {
			t.Error(err)
		}
		for _, err := range CheckLinks(p) {
			t.Error(err)
		}
		if filepath.Base(p) != "README.md" {
			continue
		}
		for _, b := range blocks {
			if b.Info != Shell {
				continue
			}
			cmds, _ := Commands(b) // errors reported by Check
			for _, c := range cmds {
				if !SetUp(c.Words) {
					continue
				}
				setUp++
				if !InCI(c.Words, ci...) {
					t.Errorf("%s: the README's set-up or test command is not in .ci/run or .ci/tools: CI must run it as written", c)
				}
			}
		}
	}
	// go mod download, .ci/tools, go test -race ./..., cd realserve, go test ./...
	if setUp < 5 {
		t.Errorf("the README names %d set-up and test commands, want at least 5 (go mod download, .ci/tools, the two test commands)", setUp)
	}
	// Every preset is in action.yml's preset input and in the presets table.
	action, err := os.ReadFile(filepath.Join(root, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	presetInput := regexp.MustCompile(`(?m)^  preset:\n    description: '([^\n]*)'$`).FindSubmatch(action)
	table, err := os.ReadFile(filepath.Join(root, "docs", "presets.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range config.PresetNames() {
		if presetInput == nil || !strings.Contains(string(presetInput[1]), name) {
			t.Errorf("action.yml: the preset input's description does not name preset %q", name)
		}
		if !strings.Contains(string(table), "\n| `"+name+"` |") {
			t.Errorf("docs/presets.md: the presets table has no row for %q", name)
		}
	}
	workflows, err := filepath.Glob(filepath.Join(root, ".github/workflows/*.yml"))
	if err != nil || len(workflows) == 0 {
		t.Fatalf("no workflows (%v)", err)
	}
	for _, w := range workflows {
		b, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range CheckWorkflow(w, string(b), inputs) {
			t.Error(err)
		}
	}
}

// A broken page: each fault is found, and a good block passes.
func TestCheckBroken(t *testing.T) {
	inputs := map[string]bool{"serve": true, "model": true, "preset": true, "fast-route": true}
	page := filepath.Join(t.TempDir(), "page.md")
	text := "# Page\n\n" +
		"```\nno info string\n```\n\n" +
		"```bash\necho hi\n```\n\n" +
		"```sh\nrm -rf /tmp/x\n```\n\n" +
		"```yaml\n" +
		"steps:\n" +
		"  - uses: npu-serve-smoke/npu-serve-smoke@v1\n" +
		"    with:\n" +
		"      preset: llama.cpp\n" +
		"      serve: llama-server -m {model} --port {port} -ngl 99\n" +
		"      floor-typo: 60\n" +
		"  - uses: ./\n" +
		"    with:\n" +
		"      serve: llama-server -m {model} --port {port}\n" +
		"  - uses: ./   # a good one\n" +
		"    with:\n" +
		"      preset: llama.cpp\n" +
		"      serve: |\n" +
		"        llama-server -m {model} --port {port} -lv 4\n" +
		"```\n\n" +
		"```text\nRESULT: PASS\n```\n\n" +
		"See [nothing](other.md) and [no heading](#nowhere) and [this](#page).\n"
	if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := Read(page)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, err := range append(Check(blocks, inputs), CheckLinks(page)...) {
		got = append(got, strings.TrimPrefix(err.Error(), page))
	}
	want := []string{
		`:3: a block without an info string; give it one of sh, yaml, text, conf, ini (text for output)`,
		`:7: info string "bash" is none of sh, yaml, text, conf, ini`,
		`:12: rm -rf /tmp/x: "rm" is not a program the pages may name; run it in a test, or add it to docs.Others saying where it is checked`,
		`:15: the step at line 2: input "floor-typo" is not declared in action.yml`,
		`:15: the step at line 2: ` + ErrNoVerbosity.Error(),
		`:15: the step at line 7: a llama-server serve with neither the llama.cpp preset nor route rules of its own: the default rules are the reference serve's, and the route would be judged neither`,
		`: link other.md: open ` + filepath.Join(filepath.Dir(page), "other.md") + `: no such file or directory`,
		`: link #nowhere: ` + page + ` has no heading #nowhere`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Check of a broken page: errors (-want +got):\n%s", diff)
	}
}

func TestCommands(t *testing.T) {
	for _, tt := range []struct {
		text string
		want [][]string
	}{
		{"go test -race ./...", [][]string{{"go", "test", "-race", "./..."}}},
		{"(cd realserve && go test ./...)", [][]string{{"cd", "realserve"}, {"go", "test", "./..."}}},
		{"./npu-serve-smoke run --preset llama.cpp \\\n  --serve 'llama-server -m {model} -lv 4' \\\n  --model m.gguf",
			[][]string{{"./npu-serve-smoke", "run", "--preset", "llama.cpp", "--serve", "llama-server -m {model} -lv 4", "--model", "m.gguf"}}},
		{"go run ./cmd/action demo    # the fast route: PASS, exit 0\n# a comment line\n", [][]string{{"go", "run", "./cmd/action", "demo"}}},
		{"v=v1.2.3 arch=arm64\ncurl -fsSLO https://x/$v/npu-hold_${v}\n", [][]string{{"curl", "-fsSLO", "https://x/$v/npu-hold_${v}"}}},
		{`./config.sh --name "$(hostname)-npu-1" --x $(go env GOPATH)/bin`, [][]string{{"./config.sh", "--name", "$(hostname)-npu-1", "--x", "$(go env GOPATH)/bin"}}},
		{`--slow-route 'unless-fast: CPU(_Mapped)? x' "a \"b\"" c\ d ''`, [][]string{{"--slow-route", "unless-fast: CPU(_Mapped)? x", `a "b"`, "c d", ""}}},
		{"a | b; c || d", [][]string{{"a"}, {"b"}, {"c"}, {"d"}}},
	} {
		cmds, err := Commands(Block{File: "p.md", Line: 1, Info: Shell, Text: tt.text})
		if err != nil {
			t.Errorf("Commands(%q) = %v", tt.text, err)
			continue
		}
		var got [][]string
		for _, c := range cmds {
			got = append(got, c.Words)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Commands(%q) (-want +got):\n%s", tt.text, diff)
		}
	}
	for _, bad := range []string{"echo 'open", `echo "open`, "serve &", "echo $(open"} {
		if _, err := Commands(Block{File: "p.md", Line: 1, Info: Shell, Text: bad}); err == nil {
			t.Errorf("Commands(%q) = nil error, want one", bad)
		}
	}
}

func TestRead(t *testing.T) {
	page := filepath.Join(t.TempDir(), "p.md")
	text := "x\n```sh\na\n```\n1. item\n\n   ```text\n   out\n     more\n   ```\n````yaml\n```\n````\n"
	if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(page)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{File: page, Line: 2, Info: "sh", Text: "a"},
		{File: page, Line: 7, Info: "text", Text: "out\n  more"},
		{File: page, Line: 11, Info: "yaml", Text: "```"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
	if err := os.WriteFile(page, []byte("```sh\nopen\n"), 0o644); err == nil {
		if _, err := Read(page); err == nil {
			t.Error("Read of a block never closed = nil error, want one")
		}
	}
}

func TestInCI(t *testing.T) {
	ci := "bash .ci/tools\nGOFLAGS=-p=1 go test -race ./...\n(\n\tcd realserve\n\tgo test -count=1 -v ./...\n)\n"
	for _, tt := range []struct {
		words []string
		want  bool
	}{
		{[]string{".ci/tools"}, true},
		{[]string{"go", "test", "-race", "./..."}, true},
		{[]string{"cd", "realserve"}, true},
		{[]string{"go", "test", "./..."}, true},
		{[]string{"go", "mod", "download"}, false},
		{[]string{"go", "test", "-short", "./..."}, false},
	} {
		if got := InCI(tt.words, ci); got != tt.want {
			t.Errorf("InCI(%q) = %v, want %v", tt.words, got, tt.want)
		}
	}
}

func TestSetting(t *testing.T) {
	words := []string{"run", "--preset", "vllm", "-serve=x y", "--preset=llama.cpp"}
	if v, ok := Setting(words, "preset"); v != "llama.cpp" || !ok {
		t.Errorf("Setting(preset) = %q, %v, want llama.cpp, true", v, ok)
	}
	if v, ok := Setting(words, "serve"); v != "x y" || !ok {
		t.Errorf("Setting(serve) = %q, %v, want \"x y\", true", v, ok)
	}
	if _, ok := Setting(words, "model"); ok {
		t.Error("Setting(model) found, want not")
	}
	if !slices.Contains(Kinds, Shell) {
		t.Error("Kinds lacks sh")
	}
}

// The README's "What happens, in order" names each stage by the function
// that does it: each name is a function in the source.
func TestStagesNamed(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "## What happens, in order")
	if start < 0 {
		t.Fatal(`README.md has no "What happens, in order"`)
	}
	end := strings.Index(text[start+1:], "\n## ")
	if end < 0 {
		end = len(text) - start - 1
	}
	section := text[start : start+1+end]
	names := regexp.MustCompile("(?m)^\\d+\\. `([A-Za-z.]+)`").FindAllStringSubmatch(section, -1)
	if len(names) < 8 {
		t.Fatalf("What happens, in order: %d stages named by their function, want 8", len(names))
	}
	gate, err := os.ReadFile(filepath.Join(root, "internal/gate/gate.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range names {
		if !definesFunc(t, m[1], string(gate)) {
			t.Errorf("README.md, What happens, in order: %s is not a function of the source", m[1])
		}
	}
	if definesFunc(t, "noSuchStage", string(gate)) {
		t.Error("definesFunc(noSuchStage) = true, want false")
	}
}

// definesFunc reports whether name (f, Type.Method or pkg.Func) is defined:
// f in gate.go, pkg.Func in internal/pkg, Type.Method anywhere in internal.
func definesFunc(t *testing.T, name, gate string) bool {
	recv, fn, dotted := strings.Cut(name, ".")
	if !dotted {
		return regexp.MustCompile(`(?m)^func (\([^)]*\) )?` + name + `\(`).MatchString(gate)
	}
	files, err := filepath.Glob(filepath.Join(root, "internal", recv, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^func ` + fn + `\(`)
	if len(files) == 0 {
		if files, err = filepath.Glob(filepath.Join(root, "internal", "*", "*.go")); err != nil {
			t.Fatal(err)
		}
		re = regexp.MustCompile(`(?m)^func \(\w+ \*?` + recv + `\) ` + fn + `\(`)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if re.Match(b) {
			return true
		}
	}
	return false
}

// Each way of citing a version that a later check cannot fetch is found,
// and the forms the pages use pass.
func TestCheckCitations(t *testing.T) {
	const commit = "98aabcd429c4e8402406c56ce2d26387fed3b9ce"
	page := filepath.Join(t.TempDir(), "page.md")
	text := "# Page\n\n" +
		"The template (actions/runner, read at commit `0128561f`) has no restart.\n" +
		"See `actions/runner@main:src/Misc/layoutbin/svc.sh`.\n" +
		"Read in ollama/ollama v0.12.11 and ggml-org/llama.cpp b10116.\n" +
		"At `" + commit + "` alone.\n" +
		"Read at `actions/runner@0128561f` and in actions/runner at v2.336.0.\n" +
		"Good: `actions/runner@" + commit + ":src/Misc/layoutbin/actions.runner.service.template`,\n" +
		"`systemd/systemd@v257`, `ROCm/k8s-device-plugin@v1.31.0.10:cmd/k8s-device-plugin/main.go`,\n" +
		"`ggml-org/llama.cpp@b10116`, `ollama/ollama@v0.12.11-rc0`, `uses: actions/checkout@v4`,\n" +
		"and `a/b@1.2.3`, and the form itself, `owner/repo@REF:path`.\n" +
		"Not commits: 18446744073709551615, npu.h.00000000000000000001, deadbeef, 0x8086, ggml/src/abc1234/x, v-0abc123f, 0abc123f_x,\n" +
		"1abc234f-x, docs/abc1234f ends a path, 2abc345f/x, x.3abc456f, x_4abc567f.\n" +
		"Seven digits are enough: abc1234.\n" +
		"Read in ollama/ollama, read at v0.6.5, and ollama/ollama version v0.6.5; see actions/runner@v2.336.0.\n" +
		"Built from `ggml-org/llama.cpp` `b123`; (actions/runner@v2.336.0, actions/runner@v2.336.0; actions/runner@v2.336.0).\n" +
		"```text\nread at commit 0128561f, inside a block\n```\n"
	if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, err := range CheckCitations(page) {
		got = append(got, strings.TrimPrefix(err.Error(), page))
	}
	want := []string{
		`:3: "0128561f" looks like an abbreviated commit; write the full commit as owner/repo@COMMIT (40 hexadecimal digits), with :path for a file`,
		`:4: "actions/runner@main:src/Misc/layoutbin/svc.sh": actions/runner is cited at "main", which is neither a full commit (40 hexadecimal digits) nor a release tag; write actions/runner@COMMIT or actions/runner@vX.Y.Z, with :path for a file`,
		`:5: "ollama/ollama v0.12.11": a version beside the repository; write ollama/ollama@v0.12.11, with :path for a file`,
		`:5: "ggml-org/llama.cpp b10116": a version beside the repository; write ggml-org/llama.cpp@b10116, with :path for a file`,
		`:6: commit ` + commit + ` is named without its repository; write owner/repo@` + commit + `, with :path for a file`,
		`:7: "actions/runner@0128561f": actions/runner is cited at "0128561f", which is neither a full commit (40 hexadecimal digits) nor a release tag; write actions/runner@COMMIT or actions/runner@vX.Y.Z, with :path for a file`,
		`:7: "actions/runner at v2.336.0": a version beside the repository; write actions/runner@v2.336.0, with :path for a file`,
	}
	want = append(want,
		`:14: "abc1234" looks like an abbreviated commit; write the full commit as owner/repo@COMMIT (40 hexadecimal digits), with :path for a file`,
		`:15: "ollama/ollama, read at v0.6.5": a version beside the repository; write ollama/ollama@v0.6.5, with :path for a file`,
		`:15: "ollama/ollama version v0.6.5": a version beside the repository; write ollama/ollama@v0.6.5, with :path for a file`,
		":16: \"ggml-org/llama.cpp` `b123\": a version beside the repository; write ggml-org/llama.cpp@b123, with :path for a file",
	)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CheckCitations of a page with bad citations (-want +got):\n%s", diff)
	}
}

// Every citation of another project's source in the pages is in the one
// form a check against the sources can find (CheckCitations).
func TestCitations(t *testing.T) {
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		for _, err := range CheckCitations(p) {
			t.Error(err)
		}
	}
}
