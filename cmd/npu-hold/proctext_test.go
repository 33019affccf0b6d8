package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// word is one word of a script line as testscript reads it: its text, and
// whether a variable outside single quotes (where testscript expands it)
// makes it the script's own. Inside single quotes testscript expands
// nothing: '... x-$UNIQUE' is the text "$UNIQUE", the same in every script,
// and a serve started with it holds that literal text.
type word struct {
	text   string
	own    bool // $UNIQUE or $WORK outside quotes
	quoted bool // $UNIQUE inside quotes, where it stays that text
}

// ownVar is a variable whose value no other script run shares: the script's
// own word and its own directory.
var ownVar = regexp.MustCompile(`^\$(UNIQUE|WORK)\b`)

// words splits a script line as testscript does (single quotes group, and
// two in a row inside them are one quote), up to a comment.
func words(line string) []word {
	var out []word
	var cur word
	in, started := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case in && c == '\'' && i+1 < len(line) && line[i+1] == '\'':
			cur.text += "'"
			i++
		case c == '\'':
			in, started = !in, true
		case !in && (c == ' ' || c == '\t'):
			if started {
				out = append(out, cur)
			}
			cur, started = word{}, false
		case !in && c == '#' && !started:
			return out
		default:
			if ownVar.MatchString(line[i:]) {
				if !in {
					cur.own = true
				} else if strings.HasPrefix(line[i:], "$UNIQUE") {
					cur.quoted = true
				}
			}
			cur.text += string(c)
			started = true
		}
	}
	if started {
		out = append(out, cur)
	}
	return out
}

// procText is the TEXT of a script line that finds processes by their
// command line, and whether the line is one: "killproc TEXT" kills,
// "noproc TEXT" waits for, "signal SIG TEXT" signals, and "exec procs
// TEXT" lists, every process on the machine whose command line holds TEXT,
// whoever started it.
func procText(line string) (word, bool) {
	w := words(line)
	for len(w) > 0 && (w[0].text == "!" || strings.HasPrefix(w[0].text, "[")) {
		w = w[1:]
	}
	switch {
	case len(w) == 2 && (w[0].text == "killproc" || w[0].text == "noproc"):
		return w[1], true
	case len(w) == 3 && w[0].text == "signal":
		return w[2], true
	case len(w) == 3 && w[0].text == "exec" && w[1].text == "procs":
		return w[2], true
	}
	return word{}, false
}

// scriptLines are a script's command lines: the archive's files after the
// first "-- name --" line are not.
func scriptLines(b []byte) []string {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --") {
			break
		}
		out = append(out, line)
	}
	return out
}

func moduleFiles(t *testing.T) (root string, files []string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".txtar", ".go", ".sh", ".py":
		default:
			if !strings.HasPrefix(filepath.Base(filepath.Dir(path)), ".ci") {
				return nil
			}
		}
		rel, _ := filepath.Rel(root, path)
		files = append(files, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return root, files
}

// TestProcTextsOwn: a script's killproc, noproc, signal and procs find only
// its own processes. Scripts run in parallel, in this test binary and in
// the other packages' at once, so a TEXT that another script's (or test's)
// command lines hold too kills or waits on that script's processes: a
// killproc in one script killed the holder of another, whose waiter was then
// granted the pool at once; a signal TERM in one script to every npu-hold
// that ran sh -c touch killed another's holder before it had started (its
// text is quoted in that script, 'touch ...', and its command line is not).
// A TEXT with $UNIQUE or $WORK outside single quotes (the script's own word
// and directory, expanded) is its own; any other must appear in no other
// file of the module, as written or with its quotes removed.
func TestProcTextsOwn(t *testing.T) {
	root, files := moduleFiles(t)
	texts := map[string][]string{} // script (relative to root) -> its TEXTs
	for _, rel := range files {
		if filepath.Ext(rel) != ".txtar" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range scriptLines(b) {
			if w, ok := procText(line); ok && !w.own && !slices.Contains(texts[rel], w.text) {
				texts[rel] = append(texts[rel], w.text)
			}
		}
	}
	if len(texts) == 0 {
		t.Fatal("no script with a killproc or noproc without $UNIQUE was found: is the module root ../..?")
	}
	for script, ts := range texts {
		for _, other := range files {
			if other == script {
				continue
			}
			b, err := os.ReadFile(filepath.Join(root, other))
			if err != nil {
				t.Fatal(err)
			}
			// A command line as it runs: the script's quotes are gone.
			unquoted := strings.NewReplacer("'", "", `"`, "").Replace(string(b))
			for _, text := range ts {
				if strings.Contains(string(b), text) || strings.Contains(unquoted, text) {
					t.Errorf("%s finds processes by %q, which %s's command lines hold too: scripts run in parallel, so it would kill or wait on the other's; give the command a text of its own (or $UNIQUE, or $WORK, outside single quotes)", script, text, other)
				}
			}
		}
	}
}

// TestUniqueOutsideQuotes: $UNIQUE inside single quotes is never expanded
// by testscript, nor by the gate, which splits --serve into words without a
// shell: a serve started with '... --model x-$UNIQUE' holds the literal
// text, and a check that looks for the script's own word finds nothing,
// whatever survived. So every $UNIQUE of a script is outside quotes
// ('... --model x-'$UNIQUE' ...').
func TestUniqueOutsideQuotes(t *testing.T) {
	root, files := moduleFiles(t)
	n := 0
	for _, rel := range files {
		if filepath.Ext(rel) != ".txtar" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range scriptLines(b) {
			for _, w := range words(line) {
				if !strings.Contains(w.text, "$UNIQUE") {
					continue
				}
				n++
				if w.quoted {
					t.Errorf("%s:%d: $UNIQUE inside single quotes stays the literal text $UNIQUE; close the quotes around it ('...x-'$UNIQUE'...'): %s", rel, i+1, strings.TrimSpace(line))
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no $UNIQUE found in any script: is the module root ../..?")
	}
}
