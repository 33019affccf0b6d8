package scripttest

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// Parallel is how many scripts run at once when the test command does not
// say (-parallel N). A script spends most of its time waiting on a serve's
// simulated first token and decode, not on a CPU, so more scripts than cores
// finish sooner without loading the machine more than a few.
const Parallel = 4

// Main is testscript.Main for a package of scripts: it runs one of cmds when
// the test binary is started under its name, else the tests, Parallel
// scripts at a time unless -test.parallel is given.
func Main(m *testing.M, cmds map[string]func()) {
	if _, isCmd := cmds[filepath.Base(os.Args[0])]; !isCmd {
		flag.Parse()
		if !flagSet("test.parallel") {
			if err := flag.Set("test.parallel", strconv.Itoa(Parallel)); err != nil {
				panic(err)
			}
		}
	}
	testscript.Main(m, cmds)
}

// flagSet says whether the command line set the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
