package docs

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// A citation is where a page says what another project's source says. The
// pages write each one in a single form, so that a check against the
// sources can find them all and fetch each at its version:
//
//	owner/repo@REF        the repository at that version
//	owner/repo@REF:path   one file of it
//
// REF is a full commit, 40 hexadecimal digits, or a release tag as the
// repository names it: v1.2.3, v255, 1.2.3 or b10116 (llama.cpp's builds).
// A branch (main, master), an abbreviated commit, or a version written
// beside the repository rather than after its @ is not a version a later
// check can fetch, and is refused.
//
// CheckCitations reads a page's prose (fenced blocks are commands, output
// and files, not citations) and returns an error for each citation not in
// that form: the page, its line, the text, and the form to write.
func CheckCitations(page string) []error {
	b, err := os.ReadFile(page)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for i, line := range strings.Split(outsideFences(string(b)), "\n") {
		for _, bad := range badCitations(line) {
			errs = append(errs, fmt.Errorf("%s:%d: %s", page, i+1, bad))
		}
	}
	return errs
}

var (
	// repoAt is owner/repo@REF, with :path when one follows.
	repoAt = regexp.MustCompile(`([A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+)@([^\s` + "`" + `:;,)]*)(:[^\s` + "`" + `;,)]+)?`)
	// fullCommit is a commit as the form takes it.
	fullCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)
	// releaseTag is a tag as the form takes it.
	releaseTag = regexp.MustCompile(`^(v\d+(\.\d+)*|\d+(\.\d+)+|b\d+)(-[0-9A-Za-z.]+)?$`)
	// hexWord is a word of hexadecimal digits that may be a commit; a
	// word that goes on with a path's or a name's characters is not one.
	hexWord = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)
	// repoThenVersion is a repository with a version beside it, not after @.
	repoThenVersion = regexp.MustCompile(`\b([A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]*[A-Za-z0-9_])` + "`?" + `,? +(read at |at |version )?` + "`?" + `(v\d+(\.\d+)+[0-9A-Za-z.-]*|b\d{3,})\b`)
)

// placeholder is the repository the pages name when they describe the form.
const placeholder = "owner/repo"

// badCitations returns what is wrong with each citation on a line of prose.
func badCitations(line string) []string {
	var bad []string
	for _, m := range repoAt.FindAllStringSubmatch(line, -1) {
		repo, ref := m[1], strings.TrimRight(m[2], ".") // a sentence may end after it
		switch {
		case repo == placeholder, fullCommit.MatchString(ref), releaseTag.MatchString(ref):
			// The form itself, as the pages describe it, or a citation in it.
		default:
			bad = append(bad, fmt.Sprintf("%q: %s is cited at %q, which is neither a full commit (40 hexadecimal digits) nor a release tag; write %s@COMMIT or %s@vX.Y.Z, with :path for a file", m[0], repo, ref, repo, repo))
		}
	}
	for _, at := range hexWord.FindAllStringIndex(line, -1) {
		h := line[at[0]:at[1]]
		if at[0] > 0 && strings.IndexByte("@/.-", line[at[0]-1]) >= 0 || at[1] < len(line) && strings.IndexByte("-/", line[at[1]]) >= 0 {
			continue // part of a path, a name, or a citation read above
		}
		if !strings.ContainsAny(h, "0123456789") || !strings.ContainsAny(h, "abcdef") {
			continue // a number, or a word
		}
		if len(h) == 40 {
			bad = append(bad, fmt.Sprintf("commit %s is named without its repository; write owner/repo@%s, with :path for a file", h, h))
			continue
		}
		bad = append(bad, fmt.Sprintf("%q looks like an abbreviated commit; write the full commit as owner/repo@COMMIT (40 hexadecimal digits), with :path for a file", h))
	}
	for _, m := range repoThenVersion.FindAllStringSubmatch(line, -1) {
		bad = append(bad, fmt.Sprintf("%q: a version beside the repository; write %s@%s, with :path for a file", m[0], m[1], m[3]))
	}
	return bad
}
