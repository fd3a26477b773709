#!/usr/bin/env bash
# Control-plane overhead of `opx execute` on the local Slurm (scripts/local-slurm.sh), side
# by side with a bare shell sequence of the same Slurm calls:
#   opx:  execute wall time minus the harness's own run time (opx bench run directly)
#   bare: salloc --no-shell; srun true; scancel; poll squeue every 10 ms until the job is gone
# and the time from the benchmark step's end to the allocation confirmed gone (execute
# reports it on stderr). Prints medians and the ratio.
#   usage: scripts/bench-execute.sh [RUNS]      (root; Debian's slurm packages installed)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
work=$(mktemp -d /tmp/opx-bench-exec.XXXXXX); trap 'rm -rf "$work"' EXIT
SLURM_CONF=$(scripts/local-slurm.sh start "${OPX_SLURM_DIR:-/tmp/opx-slurm}"); export SLURM_CONF
# built as scripts/release.sh builds it: static, trimmed, stripped
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/opx" ./cmd/opx
mkdir -p "$work/tl" "$work/shared"
cat > "$work/tl/tiny.json" <<'JSON'
[{"type": "gemm", "args": {"m": 64, "n": 64, "k": 64, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []}]
JSON
cat > "$work/platforms.json" <<JSON
{"platforms": {"cluster:bench-loopback": {"cluster": "bench_8x", "gpus_per_node": 8, "image_platform": "linux/amd64",
  "operator": {"container": "none", "partition": "debug", "stage_dir": "$work/shared"}}}}
JSON
uid=$(id -u)
"$work/opx" plan --runner cluster:bench-loopback --backends cpu --testlists tiny --world-sizes 1 --run-id 9 --attempt 1 \
  --source-sha s --platform-config "$work/platforms.json" --testlist-dir "$work/tl" --out "$work/m.json" > "$work/matrix.json"
id=$(sed 's/.*"id":"\([^"]*\)".*/\1/' "$work/matrix.json")
now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
: > "$work/opx.ms"; : > "$work/bare.ms"; : > "$work/harness.ms"; : > "$work/release.ms"
for i in $(seq "$runs"); do
  # the harness alone, as the rank runs it
  s=$(now)
  OPERATORX_PARALLEL='{"dcp": 1, "dp": 1, "ep": 1, "tp": 1}' WORLD_SIZE=1 RANK=0 OPERATORX_TESTLISTS=tiny \
    "$work/opx" bench --strict --testlist-dir "$work/tl" --results-dir "$work/hr$i" >/dev/null
  echo $(( ($(now) - s) / 1000000 )) >> "$work/harness.ms"
  # opx execute
  s=$(now)
  "$work/opx" execute --shard "$id" --run-id 9 --attempt 1 --source-sha s --runner-name bench --time-minutes 10 \
    --cleanup-seconds 60 --manifest "$work/m.json" --platform-config "$work/platforms.json" --output "$work/out$i" \
    >/dev/null 2> "$work/err$i"
  echo $(( ($(now) - s) / 1000000 )) >> "$work/opx.ms"
  sed -n 's/.* \([0-9.]*\) s after the benchmark ended/\1/p' "$work/err$i" | awk '{print $1*1000}' >> "$work/release.ms"
  # the bare sequence
  s=$(now)
  job=$(salloc --no-shell --partition=debug --nodes=1 --gres=gpu:8 --ntasks-per-node=8 --exclusive --time=10 \
    --job-name=bare 2>&1 | sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p')
  srun --jobid="$job" --nodes=1 --ntasks=1 --ntasks-per-node=1 --kill-on-bad-exit=1 --chdir=/tmp --export=ALL true
  scancel "$job"
  while squeue -h -u "$uid" -o %A | grep -qx "$job"; do sleep 0.01; done
  echo $(( ($(now) - s) / 1000000 )) >> "$work/bare.ms"
done
h=$(median < "$work/harness.ms"); o=$(median < "$work/opx.ms"); b=$(median < "$work/bare.ms"); r=$(median < "$work/release.ms")
awk -v h="$h" -v o="$o" -v b="$b" -v r="$r" -v n="$runs" 'BEGIN {
  printf "runs: %d (medians)\n", n
  printf "opx execute wall:            %7.0f ms\n", o
  printf "harness alone:               %7.0f ms\n", h
  printf "opx control plane (wall-h):  %7.0f ms\n", o - h
  printf "bare salloc/srun/scancel:    %7.0f ms\n", b
  printf "ratio opx/bare:              %7.2fx   (goal <= 1.2x)\n", (o - h) / b
  printf "release confirmed after the benchmark ended: %.0f ms (goal <= 500 ms)\n", r
}'
