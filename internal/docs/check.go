package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/config"
)

// Check checks what a page's blocks can be checked for without running the
// project's commands: every block says its kind, every shell command is a
// program the pages may name, and every workflow step that uses the action
// gives only inputs action.yml declares, with a serve line its preset can
// judge. The project's own command lines are checked by the commands'
// tests, with their real flag sets.
func Check(blocks []Block, inputs map[string]bool) []error {
	var errs []error
	for _, b := range blocks {
		switch b.Info {
		case Shell:
			cmds, err := Commands(b)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, c := range cmds {
				if !Known(c.Words) {
					errs = append(errs, fmt.Errorf("%s: %q is not a program the pages may name; run it in a test, or add it to docs.Others saying where it is checked", c, c.Words[0]))
				}
			}
		case YAML:
			errs = append(errs, CheckWorkflow(b.String(), b.Text, inputs)...)
		case Text, Conf, INI:
		case "":
			errs = append(errs, fmt.Errorf("%s: a block without an info string; give it one of %s (text for output)", b, strings.Join(Kinds, ", ")))
		default:
			errs = append(errs, fmt.Errorf("%s: info string %q is none of %s", b, b.Info, strings.Join(Kinds, ", ")))
		}
	}
	return errs
}

// ActionInputs reads the inputs action.yml declares.
func ActionInputs(file string) (map[string]bool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	text := string(b)
	i, j := strings.Index(text, "\ninputs:\n"), strings.Index(text, "\noutputs:\n")
	if i < 0 || j < i {
		return nil, fmt.Errorf("%s: no inputs block before the outputs block", file)
	}
	inputs := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z0-9-]+):$`).FindAllStringSubmatch(text[i:j], -1) {
		inputs[m[1]] = true
	}
	if len(inputs) == 0 {
		return nil, fmt.Errorf("%s: no inputs read", file)
	}
	return inputs, nil
}

// usesAction matches a step that uses the action: by its repository, or as
// ./ in the action's own repository.
var usesAction = regexp.MustCompile(`^(\s*)(- )?uses: +(npu-serve-smoke/npu-serve-smoke@\S+|\./)\s*(#.*)?$`)

// Step is a workflow step that uses the action: the inputs it gives.
type Step struct {
	Line int // from 1, in its text
	With map[string]string
}

// Steps finds the steps of a workflow (or a snippet of one) that use the
// action, and reads their with: inputs. It reads the YAML the workflows
// use: block mappings, one key a line, plain, quoted and block (| or >)
// scalars.
func Steps(text string) []Step {
	lines := strings.Split(text, "\n")
	var steps []Step
	for i, l := range lines {
		m := usesAction.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		col := len(m[1]) + len(m[2]) // the step's keys
		st := Step{Line: i + 1, With: map[string]string{}}
		for j := i + 1; j < len(lines); j++ {
			ind := indentOf(lines[j])
			if strings.TrimSpace(lines[j]) == "" || strings.HasPrefix(strings.TrimSpace(lines[j]), "#") {
				continue
			}
			if ind < col || ind == col-2 && strings.HasPrefix(strings.TrimSpace(lines[j]), "- ") {
				break
			}
			if ind == col && strings.TrimSpace(lines[j]) == "with:" {
				readWith(lines[j+1:], col, st.With)
			}
		}
		steps = append(steps, st)
	}
	return steps
}

func readWith(lines []string, col int, with map[string]string) {
	keyCol := -1
	var key string
	var block []string
	flush := func() {
		if key != "" && block != nil {
			with[key] = strings.Join(block, "\n")
		}
		block = nil
	}
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		ind := indentOf(l)
		if ind <= col {
			break
		}
		if keyCol < 0 {
			keyCol = ind
		}
		if ind > keyCol && block != nil {
			block = append(block, t)
			continue
		}
		if ind != keyCol || strings.HasPrefix(t, "#") {
			continue
		}
		flush()
		k, v, _ := strings.Cut(t, ":")
		key, v = k, strings.TrimSpace(v)
		switch {
		case v == "|" || v == ">" || v == "|-" || v == ">-":
			block = []string{}
		case strings.HasPrefix(v, "'") && strings.HasSuffix(v, "'") && len(v) > 1:
			with[key] = strings.ReplaceAll(v[1:len(v)-1], "''", "'")
		case strings.HasPrefix(v, `"`) && strings.HasSuffix(v, `"`) && len(v) > 1:
			with[key] = v[1 : len(v)-1]
		default:
			if c := strings.Index(v, " #"); c >= 0 {
				v = strings.TrimSpace(v[:c])
			}
			with[key] = v
		}
	}
	flush()
}

