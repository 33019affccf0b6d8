#!/usr/bin/env bash
# A reply_N.json of 1.5 GB (zeros: a few MB as a zipped artifact) is read
# whole into memory by report: RSS grows with the file (3 GB file: 3.1 GB
# RSS), so a larger one OOM-kills the merge before it posts its check run
# (an earlier attempt's success then stands). Exit 1 when RSS > 512 MB.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd); w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
(cd "$repo" && go build -o "$w/nss" ./cmd/action) || exit 2
cp -r "$repo/attack/fixtures/npu-serve-smoke-Qwen3-4B-npu" "$w/"; d="$w/npu-serve-smoke-Qwen3-4B-npu"
truncate -s 1500M "$d/reply_1.json"
/usr/bin/time -f '%M' -o "$w/rss" "$w/nss" report --expect model=Qwen3-4B,device=npu --rate-source server "$d" | cut -c1-160
rss=$(tail -1 "$w/rss"); echo "max RSS ${rss} KB"
if [ "$rss" -gt 524288 ]; then echo "BUG: report's memory follows a reply file's size"; exit 1; fi
echo held
