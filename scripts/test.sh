#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: installs what the tests need (Debian
# packages), starts what they run against, runs go vet, go test and a short fuzz pass.
#   usage: scripts/test.sh            (as root, or with the packages already installed)
#   FUZZTIME=30s scripts/test.sh      (longer fuzzing)
set -euo pipefail
case "${1:-}" in
  -h|--help)
    cat <<'USAGE'
scripts/test.sh: the whole test suite, as CI runs it (.ci/run).
  Installs the Debian packages the tests use (as root), starts a private one-node Slurm, a
  private PostgreSQL for the history store and, when ../shared/thirdparty holds their
  sources, the real pyxis/enroot stack; then gofmt, go vet, staticcheck, deadcode, every
  test (a line per package as it finishes, then the counts and every skip's reason),
  compare's A/A test alone, and a short fuzz pass.
  It takes about 6 minutes on 2 cores once its packages are installed (the first run installs
  them), and listens on 127.0.0.1 only: Slurm on ports 16917 and 16918, PostgreSQL on 16919,
  the pyxis/enroot stack's Slurm and registry on 16927-16929 (`OPX_SLURMCTLD_PORT`,
  `OPX_SLURMD_PORT`, `OPX_POSTGRES_PORT` and `OPX_REAL_*_PORT` move them).
  FUZZTIME=30s scripts/test.sh   fuzz longer
USAGE
    exit 0 ;;
  "") ;;
  *) echo "test.sh: unknown argument $1 (see scripts/test.sh --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
missing_dev=()
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "test.sh: go is not installed (need go 1.26)" >&2; exit 1; }

# Debian packages the tests use: python3 for the differential tests against the seed; a
# real Slurm (slurmctld, slurmd, munge) for execute/finalize/recover; squashfs-tools;
# headless Chromium, which opens opx report's page; shellcheck, which actionlint runs over
# the workflow's scripts; xmllint, which validates the JUnit XML opx writes; jq, which the
# workflow's history step runs (its test runs that step).
declare -A pkg_of=([python3]=python3 [slurmctld]=slurmctld [slurmd]=slurmd [salloc]=slurm-client
                   [munged]=munge [mksquashfs]=squashfs-tools [chromium]=chromium [shellcheck]=shellcheck
                   [xmllint]=libxml2-utils [jq]=jq)
# PostgreSQL, for the history store's tests (initdb and pg_ctl are not on PATH: looked up below)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing_dev+=(postgresql)
# the real pyxis/enroot stack (scripts/real-stack.sh) builds enroot and pyxis from
# ../shared/thirdparty and runs them: a compiler, Slurm's headers, libbsd, and enroot's
# runtime tools (jq, curl, parallel, pigz, zstd, makeself, setcap, busybox for the images)
thirdparty=${OPX_THIRDPARTY:-../shared/thirdparty}
if [ -d "$thirdparty" ]; then
  pkg_of+=([gcc]=gcc [make]=make [jq]=jq [curl]=curl [parallel]=parallel [pigz]=pigz [zstd]=zstd [makeself]=makeself
           [setcap]=libcap2-bin [busybox]=busybox-static [hexdump]=bsdextrautils)
  [ -f /usr/include/slurm/spank.h ] || missing_dev+=(libslurm-dev)
  [ -f /usr/include/bsd/string.h ] || missing_dev+=(libbsd-dev)
