#!/usr/bin/env bash
# A private PostgreSQL on loopback, for the history store's tests and for trying
# `opx history --db postgres://…` without a server. Needs Debian's postgresql package
# (initdb, pg_ctl under /usr/lib/postgresql/*/bin).
#   scripts/local-postgres.sh start [DIR]   start (idempotent); prints the DSN
#   scripts/local-postgres.sh stop [DIR]    stop this instance
# Other PostgreSQL servers may run on the machine: this one has its own directory, port
# (OPX_POSTGRES_PORT, default 16919) and socket (in DIR), and stop stops only the server
# whose data directory is DIR. initdb refuses root, so as root the server runs as the
# unprivileged user opx-pg (created when missing) and DIR is given to it.
set -euo pipefail
cmd=${1:-start}
dir=${2:-${OPX_POSTGRES_DIR:-/tmp/opx-postgres}}
port=${OPX_POSTGRES_PORT:-16919}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] || { echo "local-postgres.sh: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
as=()
if [ "$(id -u)" = 0 ]; then
  id opx-pg >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin opx-pg
  as=(runuser -u opx-pg --)
fi
data=$dir/data
dsn="postgres://opx@127.0.0.1:$port/opx?sslmode=disable"

case "$cmd" in
stop)
  if [ -f "$data/postmaster.pid" ]; then "${as[@]}" "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true; fi
  exit 0 ;;
start) ;;
*) echo "usage: $0 start|stop [DIR]" >&2; exit 2 ;;
esac

if [ -f "$data/postmaster.pid" ] && "${as[@]}" "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
  echo "$dsn"; exit 0
fi
mkdir -p "$dir"
[ "${#as[@]}" = 0 ] || chown opx-pg "$dir"
if [ ! -f "$data/PG_VERSION" ]; then
  "${as[@]}" "$bin/initdb" -D "$data" -A trust -U opx --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
fi
# fsync off: a test server's data is thrown away; its own socket directory, loopback only
if ! "${as[@]}" "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 30 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null; then
  echo "local-postgres.sh: the server did not start (port $port taken? see $dir/server.log):" >&2
  tail -5 "$dir/server.log" >&2
  exit 1
fi
"${as[@]}" "$bin/psql" -h "$dir" -p "$port" -U opx -d postgres -qtAc "SELECT 1 FROM pg_database WHERE datname='opx'" | grep -q 1 ||
  "${as[@]}" "$bin/psql" -h "$dir" -p "$port" -U opx -d postgres -qc "CREATE DATABASE opx" >/dev/null
echo "$dsn"
