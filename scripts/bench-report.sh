#!/usr/bin/env bash
# The largest sweep's artifacts (256 shards x 2 attempts x 500 rows, scripts/bench-tree.py)
# through opx summarize, report, compare (the run against itself) and export (csv, jsonl):
# wall time and peak RSS of each (GNU time), side by side with summarize's and with the
# seed's summarize (ci.py, when ../shared/seed is here), the page's size, and how long
# headless Chromium takes to its first screenshot of the page.
#   usage: scripts/bench-report.sh [RUNS]    (OPX_BENCH_DIR keeps the tree between runs)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
work=${OPX_BENCH_DIR:-$(mktemp -d)}; [ -n "${OPX_BENCH_DIR:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/opx" ./cmd/opx
[ -f "$work/manifest.json" ] || python3 scripts/bench-tree.py "$work"
m=(--manifest "$work/manifest.json")
# one command, RUNS times: the median wall time (ms) and the largest peak RSS (MiB)
measure() {
  local name=$1; shift
  local ts=() rss=0 t0 t1 kb
  for _ in $(seq "$runs"); do
    t0=$(date +%s%N)
    /usr/bin/time -f %M -o "$work/rss" "$@" >/dev/null 2>"$work/err" || [ $? -eq 1 ]
    t1=$(date +%s%N)
    ts+=($(( (t1 - t0) / 1000000 )))
    kb=$(tail -1 "$work/rss"); [ "$kb" -gt "$rss" ] && rss=$kb
  done
  local med; med=$(printf '%s\n' "${ts[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "$name $med $(( rss / 1024 ))"
}
shared=${OPX_SHARED:-../shared}
if [ -x "$shared/seed/seedtree" ] && command -v python3 >/dev/null; then
  mkdir -p "$work/ref"
  [ -d "$work/seed" ] || "$shared/seed/seedtree" "$work/ref" "$work/seed" >/dev/null
fi
{
  if [ -d "$work/seed" ]; then
    measure seed-summarize env PYTHONPATH="$work/seed" python3 -m operatorx.ci summarize "${m[@]}" --artifacts "$work/artifacts" --out "$work/seed.json"
  fi
  measure summarize "$work/opx" summarize "${m[@]}" --artifacts "$work/artifacts" --out "$work/summary.json"
  measure report "$work/opx" report "$work/artifacts" "${m[@]}" --out "$work/report.html"
  measure compare "$work/opx" compare "$work/artifacts" "$work/artifacts" --base-manifest "$work/manifest.json" --new-manifest "$work/manifest.json" --json "$work/compare.json"
  measure export-csv "$work/opx" export "$work/artifacts" "${m[@]}" --format csv --out "$work/cases.csv"
  measure export-jsonl "$work/opx" export "$work/artifacts" "${m[@]}" --format jsonl --out "$work/cases.jsonl"
} > "$work/figures"
base=$(awk '$1 == "summarize" {print $2}' "$work/figures")
seed=$(awk '$1 == "seed-summarize" {print $2}' "$work/figures")
echo "256 shards x 2 attempts x 500 rows ($(wc -l < "$work/cases.csv") rows exported; medians of $runs runs):"
awk -v b="$base" '{printf "  %-15s %6d ms  %5.2fx summarize  peak RSS %4d MiB\n", $1, $2, $2 / b, $3}' "$work/figures"
if [ -n "$seed" ]; then
  cmp -s "$work/seed.json" "$work/summary.json" || echo "  (the seed's report and opx's differ)"
  awk -v s="$seed" -v b="$base" 'BEGIN {printf "  opx summarize is %.2fx the seed'"'"'s speed\n", s / b}'
fi
echo "  page: $(( $(stat -c %s "$work/report.html") / 1024 )) KiB"
if command -v chromium >/dev/null; then
  t0=$(date +%s%N)
  # the virtual-time budget holds the screenshot until the page's script has inflated its
  # data and drawn the charts and the case table
  chromium --headless --no-sandbox --disable-gpu --user-data-dir="$work/chrome" --hide-scrollbars \
    --virtual-time-budget=30000 --window-size=1280,2000 --screenshot="$work/report.png" "file://$work/report.html" >/dev/null 2>&1
  t1=$(date +%s%N)
  echo "  headless Chromium, start to a screenshot of the page drawn: $(( (t1 - t0) / 1000000 )) ms ($(stat -c %s "$work/report.png") bytes of PNG)"
fi
