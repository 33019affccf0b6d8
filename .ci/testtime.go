//go:build ignore

// testtime reads `go test -json` on stdin, writes what `go test` without
// -json shows, then the suite's ten slowest tests and its packages'
// times, each package over the budget marked: docs/development.md,
// "The time the tests take". Its exit status is 0 unless stdin cannot be
// read; .ci/run takes the test run's own from the pipe.
//
//	go test -race -json ./... | go run .ci/testtime.go
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/npu-serve-smoke/npu-serve-smoke/internal/testtime"
)

// packageBudget is the most one package's tests may take on an idle 2-core
// machine under -race.
const packageBudget = 2 * time.Minute

func main() {
	run, err := testtime.Copy(os.Stdout, os.Stdin)
	fmt.Println("\nthe ten slowest tests:")
	for _, t := range run.Slowest(10) {
		fmt.Println(t)
	}
	fmt.Printf("\nthe packages, slowest first (budget: %v a package on an idle 2-core machine):\n", packageBudget)
	var all time.Duration
	for _, p := range run.SlowestPackages(len(run.Packages)) {
		all += p.Elapsed
		mark := ""
		if p.Elapsed > packageBudget {
			mark = "  over the budget"
		}
		fmt.Printf("%s%s\n", p, mark)
	}
	fmt.Printf("%8.2fs  the packages' times added\n", all.Seconds())
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtime:", err)
		os.Exit(1)
	}
}
