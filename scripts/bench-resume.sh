#!/usr/bin/env bash
# The cost of a resumed sweep against the seed's retry (the failed shard rerun whole), on
# the local Slurm (scripts/local-slurm.sh): a 16-case shard killed with SIGKILL after about
# half its cases, then `opx run --resume`; and the same sweep run whole — side by side, in
# GPU-seconds from each run's case ledger (cases.json). The goal: the resume costs its
# share of the cases missing plus one allocation's fixed cost, within 5 %
# (over_proportional_pct ≤ 5).
#   usage: scripts/bench-resume.sh [RUNS]      (root; Debian's slurm packages installed)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
SLURM_CONF=$(scripts/local-slurm.sh start "${OPX_SLURM_DIR:-/tmp/opx-slurm}"); export SLURM_CONF
OPX_TEST_SLURM_CONF=$SLURM_CONF go test ./internal/shard -run '^$' -bench ResumeAgainstWholeRerun -benchtime 1x -count "$runs" |
  awk '/^Benchmark/ {
         for (i = 1; i <= NF; i++) m[$(i+1)] = $i
         printf "resume %6.2f GPU-s  whole %6.2f GPU-s  (%.2fx)  missing %.2f of the cases  fixed %.2f GPU-s  over proportional %+.2f %%\n",
           m["resume_gpu_s"], m["whole_gpu_s"], m["whole_gpu_s"] / m["resume_gpu_s"], m["missing/n"], m["fixed_gpu_s"], m["over_proportional_pct"]
       }
       /^(FAIL|ok)/ { print }'
