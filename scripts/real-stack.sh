#!/usr/bin/env bash
# The real pyxis/enroot stack the real-stack tests run against, built and started on this
# machine: NVIDIA enroot 4.1.2 and 3.5.0 and pyxis 0.24.0 built from the release sources in
# ../shared/thirdparty (checksums verified), a one-node Slurm with the pyxis plugin
# (scripts/local-slurm.sh), and go-containerregistry's registry on loopback serving small
# busybox images built offline (scripts/testregistry). Needs root and Debian's packages
# (scripts/test.sh installs them).
#   scripts/real-stack.sh start [DIR]   build what is missing, start what is not running,
#                                       print the path of DIR/env (shell assignments)
#   scripts/real-stack.sh stop [DIR]    stop what start started (by pid), nothing else
# Ports: OPX_REAL_SLURMCTLD_PORT (16927), OPX_REAL_SLURMD_PORT (16928),
# OPX_REAL_REGISTRY_PORT (16929). Third-party sources: OPX_THIRDPARTY (../shared/thirdparty).
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-start}
dir=${2:-${OPX_REAL_STACK_DIR:-/tmp/opx-real-stack}}
thirdparty=${OPX_THIRDPARTY:-../shared/thirdparty}
ctl_port=${OPX_REAL_SLURMCTLD_PORT:-16927}
d_port=${OPX_REAL_SLURMD_PORT:-16928}
reg_port=${OPX_REAL_REGISTRY_PORT:-16929}
say() { echo "real-stack: $*" >&2; }

registry_alive() {
  local pid
  pid=$(cat "$dir/registry.pid" 2>/dev/null) || return 1
  { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null | grep -qF -- "$dir/bin/testregistry" &&
    curl -sf "http://127.0.0.1:$reg_port/v2/" >/dev/null
}

stop() {
  if registry_alive; then kill "$(cat "$dir/registry.pid")" 2>/dev/null || true; fi
  rm -f "$dir/registry.pid"
  if [ -d "$dir/slurm" ]; then scripts/local-slurm.sh stop "$dir/slurm" || true; fi
}

case "$cmd" in
stop) stop; exit 0 ;;
start) ;;
*) echo "usage: $0 start|stop [DIR]" >&2; exit 2 ;;
esac

[ -d "$thirdparty" ] || { say "$thirdparty is absent: nothing to build"; exit 1; }
mkdir -p "$dir/src" "$dir/bin"
chmod 755 "$dir"

# 1. enroot and pyxis from the release tarballs, checksums first
(cd "$thirdparty" && sha256sum --quiet -c SHA256SUMS) || { say "checksums of $thirdparty do not match SHA256SUMS"; exit 1; }
printf '#include <stddef.h>\nsize_t strlcpy(char *, const char *, size_t);\nsize_t strlcat(char *, const char *, size_t);\n' > "$dir/src/strl.h"
for v in 4.1.2 3.5.0; do
  prefix=$dir/enroot-$v
  if [ ! -x "$prefix/bin/enroot" ]; then
    say "building enroot $v"
    rm -rf "$dir/src/enroot-$v"
    tar -xzf "$thirdparty/enroot-$v.tar.gz" -C "$dir/src"
    (cd "$dir/src/enroot-$v"
     # the tarball has no git submodules: Debian's makeself stands in for the pinned one,
     # and glibc 2.36 lacks strlcpy/strlcat (libbsd has them)
     install -D -m 755 /usr/bin/makeself deps/dist/makeself/bin/enroot-makeself
     make FORCE_GLIBC=1 -o deps prefix="$prefix" CPPFLAGS="-include $dir/src/strl.h" LDLIBS=-lbsd install setcap >"$dir/src/enroot-$v.log" 2>&1) ||
      { say "enroot $v did not build; see $dir/src/enroot-$v.log"; tail -5 "$dir/src/enroot-$v.log" >&2; exit 1; }
  fi
  # per-user state side by side under one sticky directory; plain HTTP to the loopback registry
  mkdir -p "$dir/state" "$prefix/etc/enroot/enroot.conf.d"
  chmod 1777 "$dir/state"
  cat > "$prefix/etc/enroot/enroot.conf.d/opx-real-stack.conf" <<CONF
ENROOT_RUNTIME_PATH $dir/state/runtime-$v-\${UID}
ENROOT_CACHE_PATH $dir/state/cache-$v-\${UID}
ENROOT_DATA_PATH $dir/state/data-$v-\${UID}
ENROOT_ALLOW_HTTP yes
CONF
done
if [ ! -f "$dir/pyxis/lib/slurm/spank_pyxis.so" ]; then
  say "building pyxis 0.24.0"
  rm -rf "$dir/src/pyxis-0.24.0"
  tar -xzf "$thirdparty/pyxis-0.24.0.tar.gz" -C "$dir/src"
  (cd "$dir/src/pyxis-0.24.0" && make && make install prefix="$dir/pyxis") >"$dir/src/pyxis.log" 2>&1 ||
    { say "pyxis did not build; see $dir/src/pyxis.log"; exit 1; }
fi
mkdir -p "$dir/pyxis-run"
echo "required $dir/pyxis/lib/slurm/spank_pyxis.so runtime_path=$dir/pyxis-run" > "$dir/plugstack.conf"

# 2. Slurm with the pyxis plugin; slurmd finds enroot 4.1.2 first on its PATH
conf=$(OPX_SLURM_PLUGSTACK=$dir/plugstack.conf OPX_SLURMD_PATH=$dir/enroot-4.1.2/bin \
  OPX_SLURMCTLD_PORT=$ctl_port OPX_SLURMD_PORT=$d_port scripts/local-slurm.sh start "$dir/slurm")

# 3. the registry, with its images
if ! registry_alive; then
  go build -o "$dir/bin/testregistry" ./scripts/testregistry
  "$dir/bin/testregistry" -addr "127.0.0.1:$reg_port" -busybox /bin/busybox >"$dir/registry.log" 2>&1 &
  echo $! > "$dir/registry.pid"
  for _ in $(seq 100); do
    if grep -q "^127.0.0.1:$reg_port$" "$dir/registry.log" 2>/dev/null; then break; fi
    if ! kill -0 "$(cat "$dir/registry.pid")" 2>/dev/null; then say "the registry exited: $(cat "$dir/registry.log")"; exit 1; fi
    sleep 0.1
  done
  registry_alive || { say "the registry does not answer on 127.0.0.1:$reg_port"; exit 1; }
fi

cat > "$dir/env" <<ENV
OPX_REAL_STACK=$dir
OPX_REAL_SLURM_CONF=$conf
OPX_REAL_REGISTRY=127.0.0.1:$reg_port
OPX_REAL_ENROOT=$dir/enroot-4.1.2/bin
OPX_REAL_ENROOT_35=$dir/enroot-3.5.0/bin
ENV
echo "$dir/env"
