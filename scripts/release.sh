#!/usr/bin/env bash
# The release target: static opx binaries for linux/amd64 and linux/arm64 (CGO_ENABLED=0,
# -trimpath), stamped with a version and the commit so `opx version` names them, plus
# SHA256SUMS. execute stages opx-linux-arm64 for GB200/GB300 shards when it sits beside
# the running binary.
#   usage: scripts/release.sh [VERSION]        (default: git describe, else "dev")
#   OPX_DIST=dir scripts/release.sh            (output directory, default dist/)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
version=${1:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
out=${OPX_DIST:-dist}
mkdir -p "$out"
pkg=github.com/semianalysis/opx/internal/version
for arch in amd64 arm64; do
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -X $pkg.Version=$version -X $pkg.Commit=$commit" \
    -o "$out/opx-linux-$arch" ./cmd/opx
  echo "release.sh: $out/opx-linux-$arch ($version, $commit)" >&2
done
(cd "$out" && sha256sum opx-linux-amd64 opx-linux-arm64 > SHA256SUMS)
