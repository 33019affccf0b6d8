#!/usr/bin/env bash
# report on an artifact whose serve.log is a FIFO (or any file whose open
# blocks) hangs forever, and ignores SIGTERM (the runner's cancel): the merge
# never completes its check run. Exit 1 when it still runs 10 s after SIGTERM.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd); w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
(cd "$repo" && go build -o "$w/nss" ./cmd/action) || exit 2
cp -r "$repo/attack/fixtures/npu-serve-smoke-Qwen3-4B-npu" "$w/"; d="$w/npu-serve-smoke-Qwen3-4B-npu"
rm "$d/serve.log"; mkfifo "$d/serve.log"
"$w/nss" report --expect model=Qwen3-4B,device=npu --rate-source server "$d" & pid=$!
sleep 5; kill -TERM "$pid"; sleep 10
if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; echo "BUG: report blocked on a FIFO serve.log and survived SIGTERM"; exit 1; fi
echo held
