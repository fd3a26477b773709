#!/usr/bin/env bash
# opx serve under load (docs/serve.md): 20 concurrent clients loading the changes page and
# a series page, their p50/p95/p99 latencies and the server's peak RSS, over a generated
# SQLite store — a small one, then (with --scale) 100 nightly runs of the largest sweep
# (128,000 cases: 12.8 M points; generating it takes long) — and, with OPX_BENCH_POSTGRES
# set to a postgres:// URL of an empty database, over PostgreSQL too.
#   usage: scripts/bench-serve.sh [--scale]
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/opx-bench-serve.XXXXXX)
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$work/opx" ./cmd/opx
echo "== SQLite, 10 runs x 2,000 cases x 2 clusters"
go run ./scripts/serve-bench -opx "$work/opx" -db "$work/small.db" -runs 10 -cases 2000 -clusters 2
if [ "${1:-}" = --scale ]; then
  echo "== SQLite, 100 runs x 128,000 cases (the history-scale store)"
  go run ./scripts/serve-bench -opx "$work/opx" -db "${OPX_BENCH_SCALE_DB:-$work/scale.db}" -runs 100 -cases 128000 -clusters 1
fi
if [ -n "${OPX_BENCH_POSTGRES:-}" ]; then
  echo "== PostgreSQL, 10 runs x 2,000 cases x 2 clusters"
  go run ./scripts/serve-bench -opx "$work/opx" -db "$OPX_BENCH_POSTGRES" -runs 10 -cases 2000 -clusters 2
fi
