#!/usr/bin/env bash
# The gate's binary for action.yml, the fastest honest way, written to
# $GITHUB_OUTPUT as bin=PATH:
#
#  1. A release binary, when checksums.txt beside action.yml was made from
#     this very source (its "# source" line is the hash of the tree's Go
#     files, computed again here) and names an asset for this runner's arch:
#     downloaded once into the runner's tool cache
#     ($RUNNER_TOOL_CACHE/npu-serve-smoke/VERSION/ARCH plus ARCH.complete).
#     Every run copies it into a fresh directory of this job's RUNNER_TEMP
#     (mktemp -d: mode 0700, a name no other job knows), checks the COPY's
#     SHA-256 against checksums.txt, and runs the copy: the cache is shared
#     with every job of the runner's user, and a file swapped there after
#     the check is never the one that runs. A binary whose SHA-256 differs
#     is refused: nothing is cached or run.
#  2. Else (no release of this source: `uses: ./`, a branch, a fork; or its
#     download failed) a build from source when Go is on PATH, every run,
#     into a fresh directory of this job's RUNNER_TEMP; only Go's own build
#     cache is kept warm between runs. No built binary is kept anywhere an
#     earlier job could replace it: nothing says which binary a build made
#     but the build itself.
#  3. Else an error naming both ways out.
#
# Environment: ACTION_PATH, ACTION_REPOSITORY and ACTION_REF (from the
# action's inputs: composite steps cannot see github.action_*), the runner's
# RUNNER_OS, RUNNER_ARCH, RUNNER_TOOL_CACHE, RUNNER_TEMP, GITHUB_SERVER_URL,
# GITHUB_OUTPUT, GITHUB_STEP_SUMMARY (an error goes there too);
# NPU_SERVE_SMOKE_DOWNLOAD_URL replaces
# $GITHUB_SERVER_URL/$ACTION_REPOSITORY/releases/download (a mirror, tests).
#
# `gate-binary.sh source-hash DIR` prints the source hash of DIR
# (internal/release.SourceHash is the same function in Go).
set -euo pipefail

# error TEXT: an error annotation, and the same words in the job summary,
# where a reader of the run looks first when the gate has no result.
error() {
	echo "::error title=npu serve smoke::$*"
	if [[ -n "${GITHUB_STEP_SUMMARY:-}" ]]; then
		printf '### ❌ npu serve smoke: the gate did not run\n\n%s\n' "$*" >>"$GITHUB_STEP_SUMMARY" || true
	fi
}

# sha256 FILE...: sha256sum's lines, from sha256sum or shasum.
if command -v sha256sum >/dev/null; then
	sha256=(sha256sum)
else
	sha256=(shasum -a 256)
fi

file_sha256() { "${sha256[@]}" "$1" | cut -c1-64; }

# source_hash DIR: the SHA-256 of sha256sum's lines of every non-test .go
# file, go.mod and go.sum under DIR, sorted by path.
source_hash() {
	(
		cd "$1"
		find . -path ./.git -prune -o -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) \
			-not -name '*_test.go' -print0 | LC_ALL=C sort -z | xargs -0 -r "${sha256[@]}" | "${sha256[@]}" | cut -c1-64
	)
}

# download URL FILE, with curl or wget, whichever is there.
download() {
	if command -v curl >/dev/null; then
		curl -fsSL --connect-timeout 10 --max-time 300 --retry 3 --retry-delay 2 -o "$2" "$1"
	elif command -v wget >/dev/null; then
		wget -q --timeout 30 --tries 3 --waitretry 2 -O "$2" "$1"
	else
		echo "neither curl nor wget is installed" >&2
		return 1
	fi
}