fi
missing=("${missing_dev[@]}")
for cmd in "${!pkg_of[@]}"; do command -v "$cmd" >/dev/null || missing+=("${pkg_of[$cmd]}"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "test.sh: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" fonts-dejavu-core >/dev/null
fi

# a second, unprivileged local user: the tests that check opx never trusts another user's
# files (rank caches, image caches, stage bases) plant them as this user (runuser)
if [ "$(id -u)" = 0 ] && ! id opx-other >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin opx-other
fi

# the local Slurm the execute tests run against (stopped, with every job, on exit)
slurm_dir=$(mktemp -d /tmp/opx-test-slurm.XXXXXX)
trap 'scripts/local-slurm.sh stop "$slurm_dir" >/dev/null 2>&1 || true' EXIT
ctld_port=${OPX_SLURMCTLD_PORT:-16917} slurmd_port=${OPX_SLURMD_PORT:-16918}
echo "test.sh: starting a private Slurm on 127.0.0.1 (slurmctld port $ctld_port, slurmd port $slurmd_port, state in $slurm_dir)"
OPX_TEST_SLURM_CONF=$(OPX_SLURMCTLD_PORT=$ctld_port OPX_SLURMD_PORT=$slurmd_port scripts/local-slurm.sh start "$slurm_dir")
export OPX_TEST_SLURM_CONF OPX_REQUIRE_SLURM=1 OPX_REQUIRE_CHROMIUM=1 OPX_REQUIRE_SHELLCHECK=1 SLURM_CONF=$OPX_TEST_SLURM_CONF

# the private PostgreSQL the history store's tests run against (its own port and socket)
pg_dir=$(mktemp -d /tmp/opx-test-postgres.XXXXXX)
pg_port=${OPX_POSTGRES_PORT:-16919}
real_dir=
# on exit the services stop; their directories (state, logs) are removed when every test
# passed and kept, named, when one failed: the logs are the evidence. rm stays on their
# file system (a mount left inside one is not followed).
stop_services() {
  local rc=$?
  scripts/local-slurm.sh stop "$slurm_dir" >/dev/null 2>&1 || true
  scripts/local-postgres.sh stop "$pg_dir" >/dev/null 2>&1 || true
  if [ -n "$real_dir" ]; then scripts/real-stack.sh stop "$real_dir" >/dev/null 2>&1 || true; fi
  if [ "$rc" = 0 ]; then
    rm -rf --one-file-system "$slurm_dir" "$pg_dir" ${real_dir:+"$real_dir"}
  else
    echo "test.sh: kept the services' state and logs: $slurm_dir $pg_dir${real_dir:+ $real_dir}" >&2
  fi
}
trap stop_services EXIT
echo "test.sh: starting a private PostgreSQL on 127.0.0.1 (port $pg_port, data in $pg_dir)"
OPX_TEST_POSTGRES=$(OPX_POSTGRES_PORT=$pg_port scripts/local-postgres.sh start "$pg_dir")
export OPX_TEST_POSTGRES OPX_REQUIRE_POSTGRES=1

# the real pyxis/enroot stack, when its sources are here (its tests skip, saying so, when not)
if [ -d "$thirdparty" ]; then
  echo "test.sh: building and starting the real pyxis/enroot stack (scripts/real-stack.sh)"
  real_dir=$(mktemp -d /tmp/opx-test-real.XXXXXX)
  OPX_REAL_STACK_ENV=$(OPX_THIRDPARTY=$thirdparty scripts/real-stack.sh start "$real_dir")
  export OPX_REAL_STACK_ENV OPX_REQUIRE_REAL_STACK=1
else
  echo "test.sh: $thirdparty is absent: the real pyxis/enroot tests will skip"
fi

unformatted=$(gofmt -l cmd internal)
if [ -n "$unformatted" ]; then echo "test.sh: not gofmt-ed: $unformatted" >&2; exit 1; fi
echo "test.sh: downloading Go modules"
go mod download
echo "test.sh: go vet (compiles every package: a few minutes on a cold Go cache)"
go vet ./...
# staticcheck and deadcode, pinned in tools/go.mod (none of their dependencies in the
# product's): no finding, and no function that nothing but a test reaches (internal/testenv
# is the tests' own helpers)
echo "test.sh: staticcheck and deadcode"
go tool -modfile=tools/go.mod staticcheck ./...
dead=$(go tool -modfile=tools/go.mod deadcode -filter '^github.com/semianalysis/opx/(cmd/|internal/[^t]|internal/t[^e]|scripts/)' ./...)
if [ -n "$dead" ]; then echo "test.sh: code no command reaches (deadcode):" >&2; echo "$dead" >&2; exit 1; fi
echo "test.sh: go test ./... (the shard package, on the real Slurm and pyxis, takes the longest)"
aa='^TestCompareAAAndAKnownSlowdown$'
# one line per package as it finishes, then the counts and every skip's reason
go test -json -count=1 -skip "$aa" ./... | go run ./scripts/testsummary
# compare's false-positive rate is a measurement: it runs alone, on a quiet machine
echo "test.sh: compare's A/A test, alone"
go test -json -count=1 -run "$aa" ./internal/compare | go run ./scripts/testsummary -v

# fuzz each target briefly (go test -fuzz takes one target per run). New inputs are not
# minimized (-fuzzminimizetime 0): a minimization still running when -fuzztime ends fails
# the run with "context deadline exceeded"; a failing input is still written, unminimized.
FUZZTIME=${FUZZTIME:-5s}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
    # a worker still busy when -fuzztime ends can also fail the run with "context deadline
    # exceeded" on a loaded machine, with no failing input: that run is retried once
    for try in 1 2; do
      if out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 0 "$pkg" 2>&1); then break; fi
      if [ "$try" = 2 ] || ! grep -q 'context deadline exceeded' <<<"$out" || grep -q 'Failing input' <<<"$out"; then
        echo "$out"; exit 1
      fi
      echo "fuzz $pkg $target: deadline exceeded without a failing input; retrying once"
    done
    # a target whose cached corpus (GOCACHE/fuzz) takes longer than FUZZTIME to replay
    # checks what it replayed and fuzzes nothing new: say how far it got
    got=$(grep -o 'execs: [0-9]*' <<<"$out" | tail -1 || true)
    [ -n "$got" ] || got="replayed $(grep -o 'baseline coverage: [0-9]*/[0-9]*' <<<"$out" | tail -1 | cut -d' ' -f3 || true) inputs of its cached corpus, nothing new"
    echo "fuzz $pkg $target ($FUZZTIME): $got"
  done
done
echo "test.sh: all tests passed"
