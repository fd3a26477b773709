#!/usr/bin/env bash
# Times the whole `opx plan` process against the seed planner (python3 -m operatorx.ci plan)
# on the same inputs — the embedded catalog's full gemm_legacy (7,212 cases) and the other
# testlists, pinned images (no network) — side by side, and prints the ratio.
#   usage: scripts/bench-plan.sh [RUNS]     (needs ../shared/seed and python3)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
shared=${OPX_SHARED:-../shared}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# built as scripts/release.sh builds it: static, trimmed, stripped
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/opx" ./cmd/opx
mkdir -p "$work/ref"
cp -r internal/catalog/data/testlists "$work/ref/testlists"
cp internal/catalog/data/platforms.json internal/catalog/data/platform_config.json "$work/"
cat > "$work/ref/containers.toml" <<'TOML'
[nvidia.vllm]
image = "vllm/vllm-openai:nightly@sha256:20a52b807cef7a3be15d2174d293b5642d437615b20b5930d78a927e709e6bb6"
TOML
"$shared/seed/seedtree" "$work/ref" "$work/seed" >/dev/null
# the clock is read straight from $EPOCHREALTIME: a $(...) around it forks a subshell,
# and its exit and start would be timed with the command (0.2 ms a run here, which
# weighs on opx's few milliseconds and not on the seed's hundreds)
# side by side: each round runs the seed once, then opx once, so both see the same
# machine; the medians are compared (a VM's timings drift and spike)
# output: "new" writes each run's manifest to a path that does not exist yet, as a CI
# runner's plan job does on its fresh checkout (the last run's manifests are deleted
# before the round, untimed); "replace" writes over the last run's, as re-planning
# into the same file on a login node does, and both programs then also pay for
# freeing the old file's blocks (on a filesystem mounted with discard, about 1 ms for
# 2.7 MB, inside the seed's open() and opx's rename())
bench() { # label, testlists, chunk size, output (new or replace)
  local args=(plan --runner cluster:h200-dgxc --backends vllm --testlists "$2"
      --world-sizes "1,2,4,8" --chunk-size "$3" --run-id 1 --attempt 1 --source-sha s
      --platform-config "$work/platforms.json")
  local seed_t=() opx_t=() t0 t1 t2 same
  for _ in $(seq "$runs"); do
    if [ "$4" = new ]; then rm -f "$work/seed.json" "$work/opx.json"; fi
    t0=${EPOCHREALTIME/[.,]/}
    PYTHONPATH="$work/seed" python3 -m operatorx.ci "${args[@]}" --out "$work/seed.json" >/dev/null
    t1=${EPOCHREALTIME/[.,]/}
    "$work/opx" "${args[@]}" --out "$work/opx.json" --testlist-dir "$work/ref/testlists" \
        --containers "$work/ref/containers.toml" >/dev/null
    t2=${EPOCHREALTIME/[.,]/}
    seed_t+=($((t1 - t0))) opx_t+=($((t2 - t1)))
  done
  cmp -s "$work/seed.json" "$work/opx.json" && same=identical || same=DIFFERENT
  local seed_us opx_us
  seed_us=$(printf '%s\n' "${seed_t[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  opx_us=$(printf '%s\n' "${opx_t[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  awk -v l="$1" -v s="$seed_us" -v o="$opx_us" -v m="$same" -v r="$runs" \
    'BEGIN { printf "%-44s seed %8.1f ms   opx %7.1f ms   %5.1fx   manifests %s (medians of %d runs each)\n", l, s/1000, o/1000, s/o, m, r }'
}
catalog=gemm_legacy,gemm_perf,gemm_perf_legacy,gemm_serving_8k1k_min,profile_subset,smoke_parallel,moe_subset_legacy,attention_perf
bench "one testlist (gemm_perf, 11 cases)" gemm_perf 500 new
bench "smoke_parallel + gemm_perf_legacy" smoke_parallel,gemm_perf_legacy 1 new
bench "whole catalog (7,585 cases)" "$catalog" 100 new
bench "whole catalog, replacing the last manifest" "$catalog" 100 replace
