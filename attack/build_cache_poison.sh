#!/usr/bin/env bash
# gate-binary.sh's build-from-source path trusts a cached build by `-x` alone.
# Its cache key is a hash of `go version` and the action's sources, which any
# earlier job on the same self-hosted runner (a fork's pull request runs its
# own code there) can compute and plant into RUNNER_TOOL_CACHE. The next run
# of the action (uses: ./, a branch, or a released tag whose download failed)
# then execs the planted binary, unverified.
# Exit 1 when the planted binary is chosen.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
action="$work/action"; mkdir -p "$action"
(cd "$repo" && git ls-files -z | xargs -0 cp --parents -t "$action")
rm -f "$action/checksums.txt"   # not a release: the build path
export ACTION_PATH="$action" RUNNER_OS=Linux RUNNER_ARCH=X64 RUNNER_TOOL_CACHE="$work/cache" RUNNER_TEMP="$work/tmp" GITHUB_OUTPUT="$work/out"
mkdir -p "$RUNNER_TEMP"; : >"$GITHUB_OUTPUT"
# The attacker's job: same key computation as the action's own.
key=$(cd "$action" && { go version; find . -path ./.git -prune -o -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -not -name '*_test.go' -print | LC_ALL=C sort | xargs sha256sum; } | sha256sum | cut -c1-16)
mkdir -p "$RUNNER_TOOL_CACHE/npu-serve-smoke/$key"
printf '#!/bin/sh\necho PLANTED BINARY RAN\n' >"$RUNNER_TOOL_CACHE/npu-serve-smoke/$key/npu-serve-smoke"
chmod 755 "$RUNNER_TOOL_CACHE/npu-serve-smoke/$key/npu-serve-smoke"
# The victim's run.
bash "$action/gate-binary.sh"
bin=$(sed -n 's/^bin=//p' "$GITHUB_OUTPUT")
echo "bin=$bin"
if "$bin" 2>/dev/null | grep -q 'PLANTED BINARY RAN'; then
	echo "BUG: gate-binary.sh chose the planted, unverified cached build"
	exit 1
fi
echo "held"