# release: sets bin to a verified release binary, or why to the reason there
# is none. Exits 1 when a downloaded binary is not the released one. (Called
# as a plain command, never as a condition, so that set -e holds in it.)
release() {
	local sums="$ACTION_PATH/checksums.txt" origin goarch arch version src asset want base url dir file got tmp run copy
	if [ "${RUNNER_OS:-}" != Linux ]; then
		why="releases hold Linux and Windows binaries, and this runner is ${RUNNER_OS:-of an unknown OS}"
		return
	fi
	case "${RUNNER_ARCH:-}" in
	X64) goarch=amd64 arch=x64 ;;
	ARM64) goarch=arm64 arch=arm64 ;;
	*)
		why="releases hold X64 and ARM64 binaries, and this runner is ${RUNNER_ARCH:-of an unknown arch}"
		return
		;;
	esac
	if [ ! -f "$sums" ]; then
		why="the action's tree has no checksums.txt: this source was never released"
		return
	fi
	version=$(sed -n 's/^# npu-serve-smoke \(v[0-9][0-9A-Za-z.-]*\): .*/\1/p' "$sums" | head -n1)
	src=$(sed -n 's/^# source \([0-9a-f]*\)$/\1/p' "$sums" | head -n1)
	asset="npu-serve-smoke_${version}_linux_${goarch}"
	want=$(awk -v a="$asset" '$2 == a && length($1) == 64 && $1 !~ /[^0-9a-f]/ { print $1; exit }' "$sums")
	if [ -z "$version" ] || [ -z "$want" ]; then
		why="checksums.txt names no $asset"
		return
	fi
	if [ "$(source_hash "$ACTION_PATH")" != "$src" ]; then
		why="this source is not release $version's (a branch, a fork or a local checkout)"
		return
	fi

	origin=${ACTION_REPOSITORY:+ of $ACTION_REPOSITORY@${ACTION_REF:-?}}
	dir="${RUNNER_TOOL_CACHE:-$RUNNER_TEMP}/npu-serve-smoke/${version#v}/$arch"
	file="$dir/npu-serve-smoke"
	# What runs is a copy in this job's own directory, checked after it was
	# copied: whatever happens to the cache from here on, the bytes checked
	# are the bytes run.
	run=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/npu-serve-smoke-bin.XXXXXX")
	copy="$run/npu-serve-smoke"
	if [ -f "$dir.complete" ] && [ -f "$file" ]; then
		# A cache that changes under the copy fails the check (or the copy)
		# and is downloaded again.
		if cp -- "$file" "$copy" && [ "$(file_sha256 "$copy")" = "$want" ]; then
			chmod 700 "$copy"
			echo "npu-serve-smoke: release $version$origin for $arch, cached and verified (SHA-256 $want); runs as the checked copy $copy"
			bin=$copy
			return
		fi
		rm -f "$copy"
		echo "::warning title=npu serve smoke::the cached $file does not match checksums.txt; downloading it again"
	fi
	rm -f "$dir.complete"

	if [ -n "${NPU_SERVE_SMOKE_DOWNLOAD_URL:-}" ]; then
		base=${NPU_SERVE_SMOKE_DOWNLOAD_URL%/}
	elif [ -n "${ACTION_REPOSITORY:-}" ]; then
		base="${GITHUB_SERVER_URL:-https://github.com}/$ACTION_REPOSITORY/releases/download"
	else
		rm -rf "$run"
		why="the action's repository is not known here (uses: ./), so there is nothing to download"
		return
	fi
	url="$base/$version/$asset"
	# Downloaded into this job's directory and checked there; the cache
	# gets a copy of the checked file, for the next job to check again.
	if ! download "$url" "$copy"; then
		rm -rf "$run"
		why="downloading $url failed"
		return
	fi
	got=$(file_sha256 "$copy")
	if [ "$got" != "$want" ]; then
		rm -rf "$run"
		error "$url has SHA-256 $got, and checksums.txt at this action's commit says $want for $asset. The download is refused: nothing was cached or run. A release asset that differs from the committed checksums was replaced or damaged after the release; report it to the action's maintainers."
		exit 1
	fi
	chmod 700 "$copy"
	mkdir -p "$dir"
	tmp=$(mktemp "$dir/.download.XXXXXX")
	cp -- "$copy" "$tmp"
	chmod 755 "$tmp"
	mv -f "$tmp" "$file"
	: >"$dir.complete"
	echo "npu-serve-smoke: release $version$origin for $arch, downloaded from $url and verified (SHA-256 $want); runs as the checked copy $copy"
	bin=$copy
}

# build: the gate built from the action's source into a new directory of
# this job's temp (mktemp -d: 0700, a name no earlier job could know), with
# Go's build cache as the only thing kept between runs.
build() {
	local dir
	cd "$ACTION_PATH"
	dir=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/npu-serve-smoke-build.XXXXXX")
	bin="$dir/npu-serve-smoke"
	go build -trimpath -o "$bin" ./cmd/action
	echo "npu-serve-smoke: built from source into $dir ($(go version | cut -d' ' -f3))"
}

main() {
	local bin="" why=""
	release
	if [ -z "$bin" ]; then
		if ! command -v go >/dev/null; then
			error "No release binary for this runner: $why. And Go is not installed to build one from the action's source. Either install Go 1.26 on the runner (or add actions/setup-go before this step), or use a released tag of the action (uses: OWNER/npu-serve-smoke@vX.Y.Z on Linux or Windows, X64 or ARM64)."
			exit 2
		fi
		echo "npu-serve-smoke: no release binary ($why); building from the action's source${ACTION_REF:+ at $ACTION_REF}"
		build
	fi
	echo "bin=$bin" >>"$GITHUB_OUTPUT"
}

case "${1:-}" in
"") main ;;
source-hash) source_hash "$2" ;;
*)
	echo "usage: gate-binary.sh [source-hash DIR]" >&2
	exit 2
	;;
esac