func indentOf(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

// CheckWorkflow checks the steps of a workflow text that use the action.
func CheckWorkflow(where, text string, inputs map[string]bool) []error {
	var errs []error
	for _, st := range Steps(text) {
		at := fmt.Sprintf("%s: the step at line %d", where, st.Line)
		for k := range st.With {
			if !inputs[k] {
				errs = append(errs, fmt.Errorf("%s: input %q is not declared in action.yml", at, k))
			}
		}
		if serve, ok := st.With["serve"]; ok {
			words, err := config.SplitWords(serve)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: serve: %v", at, err))
				continue
			}
			_, own := st.With["fast-route"]
			if err := CheckServe(st.With["preset"], words, own); err != nil {
				errs = append(errs, fmt.Errorf("%s: %v", at, err))
			}
		}
	}
	return errs
}

// InCI reports whether a command appears in the CI scripts: in some line
// (continuations joined, quotes dropped) whose words hold the command's
// words in order. `.ci/tools` is found in `bash .ci/tools`, `go test -race
// ./...` in `GOFLAGS=-p=1 go test -race ./...`.
func InCI(words []string, scripts ...string) bool {
	for _, s := range scripts {
		for _, l := range strings.Split(strings.ReplaceAll(s, "\\\n", " "), "\n") {
			if hasInOrder(strings.Fields(strings.NewReplacer(`"`, "", `'`, "", "(", " ", ")", " ").Replace(l)), words) {
				return true
			}
		}
	}
	return false
}

func hasInOrder(line, words []string) bool {
	i := 0
	for _, w := range line {
		if i < len(words) && w == words[i] {
			i++
		}
	}
	return i == len(words) && len(words) > 0
}

// SetUp reports whether a README command is a set-up or test command, which
// CI must run as the README gives it.
func SetUp(words []string) bool {
	switch words[0] {
	case ".ci/tools", ".ci/ollama", "cd":
		return true
	case "go":
		return len(words) > 1 && (words[1] == "test" || words[1] == "mod")
	}
	return false
}

// headingAnchor is GitHub's anchor of a heading: lower case, punctuation
// but - and _ dropped, spaces made -.
func headingAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
)

// CheckLinks checks the page's relative links: each names a file that
// exists and, after #, a heading of it.
func CheckLinks(page string) []error {
	text, err := os.ReadFile(page)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, m := range linkRE.FindAllStringSubmatch(outsideFences(string(text)), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		path := page
		if file != "" {
			path = filepath.Join(filepath.Dir(page), file)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: link %s: %v", page, target, err))
			continue
		}
		if anchor == "" {
			continue
		}
		found := false
		for _, h := range headingRE.FindAllStringSubmatch(outsideFences(string(b)), -1) {
			found = found || headingAnchor(h[1]) == anchor
		}
		if !found {
			errs = append(errs, fmt.Errorf("%s: link %s: %s has no heading #%s", page, target, path, anchor))
		}
	}
	return errs
}

// outsideFences is text with its fenced blocks' lines blanked.
func outsideFences(text string) string {
	lines := strings.Split(text, "\n")
	var fence string
	for i, l := range lines {
		t := strings.TrimLeft(l, " ")
		switch {
		case fence == "" && leadingTicks(t) >= 3:
			fence = strings.Repeat("`", leadingTicks(t))
			lines[i] = ""
		case fence != "":
			if strings.HasPrefix(t, fence) && strings.Trim(t, "` ") == "" {
				fence = ""
			}
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}
