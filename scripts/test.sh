#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: installs what the tests need (Debian
# packages), starts what they run against, runs go vet, go test and a short fuzz pass.
#   usage: scripts/test.sh            (as root, or with the packages already installed)
#   FUZZTIME=30s scripts/test.sh      (longer fuzzing)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "test.sh: go is not installed (need go 1.26)" >&2; exit 1; }

# Debian packages the tests use: python3 for the differential tests against the seed.
need=(python3)
missing=()
for p in "${need[@]}"; do command -v "$p" >/dev/null || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "test.sh: installing ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

go vet ./...
go test -count=1 ./...

# fuzz each target briefly (go test -fuzz takes one target per run)
FUZZTIME=${FUZZTIME:-5s}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
    echo "fuzz $pkg $target ($FUZZTIME)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" >/dev/null
  done
done
echo "test.sh: all tests passed"
