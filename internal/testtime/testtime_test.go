package testtime

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// stream is a `go test -json` run of two packages: one passes (a test with
// two subtests, one skipped), one fails (its failed test's output shown,
// a passing test's not), with the go command's own error line between.
const stream = `{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestScripts"}
{"Action":"output","Package":"ex/a","Test":"TestScripts","Output":"=== RUN   TestScripts\n"}
{"Action":"output","Package":"ex/a","Test":"TestScripts/slow","Output":"=== RUN   TestScripts/slow\n"}
{"Action":"pass","Package":"ex/a","Test":"TestScripts/slow","Elapsed":9.5}
{"Action":"output","Package":"ex/a","Test":"TestScripts/fast","Output":"--- SKIP: TestScripts/fast\n"}
{"Action":"skip","Package":"ex/a","Test":"TestScripts/fast","Elapsed":0.01}
{"Action":"pass","Package":"ex/a","Test":"TestScripts","Elapsed":9.6}
{"Action":"pass","Package":"ex/a","Test":"TestUnit","Elapsed":1.25}
{"Action":"output","Package":"ex/a","Output":"PASS\n"}
{"Action":"output","Package":"ex/a","Output":"ok  \tex/a\t9.7s\n"}
{"Action":"pass","Package":"ex/a","Elapsed":9.7}
go: warning: "./x/..." matched no packages
{"Action":"build-output","ImportPath":"ex/c [ex/c.test]","Output":"c_test.go:3:1: syntax error\n"}
{"Action":"output","Package":"ex/b","Test":"TestBad","Output":"    b_test.go:9: got 1, want 2\n"}
{"Action":"output","Package":"ex/b","Test":"TestBad","Output":"--- FAIL: TestBad (3.00s)\n"}
{"Action":"fail","Package":"ex/b","Test":"TestBad","Elapsed":3}
{"Action":"output","Package":"ex/b","Test":"TestGood","Output":"--- PASS: TestGood (0.50s)\n"}
{"Action":"pass","Package":"ex/b","Test":"TestGood","Elapsed":0.5}
{"Action":"output","Package":"ex/b","Test":"TestHang","Output":"=== RUN   TestHang\n"}
{"Action":"output","Package":"ex/b","Output":"panic: test timed out after 10m0s\n"}
{"Action":"output","Package":"ex/b","Output":"FAIL\tex/b\t600.1s\n"}
{"Action":"fail","Package":"ex/b","Elapsed":600.1}
`

func TestCopy(t *testing.T) {
	var out strings.Builder
	run, err := Copy(&out, strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	want := "ok  \tex/a\t9.7s\n" +
		"go: warning: \"./x/...\" matched no packages\n" +
		"c_test.go:3:1: syntax error\n" +
		"    b_test.go:9: got 1, want 2\n--- FAIL: TestBad (3.00s)\n" +
		"panic: test timed out after 10m0s\n" +
		"FAIL\tex/b\t600.1s\n" +
		"=== RUN   TestHang\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("Copy wrote (-want +got):\n%s", diff)
	}
	s := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	wantSlowest := []Timed{
		{"ex/a", "TestScripts/slow", s(9.5), "pass"},
		{"ex/b", "TestBad", s(3), "fail"},
		{"ex/a", "TestUnit", s(1.25), "pass"},
	}
	if diff := cmp.Diff(wantSlowest, run.Slowest(3)); diff != "" {
		t.Errorf("Slowest(3) (-want +got):\n%s", diff)
	}
	if got := len(run.Slowest(10)); got != 5 {
		t.Errorf("Slowest(10) has %d tests, want the 5 without subtests", got)
	}
	wantPkgs := []Timed{{"ex/b", "", s(600.1), "fail"}, {"ex/a", "", s(9.7), "pass"}}
	if diff := cmp.Diff(wantPkgs, run.SlowestPackages(10)); diff != "" {
		t.Errorf("SlowestPackages(10) (-want +got):\n%s", diff)
	}
	if got, want := wantSlowest[0].String(), "    9.50s  pass  ex/a TestScripts/slow"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestSlowestNestedSubtests(t *testing.T) {
	run := Run{Tests: []Timed{
		{Package: "p", Test: "TestA/x/y", Elapsed: 2},
		{Package: "p", Test: "TestA/x", Elapsed: 3},
		{Package: "p", Test: "TestA", Elapsed: 4},
		{Package: "q", Test: "TestA", Elapsed: 1},
	}}
	want := []Timed{{Package: "p", Test: "TestA/x/y", Elapsed: 2}, {Package: "q", Test: "TestA", Elapsed: 1}}
	if diff := cmp.Diff(want, run.Slowest(10)); diff != "" {
		t.Errorf("Slowest (-want +got):\n%s", diff)
	}
}
