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

// procLine is a script line that finds processes by their command line:
// "killproc TEXT" kills, "noproc TEXT" waits for, "signal SIG TEXT"
// signals, every process on the machine whose command line holds TEXT,
// whoever started it.
var procLine = regexp.MustCompile(`(?m)^\s*(killproc|noproc|signal\s+\S+)\s+(?:'([^']*)'|(\S+))\s*$`)

// TestProcTextsOwn: a script's killproc, noproc and signal find only its
// own processes. Scripts run in parallel, in this test binary and in the other
// packages' at once, so a TEXT that another script's (or test's) command
// lines hold too kills or waits on that script's processes: a killproc in
// one script killed the holder of another, whose waiter was then granted
// the pool at once; a signal TERM in one script to every npu-hold that ran
// sh -c touch killed another's holder before it had started (its text is
// quoted in that script, 'touch ...', and its command line is not). A TEXT with
// $UNIQUE or $WORK (the script's own word and directory) is its own; any
// other must appear in no other file of the module.
func TestProcTextsOwn(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string][]string{} // file (relative to root) -> its TEXTs
	var files []string
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
		case ".txtar", ".go", ".sh":
		default:
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		files = append(files, rel)
		if filepath.Ext(path) != ".txtar" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range procLine.FindAllStringSubmatch(string(b), -1) {
			text := m[2] + m[3]
			if !strings.Contains(text, "$UNIQUE") && !strings.Contains(text, "$WORK") && !slices.Contains(texts[rel], text) {
				texts[rel] = append(texts[rel], text)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
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
					t.Errorf("%s finds processes by %q, which %s's command lines hold too: scripts run in parallel, so it would kill or wait on the other's; give the command a text of its own (or $UNIQUE, or $WORK)", script, text, other)
				}
			}
		}
	}
}
