#!/usr/bin/env bash
# Runs the peer comparison (pygfx 0.17, VisPy 0.17 and sluice side by side, the harness of
# ../shared/peers) on the NVIDIA H200 device machine. Two halves, like scripts/device-cuda.sh:
#
#   scripts/device-peers.sh prepare    HERE, in the repo: reuses (or downloads) the Vulkan/EGL
#                                      loader .debs in .gl/; builds the release peers bench
#                                      (benches/peers.rs); downloads the peers' wheels for the
#                                      device's CPython 3.12 (the pins of the harness's
#                                      setup.sh; `pip download` for manylinux x86-64) and the
#                                      Debian libraries VisPy needs there (libfontconfig1 and
#                                      what it links: libfreetype6, libpng16-16, libexpat1,
#                                      libbrotli1); copies the harness (SLUICE_PEERS_DIR,
#                                      default ../shared/peers beside the repo, else
#                                      /work/shared/peers); all into .device-peers/.
#
#   scripts/device-peers.sh remote [ROUNDS]
#                                      THERE, in the repo root copy on the device machine:
#                                      unpacks .gl/*.deb into / where no loader is installed,
#                                      points Vulkan and EGL at the NVIDIA driver, installs the
#                                      wheels into a folder of their own (pip --no-index
#                                      --no-deps --target), unpacks the VisPy libraries into
#                                      another, and runs the harness's run.sh --rounds ROUNDS
#                                      (default 2) with the carried sluice bench. run.sh's
#                                      venv is a folder whose bin/python runs this python3 with
#                                      the wheels on PYTHONPATH (and the VisPy libraries on the
#                                      loader's path while VisPy runs); the copy's setup.sh
#                                      checks the pins instead of installing (no network).
#
# The device tool call (after `prepare` here; .gl and .device-peers are ignored, so they must
# be carried; `prepare` prints their sizes and fails over the 64 MiB limit):
#
#   run(kind="nvidia-h200", carry=[".gl", ".device-peers"], timeout_s=600,
#       command="bash scripts/device-peers.sh remote 2")
#
# What comes back in $OUT: env.log, peers.log (run.sh's progress), table.md (the side-by-side
# table compare.py prints) and results.tar.gz (results/: every run's JSON and stderr, and
# gpu_clocks.csv, nvidia-smi's SM clock every 100 ms while the rounds ran). compare.py's table
# has sluice's default cases; for the whole-redraw ratios with the copy-free paths and with
# ArraySource, and the clock each library's sections ran at, unpack results.tar.gz and run
# `python3 scripts/peers-ratios.py results`. Short GPU-bound cases take several times longer at
# the idle clock the GPU drops to after a second or two of light use: compare ratios only
# where sluice's and the faster peer's sections ran at the same clock.
#
# Environment (remote): SLUICE_PEERS_QUICK=1 (run.sh --quick: small sizes, a smoke test),
# SLUICE_PEERS_ONLY=a,b (only these sluice benchmarks; the peers run all of theirs),
# SLUICE_DEVICE_UNPACK=auto|always|never (loader .debs, default auto),
# SLUICE_PEERS_PYTHON (the interpreter, default python3), SLUICE_PEERS_VENV=DIR (use this
# existing venv of the pins instead of the carried wheels: a local dry run on a machine whose
# python is not 3.12). Without $OUT (a local try) everything goes to
# ${TMPDIR:-/tmp}/sluice-device-peers-out, never under .device-peers/ (which travels).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# scripts/device-peers.sh and its snapshot .device-peers/device-peers.sh both sit one below the root.
root="$(cd "$here/.." && pwd)"
cd "$root"

tool=device-peers
# shellcheck source=device-common.sh
source "$here/device-common.sh"

# The harness's pins (its setup.sh), less numpy, which the device has.
PINS=(pygfx==0.17.0 wgpu==0.32.0 rendercanvas==2.7.2 pylinalg==0.6.8 vispy==0.17.0
  PyOpenGL==3.1.10 cffi==2.1.1 pycparser==3.12 freetype-py==2.5.1 uharfbuzz==0.57.0
  hsluv==5.0.5 Jinja2==3.1.6 MarkupSafe==3.0.4 kiwisolver==1.5.1 packaging==26.4)
# VisPy imports libfontconfig at start-up; the device image has none.
VISPY_DEBS=(libfontconfig1 libfreetype6 libpng16-16 libexpat1 libbrotli1)
# The harness files run.sh needs.
HARNESS=(run.sh setup.sh bench_pygfx.py bench_vispy.py benchcommon.py compare.py)

harness_dir() {
  local d
  for d in "${SLUICE_PEERS_DIR:-}" "$root/../shared/peers" /work/shared/peers; do
    [ -n "$d" ] && [ -f "$d/run.sh" ] && { echo "$d"; return; }
  done
  die "the peers harness (run.sh, bench_pygfx.py, ...) not found: set SLUICE_PEERS_DIR"
}

