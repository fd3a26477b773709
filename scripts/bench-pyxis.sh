#!/usr/bin/env bash
# Node overhead of a shard under REAL pyxis and enroot (scripts/real-stack.sh), warm image
# cache, side by side with the same steps done by hand:
#   opx:  `opx execute` of a one-case shard, wall time minus the harness's own run time
#         (opx bench run directly): allocation, the import step (a cache hit), the benchmark
#         step under pyxis, the checks that the allocation still runs, cleanup
#   hand: salloc --no-shell; srun --container-image=<the cached squash> with the stage
#         mounted, running true; scancel; poll squeue every 10 ms until the job is gone
# Prints medians and the ratio (goal: opx at most 1.2x the hand-run sequence).
#   usage: scripts/bench-pyxis.sh [RUNS]     (root; ../shared/thirdparty present)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
work=$(mktemp -d /tmp/opx-bench-pyxis.XXXXXX); trap 'rm -rf "$work"' EXIT
envfile=$(scripts/real-stack.sh start "${OPX_REAL_STACK_DIR:-/tmp/opx-real-stack}")
# shellcheck disable=SC1090
. "$envfile"
export SLURM_CONF=$OPX_REAL_SLURM_CONF PATH=$OPX_REAL_ENROOT:$PATH
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/opx" ./cmd/opx
mkdir -p "$work/tl" "$work/shared"
cat > "$work/tl/tiny.json" <<'JSON'
[{"type": "gemm", "args": {"m": 64, "n": 64, "k": 64, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []}]
JSON
cat > "$work/platforms.json" <<JSON
{"platforms": {"cluster:bench-pyxis": {"cluster": "bench_8x", "gpus_per_node": 8, "image_platform": "linux/amd64",
  "operator": {"partition": "debug", "stage_dir": "$work/shared"}}}}
JSON
printf '[nvidia.cpu]\nimage = "%s/opx/busybox:1"\n' "$OPX_REAL_REGISTRY" > "$work/containers.toml"
uid=$(id -u)
"$work/opx" plan --runner cluster:bench-pyxis --backends cpu --testlists tiny --world-sizes 1 --run-id 9 --attempt 1 \
  --source-sha s --platform-config "$work/platforms.json" --testlist-dir "$work/tl" --containers "$work/containers.toml" \
  --out "$work/m.json" > "$work/matrix.json"
id=$(sed 's/.*"id":"\([^"]*\)".*/\1/' "$work/matrix.json")
execute() {
  "$work/opx" execute --shard "$id" --run-id 9 --attempt 1 --source-sha s --runner-name bench --time-minutes 10 \
    --cleanup-seconds 60 --manifest "$work/m.json" --platform-config "$work/platforms.json" --output "$1" >/dev/null 2> "$1.err"
}
execute "$work/warm" # fills the image cache
squash=$(ls "$work"/shared/.operatorx-"$uid"/containers/*.sqsh)
now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
: > "$work/opx.ms"; : > "$work/hand.ms"; : > "$work/harness.ms"
for i in $(seq "$runs"); do
  s=$(now)
  OPERATORX_PARALLEL='{"dcp": 1, "dp": 1, "ep": 1, "tp": 1}' WORLD_SIZE=1 RANK=0 OPERATORX_TESTLISTS=tiny \
    "$work/opx" bench --strict --testlist-dir "$work/tl" --results-dir "$work/hr$i" >/dev/null
  echo $(( ($(now) - s) / 1000000 )) >> "$work/harness.ms"
  s=$(now)
  execute "$work/out$i"
  echo $(( ($(now) - s) / 1000000 )) >> "$work/opx.ms"
  s=$(now)
  job=$(salloc --no-shell --partition=debug --nodes=1 --gres=gpu:8 --ntasks-per-node=8 --exclusive --time=10 \
    --job-name=hand 2>&1 | sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p')
  srun --jobid="$job" --nodes=1 --ntasks=1 --ntasks-per-node=1 --kill-on-bad-exit=1 --chdir=/tmp \
    --container-image="$squash" --container-mounts="$work/shared:/opx" --container-workdir=/opx \
    --no-container-mount-home --no-container-entrypoint --container-writable --export=ALL true
  scancel "$job"
  while squeue -h -u "$uid" -o %A | grep -qx "$job"; do sleep 0.01; done
  echo $(( ($(now) - s) / 1000000 )) >> "$work/hand.ms"
done
h=$(median < "$work/harness.ms"); o=$(median < "$work/opx.ms"); b=$(median < "$work/hand.ms")
awk -v h="$h" -v o="$o" -v b="$b" -v n="$runs" 'BEGIN {
  printf "runs: %d (medians), real pyxis 0.24.0 + enroot 4.1.2, warm cache\n", n
  printf "opx execute wall:                 %7.0f ms\n", o
  printf "harness alone:                    %7.0f ms\n", h
  printf "opx node overhead (wall-h):       %7.0f ms\n", o - h
  printf "by hand (salloc/srun pyxis/scancel): %4.0f ms\n", b
  printf "ratio opx/hand:                   %7.2fx   (goal <= 1.2x)\n", (o - h) / b
}'
