#!/bin/sh
# bench-compare.sh: what opx serve's /api/compare of two stored runs costs a team — the
# first answer (the two runs read and joined), then 200 requests 20 at a time — for each
# QUERY given (appended to /api/compare?base=nightly-1&new=nightly-2: "" for the default
# window, "&limit=all" for every case).
#
#   go run ./scripts/serve-bench -opx ./opx -db /tmp/c.db -runs 2 -cases 64000 -clusters 2 -seconds 1
#   scripts/bench-compare.sh ./opx /tmp/c.db "" "&limit=all"
#
# (serve-bench makes the store of two runs of 128,000 cases, then stops: two runs show no
# change to load.) OPX_BENCH_PORT moves the port (18777).
set -eu
[ $# -ge 3 ] || { echo "usage: $0 OPX DB QUERY..." >&2; exit 2; }
opx=$1 db=$2
shift 2
port=${OPX_BENCH_PORT:-18777}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for q in "$@"; do
  "$opx" serve --db "$db" --listen "127.0.0.1:$port" 2>/dev/null &
  pid=$!
  for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.2; done
  url="http://127.0.0.1:$port/api/compare?base=nightly-1&new=nightly-2$q"
  first=$(curl -fs -o "$out/first" -w '%{time_total}' "$url")
  seq 200 | xargs -P20 -I{} curl -fs -o /dev/null -w '%{time_total}\n' "$url" | sort -n > "$out/times"
  echo "query '$q': the first ${first} s ($(wc -c < "$out/first") bytes); 200 requests, 20 at a time: p50 $(sed -n 100p "$out/times") s, p95 $(sed -n 190p "$out/times") s; opx serve peak RSS $(awk '/VmHWM/ {print $2, $3}' "/proc/$pid/status")"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
