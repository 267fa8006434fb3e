#!/usr/bin/env bash
# Runs the Python package's tests (the CUDA ones included, with PyTorch and CuPy), its
# benchmark and the PyTorch example on the NVIDIA H200 device machine. Two halves, like
# scripts/device-cuda.sh:
#
#   scripts/device-python.sh prepare   HERE, in the repo: reuses (or downloads) the Vulkan/EGL
#                                      loader .debs in .gl/, builds the abi3 wheel with
#                                      `--features cuda` (release) into .device-python/wheels,
#                                      with pytest's pure-Python wheels beside it (the device
#                                      machine reaches no package index).
#
#   scripts/device-python.sh remote [tests|bench|examples|all]
#                                      THERE, in the repo root copy: unpacks .gl/*.deb where no
#                                      loader is installed, installs the wheel into a folder on
#                                      PYTHONPATH for the machine's Python (3.11 or later, with
#                                      PyTorch, CuPy, numpy and pytest), then runs
#                                      python/tests with SLUICE_REQUIRE_CUDA=1 (a CUDA test that
#                                      would skip fails), python/bench/bench_python.py and
#                                      python/examples/torch_model_animation.py. Exits non-zero
#                                      if any failed.
#
# The device tool call (after `prepare` here; .gl and .device-python are ignored, so carry them):
#
#   run(kind="nvidia-h200", carry=[".gl", ".device-python"], timeout_s=600,
#       command="bash scripts/device-python.sh remote")
#
# What comes back in $OUT: env.log, tests.log, bench.log with bench.json, examples.log with a
# few PNG frames. Environment (remote): SLUICE_DEVICE_PYTHON (default python3),
# SLUICE_DEVICE_TESTS_TIMEOUT / SLUICE_DEVICE_BENCH_TIMEOUT / SLUICE_DEVICE_EXAMPLES_TIMEOUT
# (seconds, defaults 240 / 240 / 90). Without $OUT logs go to
# ${TMPDIR:-/tmp}/sluice-device-python-out.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

tool=device-python
# shellcheck source=device-common.sh
source "$here/device-common.sh"

prepare() {
  command -v cargo >/dev/null || die "cargo not found"
  [ "$(uname -m)" = x86_64 ] || die "the device machine is x86-64; build there instead of on $(uname -m)"
  keep_out_of_git .gl .device-python
  fetch_loaders --reuse
  local venv="${SLUICE_VENV:-/tmp/sluice-venv}"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check maturin numpy pytest
  rm -rf .device-python
  mkdir -p .device-python/wheels
  (cd python && "$venv/bin/maturin" build --quiet --release --features cuda \
    --interpreter "$venv/bin/python" --out ../.device-python/wheels)
  "$venv/bin/python" -m pip download -q --disable-pip-version-check --only-binary=:all: \
    -d .device-python/wheels pytest
  {
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')"
    ls .device-python/wheels
  } >.device-python/manifest.txt
  cat .device-python/manifest.txt
  check_travel_size .gl .device-python
}

run_logged() {
  local log="$1" limit="$2"
  shift 2
  set +e
  timeout "$limit" "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  echo "== exit status $rc: $*" | tee -a "$log"
  return "$rc"
}

remote() {
  local what="${1:-all}"
  case "$what" in tests | bench | examples | all) ;; *) die "remote takes tests, bench, examples or all, not '$what'" ;; esac
  compgen -G ".device-python/wheels/sluice-*.whl" >/dev/null ||
    die "no wheel in .device-python/wheels: run 'prepare' here and carry .device-python"
  local out="${OUT:-${TMPDIR:-/tmp}/sluice-device-python-out}"
  mkdir -p "$out"
  setup_loaders
  export SLUICE_BACKEND="${SLUICE_BACKEND:-vulkan}"
  export SLUICE_REQUIRE_CUDA="${SLUICE_REQUIRE_CUDA:-1}"
  export RUST_BACKTRACE="${RUST_BACKTRACE:-1}"

  local py="${SLUICE_DEVICE_PYTHON:-python3}"
  # The machine's python3 is itself a virtual environment (PyTorch, CuPy and numpy live in
  # its site-packages), and a venv made over it would not see them: install the wheels into a
  # folder of their own on PYTHONPATH instead, as the device notes advise.
  local site="${TMPDIR:-/tmp}/sluice-device-python-site"
  rm -rf "$site"
  "$py" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile \
    --target "$site" .device-python/wheels/sluice-*.whl
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  {
    echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -srm) on $(hostname)"
    cat .device-python/manifest.txt 2>/dev/null || true
    command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "nvidia-smi: not found"
    "$py" - <<'PY'
import sys, numpy, sluice
print("python", sys.version.split()[0], "numpy", numpy.__version__, "sluice CUDA support", sluice.CUDA_SUPPORT)
for name in ("torch", "cupy"):
    try:
        m = __import__(name)
        print(name, m.__version__)
    except Exception as e:
        print(name, "unavailable:", e)
print(sluice.Renderer().adapter_info())
PY
  } 2>&1 | tee "$out/env.log"

  local status=0
  if [ "$what" = tests ] || [ "$what" = all ]; then
    : >"$out/tests.log"
    run_logged "$out/tests.log" "${SLUICE_DEVICE_TESTS_TIMEOUT:-240}" \
      "$py" -m pytest -v -p no:cacheprovider python/tests || status=1
  fi
  if [ "$what" = bench ] || [ "$what" = all ]; then
    : >"$out/bench.log"
    # SLUICE_PEERS_DIR: a folder whose results/ holds the peers' JSON from a run on this
    # machine (scripts/device-peers.sh), the ceiling of the peer rows.
    local peers=()
    [ -n "${SLUICE_PEERS_DIR:-}" ] && peers=(--peers "$SLUICE_PEERS_DIR")
    run_logged "$out/bench.log" "${SLUICE_DEVICE_BENCH_TIMEOUT:-240}" \
      "$py" python/bench/bench_python.py --out "$out/bench.json" "${peers[@]}" || status=1
  fi
  if [ "$what" = examples ] || [ "$what" = all ]; then
    : >"$out/examples.log"
    run_logged "$out/examples.log" "${SLUICE_DEVICE_EXAMPLES_TIMEOUT:-90}" \
      "$py" python/examples/torch_model_animation.py 120 "$out" || status=1
  fi
  return "$status"
}

case "${1:-}" in
  prepare) prepare ;;
  remote) shift; remote "$@" ;;
  *) die "usage: scripts/device-python.sh prepare | remote [tests|bench|examples|all]" ;;
esac
