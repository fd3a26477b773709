#!/usr/bin/env bash
# The long form of the fault-injection test: RUNS executions of opx execute on the local
# Slurm, each ended at a random moment (allocation pending, salloc in flight, benchmark,
# cleanup, finalize) by SIGINT, SIGTERM, SIGHUP or SIGKILL, then checked for leaked
# allocations, lost rows and stages left behind. Prints the table of outcomes.
#   usage: scripts/fault-inject.sh [RUNS]      (default 40; OPX_FAULT_SEED=N replays a run)
# Uses $OPX_TEST_SLURM_CONF when set, else starts a local Slurm (root; scripts/local-slurm.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
runs=${1:-40}
if [ -z "${OPX_TEST_SLURM_CONF:-}" ]; then
  slurm_dir=$(mktemp -d /tmp/opx-fault-slurm.XXXXXX)
  trap 'scripts/local-slurm.sh stop "$slurm_dir" >/dev/null 2>&1 || true' EXIT
  OPX_TEST_SLURM_CONF=$(OPX_SLURMCTLD_PORT=16927 OPX_SLURMD_PORT=16928 scripts/local-slurm.sh start "$slurm_dir")
fi
export OPX_TEST_SLURM_CONF OPX_REQUIRE_SLURM=1 SLURM_CONF=$OPX_TEST_SLURM_CONF
table=$(mktemp /tmp/opx-fault-table.XXXXXX)
OPX_FAULT_RUNS=$runs OPX_FAULT_TABLE=$table go test -count=1 -timeout 60m -run '^TestFaultInjection$' ./internal/shard
cat "$table"
