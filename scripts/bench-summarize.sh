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
python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
cells = []
for s in range(256):
    sid = "h200-dgxc-%016x" % (s * 7919 + 1)
    cells.append({"id": sid, "runner": "cluster:h200-dgxc", "cases": [{"testlist": "t", "shape": {"type": "gemm", "args": {"m": i}}} for i in range(500)]})
    for attempt in (1, 2):
        d = os.path.join(work, "artifacts", f"operatorx-shard-7-{attempt}-{sid}")
        os.makedirs(os.path.join(d, "results", "nvidia", "h200_dgxc_8x"), exist_ok=True)
        json.dump({"cell": {"id": sid, "runner": "cluster:h200-dgxc"}, "source_sha": "s", "run_id": "7", "attempt": str(attempt), "stage": "/x"}, open(os.path.join(d, "execution.json"), "w"))
        json.dump({"exit_code": 0, "slurm_jobs": ["1"]}, open(os.path.join(d, "status.json"), "w"))
        rows = [{"op": {"type": "gemm", "args": {"m": i, "n": 4096, "k": 4096, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}, "backend": "vllm", "sources": []},
                 "metrics": {"latency_us": 12.5 + i, "tflops": 512.25} if i % 10 else {}, "status": "ok" if i % 10 else "unsupported",
                 "testlist": "t"} for i in range(500)]
        json.dump({"schema_version": "1", "run": {"id": "r", "env": {}}, "rows": rows}, open(os.path.join(d, "results", "nvidia", "h200_dgxc_8x", "r.json"), "w"), indent=2)
json.dump({"version": 1, "excluded_shapes": 0, "include": cells, "source_sha": "s", "run_id": "7", "attempt": "2"}, open(os.path.join(work, "manifest.json"), "w"), indent=2)
PY
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
