// Command release-sums builds a release's binaries the way the release
// workflow does and writes their checksums file:
//
//	go run ./cmd/release-sums v1.2.3
//
// builds npu-serve-smoke and npu-hold for linux and windows, each for amd64
// and arm64 (windows' named .exe), into dist/ and writes dist/checksums.txt. The maintainer commits that file as
// checksums.txt beside action.yml before tagging; the release workflow builds
// the tag again and refuses to publish unless it gets the same bytes.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
