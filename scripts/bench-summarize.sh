#!/usr/bin/env bash
# Times `opx summarize` against the seed's summarize (python3 -m operatorx.ci summarize) on
# the same artifact tree — 256 shards x 2 attempts x 500 result rows — side by side, checks
# that both reports are identical, and prints the ratio.
#   usage: scripts/bench-summarize.sh [RUNS]     (needs ../shared/seed and python3)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
shared=${OPX_SHARED:-../shared}
work=${OPX_BENCH_DIR:-$(mktemp -d)}; [ -n "${OPX_BENCH_DIR:-}" ] || trap 'rm -rf "$work"' EXIT
# built as scripts/release.sh builds it: static, trimmed, stripped
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/opx" ./cmd/opx
mkdir -p "$work/ref"
[ -d "$work/seed" ] || "$shared/seed/seedtree" "$work/ref" "$work/seed" >/dev/null
[ -f "$work/manifest.json" ] || python3 scripts/bench-tree.py "$work"
time_it() {
  local start end
  start=$(date +%s%N)
  for _ in $(seq "$runs"); do "$@" >/dev/null || [ $? -eq 1 ]; done
  end=$(date +%s%N)
  echo $(( (end - start) / runs / 1000000 ))
}
args=(summarize --manifest "$work/manifest.json" --artifacts "$work/artifacts")
seed_ms=$(PYTHONPATH="$work/seed" time_it python3 -m operatorx.ci "${args[@]}" --out "$work/seed.json")
opx_ms=$(time_it "$work/opx" "${args[@]}" --out "$work/opx.json")
cmp -s "$work/seed.json" "$work/opx.json" || { echo "bench-summarize: the reports differ" >&2; exit 1; }
echo "summarize 256 shards x 2 attempts x 500 rows ($runs runs): seed ${seed_ms} ms, opx ${opx_ms} ms, ratio $(awk -v a="$seed_ms" -v b="$opx_ms" 'BEGIN {printf "%.1f", a/b}')x"