prepare() {
  command -v cargo >/dev/null || die "cargo not found"
  command -v jq >/dev/null || die "jq not found (needed to read cargo's JSON messages)"
  command -v pip >/dev/null || command -v pip3 >/dev/null || die "pip not found"
  [ "$(uname -m)" = x86_64 ] || die "the device machine is x86-64; build there instead of on $(uname -m)"
  local harness pip
  harness="$(harness_dir)"
  pip="$(command -v pip || command -v pip3)"

  keep_out_of_git .gl .device-peers
  fetch_loaders --reuse

  rm -rf .device-peers
  mkdir -p .device-peers/bin .device-peers/wheels .device-peers/debs .device-peers/peers
  echo "== building the release peers bench"
  local msgs exe
  msgs="$(mktemp)"
  cargo bench --bench peers --no-run --message-format=json-render-diagnostics >"$msgs"
  exe="$(jq -r 'select(.reason == "compiler-artifact" and .target.name == "peers"
                       and (.target.kind | index("bench")) and .executable != null) | .executable' \
    "$msgs" | tail -n1)"
  rm -f "$msgs"
  [ -n "$exe" ] && [ -x "$exe" ] || die "the peers bench executable not found in cargo's messages"
  cp "$exe" .device-peers/bin/bench-peers
  strip --strip-debug .device-peers/bin/bench-peers 2>/dev/null || true
  gzip -9 .device-peers/bin/bench-peers

  echo "== downloading the peers' wheels for CPython 3.12, manylinux x86-64"
  "$pip" download --disable-pip-version-check -q --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .device-peers/wheels "${PINS[@]}"
  [ "$(ls .device-peers/wheels/*.whl | wc -l)" -eq "${#PINS[@]}" ] ||
    die "expected ${#PINS[@]} wheels, got $(ls .device-peers/wheels | wc -l)"

  echo "== downloading the libraries VisPy needs there"
  mkdir -p /tmp/amd64/partial
  local o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
  compgen -G "/tmp/amd64/*Packages*" >/dev/null || apt-get "${o[@]}" update -qq
  (cd .device-peers/debs && apt-get "${o[@]}" download "${VISPY_DEBS[@]}")

  for f in "${HARNESS[@]}"; do cp "$harness/$f" .device-peers/peers/; done
  # run.sh calls setup.sh to make its venv with pip; there the wheels are installed already
  # and no index is reachable: the copy's setup.sh checks the pins instead.
  {
    echo '#!/usr/bin/env bash'
    echo '# Written by scripts/device-peers.sh prepare in place of the harness setup.sh: checks the pins.'
    echo 'set -euo pipefail'
    echo '"$PEERS_VENV/bin/python" - <<PYCHK'
    echo 'import importlib.metadata as md'
    echo "pins = dict(p.split('==') for p in '''${PINS[*]}'''.split())"
    echo 'bad = {n: md.version(n) for n, v in pins.items() if md.version(n) != v}'
    echo 'assert not bad, f"pins not met: {bad}"'
    echo 'print("setup.sh: pins installed:", ", ".join(f"{n}=={v}" for n, v in pins.items()))'
    echo 'PYCHK'
  } >.device-peers/peers/setup.sh
  cp "$here/device-peers.sh" "$here/device-common.sh" .device-peers/
  {
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (plus uncommitted changes)')"
    echo "rustc: $(rustc --version)"
    echo "harness: $harness"
  } >.device-peers/manifest.txt

  echo "== what travels with carry [\".gl\", \".device-peers\"]"
  du -b .device-peers/bin/* .device-peers/wheels/* .device-peers/debs/* | sort -n
  du -sb .gl .device-peers
  check_travel_size .gl .device-peers
}

# Writes $1/bin/python: this machine's python3 with the wheels at $2 on PYTHONPATH and, while
# bench_vispy.py runs, the VisPy libraries at $3 on the loader's path.
fake_venv() {
  local venv="$1" site="$2" libs="$3" py
  py="$(command -v "${SLUICE_PEERS_PYTHON:-python3}")" || die "no ${SLUICE_PEERS_PYTHON:-python3} here"
  mkdir -p "$venv/bin"
  cat >"$venv/bin/python" <<EOF
#!/usr/bin/env bash
export PYTHONPATH="$site\${PYTHONPATH:+:\$PYTHONPATH}" PIP_NO_INDEX=1
case " \$* " in *bench_vispy.py*) export LD_LIBRARY_PATH="$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" ;; esac
exec "$py" "\$@"
EOF
  chmod +x "$venv/bin/python"
}

remote() {
  local rounds="${1:-2}"
  [[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "remote takes a number of rounds, not '$rounds'"
  [ -f .device-peers/bin/bench-peers.gz ] ||
    die ".device-peers/bin/bench-peers.gz missing: run 'prepare' here and carry .device-peers"
  local out="${OUT:-${TMPDIR:-/tmp}/sluice-device-peers-out}"
  local work="${TMPDIR:-/tmp}/sluice-device-peers"
  mkdir -p "$out"
  rm -rf "$work"
  mkdir -p "$work/bin" "$work/site" "$work/libs"
  gunzip -c .device-peers/bin/bench-peers.gz >"$work/bin/bench-peers"
  chmod +x "$work/bin/bench-peers"

  setup_loaders
  export SLUICE_BACKEND="${SLUICE_BACKEND:-vulkan}"
  # VisPy's EGL without a display (the NVIDIA vendor file is set by setup_loaders).
  export EGL_PLATFORM="${EGL_PLATFORM:-surfaceless}"
  export RUST_BACKTRACE="${RUST_BACKTRACE:-1}"

  local venv
  if [ -n "${SLUICE_PEERS_VENV:-}" ]; then
    [ -x "$SLUICE_PEERS_VENV/bin/python" ] || die "SLUICE_PEERS_VENV=$SLUICE_PEERS_VENV has no bin/python"
    venv="$SLUICE_PEERS_VENV"
  else
    local py
    py="$(command -v "${SLUICE_PEERS_PYTHON:-python3}")" || die "no ${SLUICE_PEERS_PYTHON:-python3} here"
    "$py" -m pip install --disable-pip-version-check -q --no-index --no-deps \
      --target "$work/site" .device-peers/wheels/*.whl
    mkdir -p "$work/libs-root"
    for f in .device-peers/debs/*.deb; do dpkg -x "$f" "$work/libs-root"; done
    # The shared objects of the unpacked packages, in one folder for the loader's path.
    find "$work/libs-root" -name '*.so*' -exec cp -P {} "$work/libs/" \;
    # VisPy looks libfontconfig up with ctypes.util.find_library, which finds nothing in a
    # folder of ours where the machine has no linker to ask: a sitecustomize on PYTHONPATH
    # answers from the unpacked folder where the usual lookup finds nothing.
    cat >"$work/site/sitecustomize.py" <<EOF
import ctypes.util, glob, os

_find = ctypes.util.find_library

def _find_here(name):
    found = _find(name)
    if found is None:
        hits = sorted(glob.glob(os.path.join("$work/libs", "lib%s.so*" % name)))
        if hits:
            found = hits[0]
    return found

ctypes.util.find_library = _find_here
EOF
    venv="$work/venv"
    fake_venv "$venv" "$work/site" "$work/libs"
  fi
  export PEERS_VENV="$venv"
  export XDG_CACHE_HOME="$work/cache"

  {
    echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -srm) on $(hostname)"
    cat .device-peers/manifest.txt 2>/dev/null || true
    echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-<unset: system ICDs>} __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-<unset>} EGL_PLATFORM=$EGL_PLATFORM"
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi -L
      nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv
    else
      echo "nvidia-smi: not found"
    fi
    "$venv/bin/python" -c 'import sys, numpy; print("python", sys.version.split()[0], "numpy", numpy.__version__)'
    "$venv/bin/python" -c 'import pygfx, wgpu; print("pygfx", pygfx.__version__, "wgpu", wgpu.__version__)'
    # VisPy finds libfontconfig on the loader's path, as when bench_vispy.py runs.
    LD_LIBRARY_PATH="$work/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "$venv/bin/python" -c 'import vispy; print("vispy", vispy.__version__)'
  } 2>&1 | tee "$out/env.log"

  # run.sh writes a JSON and a log per library and round: packed into one archive at the end,
  # since the device tool brings back at most 8 files.
  local args=(--rounds "$rounds" --out "$work/results")
  [ "${SLUICE_PEERS_QUICK:-0}" = 1 ] && args+=(--quick)
  local sluice=("$work/bin/bench-peers")
  [ -n "${SLUICE_PEERS_ONLY:-}" ] && sluice+=(--only "$SLUICE_PEERS_ONLY")
  # The GPU's clocks every 100 ms while the rounds run: NVIDIA lowers the SM clock to its
  # idle 345 MHz within about 1.5 s of light use (seen on an H100, 2026-12-05), so a short
  # case's time depends on what ran before it. Each run's sections carry their start and
  # end (start_unix_s, end_unix_s), and scripts/peers-ratios.py lines them up with this log.
  mkdir -p "$work/results"
  local clocks=""
  if command -v nvidia-smi >/dev/null; then
    TZ=UTC nvidia-smi --query-gpu=timestamp,clocks.sm,utilization.gpu --format=csv,noheader,nounits \
      -lms 100 >"$work/results/gpu_clocks.csv" 2>/dev/null &
    clocks=$!
  fi
  set +e
  bash .device-peers/peers/run.sh "${args[@]}" -- "${sluice[@]}" >"$out/table.md" 2>"$out/peers.log"
  local status=$?
  set -e
  [ -z "$clocks" ] || kill "$clocks" 2>/dev/null || true
  tar -czf "$out/results.tar.gz" -C "$work" results
  cat "$out/peers.log" "$out/table.md"
  echo "device-peers: results in $out (results.tar.gz: every run's JSON and stderr); status $status"
  return "$status"
}

case "${1:-}" in
  prepare) prepare ;;
  remote)
    shift
    remote "$@"
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d'
    exit 2
    ;;
esac
