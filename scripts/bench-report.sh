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
shared=${OPX_SHARED:-../shared}
if [ -x "$shared/seed/seedtree" ] && command -v python3 >/dev/null; then
  mkdir -p "$work/ref"
  [ -d "$work/seed" ] || "$shared/seed/seedtree" "$work/ref" "$work/seed" >/dev/null
fi
names=(summarize report compare export-csv export-jsonl)
[ -d "$work/seed" ] && names=(seed-summarize "${names[@]}")
command_of() {
  case $1 in
    seed-summarize) echo env PYTHONPATH="$work/seed" python3 -m operatorx.ci summarize "${m[@]}" --artifacts "$work/artifacts" --out "$work/seed.json" ;;
    summarize) echo "$work/opx" summarize "${m[@]}" --artifacts "$work/artifacts" --out "$work/summary.json" ;;
    report) echo "$work/opx" report "$work/artifacts" "${m[@]}" --out "$work/report.html" ;;
    compare) echo "$work/opx" compare "$work/artifacts" "$work/artifacts" --allow-same --base-manifest "$work/manifest.json" --new-manifest "$work/manifest.json" --json "$work/compare.json" ;;
    export-csv) echo "$work/opx" export "$work/artifacts" "${m[@]}" --format csv --out "$work/cases.csv" ;;
    export-jsonl) echo "$work/opx" export "$work/artifacts" "${m[@]}" --format jsonl --out "$work/cases.jsonl" ;;
  esac
}
# RUNS rounds, each running every command once in turn: the VM's speed drifts, and a
# command's ratio to summarize is taken within each round (side by side), then the median
# over the rounds; its time is the median and its peak RSS the largest
: > "$work/raw"
for round in $(seq "$runs"); do
  for name in "${names[@]}"; do
    t0=$(date +%s%N)
    # shellcheck disable=SC2046 # the command's words, paths without spaces
    /usr/bin/time -f %M -o "$work/rss" $(command_of "$name") >/dev/null 2>"$work/err" || [ $? -eq 1 ]
    t1=$(date +%s%N)
    echo "$round $name $(( (t1 - t0) / 1000000 )) $(( $(tail -1 "$work/rss") / 1024 ))" >> "$work/raw"
  done
done
awk '
  { ms[$2, $1] = $3; if ($4 > rss[$2]) rss[$2] = $4; if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } ; rounds = $1 }
  function median(a, k,   i, j, t) {
    for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  END {
    for (c = 1; c <= n; c++) {
      name = order[c]
      for (r = 1; r <= rounds; r++) { t[r] = ms[name, r]; q[r] = ms[name, r] / ms["summarize", r] }
      printf "%s %d %.2f %d\n", name, median(t, rounds), median(q, rounds), rss[name]
    }
  }' "$work/raw" > "$work/figures"
seed=$(awk '$1 == "seed-summarize" {print $3}' "$work/figures")
echo "256 shards x 2 attempts x 500 rows ($(wc -l < "$work/cases.csv") rows exported; $runs rounds, each command once a round):"
awk '{printf "  %-15s %6d ms  %5.2fx summarize  peak RSS %4d MiB\n", $1, $2, $3, $4}' "$work/figures"
if [ -n "$seed" ]; then
  cmp -s "$work/seed.json" "$work/summary.json" || echo "  (the seed's report and opx's differ)"
  echo "  opx summarize is ${seed}x the seed's speed (the median of the rounds' ratios)"
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
