package main

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/fakegithub"
)

// githubRun [-event EVENT] [-head-repo OWNER/NAME] WORKFLOW BRANCH CONCLUSION
// [NAME=DIR | NAME=@FILE]... adds a workflow run to the fake GitHub (a push
// of the repository's own code unless told), with artifacts: a directory
// zipped as upload-artifact zips it (its files at the archive's top), or a
// file's bytes as they are.
func githubRun(ts *testscript.TestScript, neg bool, args []string) {
	usage := "usage: githubrun [-event EVENT] [-head-repo OWNER/NAME] WORKFLOW BRANCH CONCLUSION [NAME=DIR | NAME=@FILE]..."
	run := fakegithub.WorkflowRun{HeadSHA: strings.Repeat("3", 40), Event: "push", Status: "completed"}
	for len(args) >= 2 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-event":
			run.Event = args[1]
		case "-head-repo":
			run.HeadRepo = args[1]
		default:
			ts.Fatalf("%s", usage)
		}
		args = args[2:]
	}
	if neg || len(args) < 3 {
		ts.Fatalf("%s", usage)
	}
	gh := fakeOf(ts)
	run.Workflow, run.HeadBranch, run.Conclusion = ".github/workflows/"+args[0], args[1], args[2]
	id := gh.AddRun(run)
	for _, a := range args[3:] {
		name, src, ok := strings.Cut(a, "=")
		if !ok {
			ts.Fatalf("githubrun: %q is not NAME=DIR or NAME=@FILE", a)
		}
		var b []byte
		if file, raw := strings.CutPrefix(src, "@"); raw {
			b = []byte(ts.ReadFile(file))
		} else {
			b = zipDir(ts, ts.MkAbs(src))
		}
		gh.AddArtifact(fakegithub.Artifact{RunID: id, Name: name, Zip: b})
	}
}

func zipDir(ts *testscript.TestScript, dir string) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	ts.Check(filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		w, err := zw.Create(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}))
	ts.Check(zw.Close())
	return b.Bytes()
}
