#!/usr/bin/env bash
# Runs sluice's CUDA interop tests, benchmark and examples on the NVIDIA H200 device machine,
# the same way scripts/device-run.sh runs the upload bench. Two halves:
#
#   scripts/device-cuda.sh prepare     HERE, in the repo: reuses (or downloads) the Vulkan/EGL
#                                      loader .debs in .gl/, builds with `--features cuda` the
#                                      release binaries of the interop tests (interop_cuda,
#                                      interop_vulkan, interop_cross_process), the interop
#                                      bench and the cuda_animation and cross_process examples,
#                                      and copies them, gzipped, into .device-cuda/ (bin/,
#                                      run.sh).
#
#   scripts/device-cuda.sh remote [tests|bench|examples|all|profile|diag]
#                                      THERE, in the repo root copy on the device machine:
#                                      unpacks .gl/*.deb into / where no loader is installed,
#                                      points Vulkan at the NVIDIA driver, prints nvidia-smi -L,
#                                      then runs (all, the default) the tests with
#                                      SLUICE_REQUIRE_CUDA=1 (a CUDA test that would skip fails
#                                      instead), the bench, and the examples. Exits non-zero
#                                      if any of them failed. `profile` runs the 4K part
#                                      of the bench (sluice frames in flight only, for
#                                      SLUICE_BENCH_PROFILE_SECS, default 8) under
#                                      `perf record` and writes the
#                                      report (where the CPU time of a frame goes) to
#                                      profile.txt; it needs `SLUICE_DEVICE_PERF=1` at
#                                      `prepare`, which carries this machine's perf and the
#                                      libraries it needs (with their own loader, so it runs
#                                      whatever the C library there). `diag` runs
#                                      the interop bench's timing diagnostics
#                                      (SLUICE_BENCH_ONLY=diag: how long CUDA takes to fill a
#                                      texture each way, frames in flight taken apart, a draw
#                                      from staging emulated) into diag.log.
#
# The device tool call (after `prepare` here; .gl and .device-cuda are ignored, so they must
# be carried):
#
#   run(kind="nvidia-h200", carry=[".gl", ".device-cuda"], timeout_s=600,
#       command="bash scripts/device-cuda.sh remote")
#
# What comes back in $OUT: env.log, tests.log, bench.log, examples.log and two PNG frames
# (first and last) of each CUDA animation: images, volume and mesh.
#
# Environment (remote): SLUICE_DEVICE_COMPARE_ARRAY_COPY=1 (run the image and volume bench
# parts a second time with CUDA filling textures by cuMemcpy3D), SLUICE_BENCH_ITERS (default 15), SLUICE_BENCH_STRICT=1 (a missed
# bench target fails the run), SLUICE_DEVICE_UNPACK=auto|always|never (loader .debs, default
# auto), SLUICE_DEVICE_TESTS_TIMEOUT / SLUICE_DEVICE_BENCH_TIMEOUT /
# SLUICE_DEVICE_EXAMPLES_TIMEOUT (seconds, defaults 240 / 180 / 90). Without $OUT (a local try)
# logs go to ${TMPDIR:-/tmp}/sluice-device-cuda-out, never under .device-cuda/ (which travels).
#
# Locally, `remote` runs on whatever is here: on a machine without CUDA the CUDA tests fail by
# design (SLUICE_REQUIRE_CUDA=1); `SLUICE_REQUIRE_CUDA=0 bash scripts/device-cuda.sh remote`
# shows them skipping instead.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# scripts/device-cuda.sh and its snapshot .device-cuda/device-cuda.sh both sit one below the root.
root="$(cd "$here/.." && pwd)"
cd "$root"

tool=device-cuda
# shellcheck source=device-common.sh
source "$here/device-common.sh"
TESTS=(interop_cuda interop_vulkan interop_cross_process provided_textures host_import host_buffer)
EXAMPLES=(cuda_animation cross_process)

# Prints the executable of each compiler artifact named $2 of kind $3 in cargo's JSON
# messages $1.
executables() {
  jq -r --arg name "$2" --arg kind "$3" \
    'select(.reason == "compiler-artifact" and .target.name == $name
            and (.target.kind | index($kind)) and .executable != null) | .executable' "$1" |
    tail -n1
}

prepare() {
  command -v cargo >/dev/null || die "cargo not found"
  command -v jq >/dev/null || die "jq not found (needed to read cargo's JSON messages)"
  [ "$(uname -m)" = x86_64 ] || die "the device machine is x86-64; build there instead of on $(uname -m)"

  keep_out_of_git .gl .device-cuda
  fetch_loaders --reuse

  echo "== building release binaries with --features cuda"
  rm -rf .device-cuda
  mkdir -p .device-cuda/bin
  local msgs exe
  msgs="$(mktemp)"
  local test_args=()
  for t in "${TESTS[@]}"; do test_args+=(--test "$t"); done
  cargo test --release --features cuda --no-run "${test_args[@]}" \
    --message-format=json-render-diagnostics >"$msgs"
  for t in "${TESTS[@]}"; do
    exe="$(executables "$msgs" "$t" test)"
    [ -n "$exe" ] && [ -x "$exe" ] || die "test executable $t not found in cargo's messages"
    cp "$exe" ".device-cuda/bin/test-$t"
  done
  # sluice-interop's own tests (the direct textures' exact contents, among others).
  cargo test --release --features cuda -p sluice-interop --lib --no-run \
    --message-format=json-render-diagnostics >"$msgs"
  exe="$(executables "$msgs" sluice_interop lib)"
  [ -n "$exe" ] && [ -x "$exe" ] || die "sluice-interop's test executable not found in cargo's messages"
  cp "$exe" .device-cuda/bin/unit-sluice_interop
  cargo bench --features cuda --bench interop --no-run --message-format=json-render-diagnostics >"$msgs"
  exe="$(executables "$msgs" interop bench)"
  [ -n "$exe" ] && [ -x "$exe" ] || die "bench executable not found in cargo's messages"
  cp "$exe" .device-cuda/bin/bench-interop
  local example_args=()
  for e in "${EXAMPLES[@]}"; do example_args+=(--example "$e"); done
  cargo build --release --features cuda "${example_args[@]}" --message-format=json-render-diagnostics >"$msgs"
  for e in "${EXAMPLES[@]}"; do
    exe="$(executables "$msgs" "$e" example)"
    [ -n "$exe" ] && [ -x "$exe" ] || die "example executable $e not found in cargo's messages"
    cp "$exe" ".device-cuda/bin/example-$e"
  done
  rm -f "$msgs"
  # Symbols stay (panics and backtraces name their places); gzip shrinks what travels to a
  # third.
  strip --strip-debug .device-cuda/bin/* 2>/dev/null || true
  gzip -9 .device-cuda/bin/*

  if [ "${SLUICE_DEVICE_PERF:-0}" = 1 ]; then
    local perf
    perf="$(command -v perf)" || die "SLUICE_DEVICE_PERF=1 needs perf here (apt-get install linux-perf)"
    mkdir -p .device-cuda/perf/lib
    cp "$perf" .device-cuda/perf/perf
    ldd "$perf" | awk '/=> \// {print $3} /^\t\/.*ld-linux/ {print $1}' | while read -r lib; do
      cp -L "$lib" .device-cuda/perf/lib/
    done
    tar -C .device-cuda -czf .device-cuda/perf.tgz perf
    rm -rf .device-cuda/perf
  fi

  cp "$here/device-cuda.sh" "$here/device-common.sh" .device-cuda/
  cat >.device-cuda/run.sh <<'EOF'
#!/usr/bin/env bash
# Written by `scripts/device-cuda.sh prepare`: runs the remote half with the script snapshot
# that built these binaries. Usage: bash .device-cuda/run.sh [tests|bench|examples|all]
exec bash "$(dirname "${BASH_SOURCE[0]}")/device-cuda.sh" remote "$@"
EOF
  chmod +x .device-cuda/run.sh .device-cuda/device-cuda.sh
  {
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (plus uncommitted changes)')"
    echo "rustc: $(rustc --version)"
  } >.device-cuda/manifest.txt

  echo "== what travels with carry [\".gl\", \".device-cuda\"]"
  ls -l .device-cuda/bin
  check_travel_size .gl .device-cuda
}

# Runs "$@" with a timeout, appending its output to log $1 (shifted off) and echoing it.
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
  case "$what" in tests | bench | examples | all | profile | diag) ;; *) die "remote takes tests, bench, examples, all, profile or diag, not '$what'" ;; esac
  compgen -G ".device-cuda/bin/*.gz" >/dev/null ||
    die ".device-cuda/bin is empty or missing: run 'prepare' here and carry .device-cuda"
  local out="${OUT:-${TMPDIR:-/tmp}/sluice-device-cuda-out}"
  mkdir -p "$out"
  local bin="${TMPDIR:-/tmp}/sluice-device-cuda-bin"
  rm -rf "$bin"
  mkdir -p "$bin"
  for f in .device-cuda/bin/*.gz; do
    gunzip -c "$f" >"$bin/$(basename "$f" .gz)"
    chmod +x "$bin/$(basename "$f" .gz)"
  done

  setup_loaders
  export SLUICE_BACKEND="${SLUICE_BACKEND:-vulkan}"
  export SLUICE_REQUIRE_CUDA="${SLUICE_REQUIRE_CUDA:-1}"
  export RUST_BACKTRACE="${RUST_BACKTRACE:-1}"

  {
    echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -srm) on $(hostname)"
    cat .device-cuda/manifest.txt 2>/dev/null || true
    echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-<unset: system ICDs>} SLUICE_BACKEND=$SLUICE_BACKEND SLUICE_REQUIRE_CUDA=$SLUICE_REQUIRE_CUDA"
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi -L
      nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv
    else
      echo "nvidia-smi: not found"
    fi
    ldconfig -p | grep -E 'libvulkan\.so\.1 |libcuda\.so' || true
  } 2>&1 | tee "$out/env.log"

  local status=0
  if [ "$what" = tests ] || [ "$what" = all ]; then
    : >"$out/tests.log"
    local deadline=$((SECONDS + ${SLUICE_DEVICE_TESTS_TIMEOUT:-240}))
    for t in "${TESTS[@]}"; do
      local left=$((deadline - SECONDS))
      if [ "$left" -le 0 ]; then
        echo "== test-$t: not run, out of time" | tee -a "$out/tests.log"
        status=1
        continue
      fi
      echo "== test-$t" | tee -a "$out/tests.log"
      run_logged "$out/tests.log" "$left" "$bin/test-$t" --nocapture --test-threads=1 || status=1
    done
    # sluice-interop's own tests (CUDA ones among them: the direct textures' exact contents).
    local left=$((deadline - SECONDS))
    echo "== unit-sluice_interop" | tee -a "$out/tests.log"
    if [ "$left" -gt 0 ]; then
      run_logged "$out/tests.log" "$left" "$bin/unit-sluice_interop" --test-threads=1 || status=1
    else
      echo "== unit-sluice_interop: not run, out of time" | tee -a "$out/tests.log"
      status=1
    fi
  fi
  if [ "$what" = diag ]; then
    : >"$out/diag.log"
    echo "== bench-interop, SLUICE_BENCH_ONLY=diag (timing diagnostics)" | tee -a "$out/diag.log"
    SLUICE_BENCH_ONLY=diag run_logged "$out/diag.log" "${SLUICE_DEVICE_BENCH_TIMEOUT:-180}" \
      "$bin/bench-interop" --bench || status=1
  fi
  if [ "$what" = bench ] || [ "$what" = all ]; then
    : >"$out/bench.log"
    echo "== bench-interop" | tee -a "$out/bench.log"
    run_logged "$out/bench.log" "${SLUICE_DEVICE_BENCH_TIMEOUT:-180}" "$bin/bench-interop" --bench || status=1
    if [ "${SLUICE_DEVICE_COMPARE_ARRAY_COPY:-0}" = 1 ]; then
      # The image and volume parts again, CUDA filling textures with cuMemcpy3D instead of
      # the surface-store kernel (see docs/gpu-interop.md).
      echo "== bench-interop, SLUICE_CUDA_ARRAY_COPY=memcpy" | tee -a "$out/bench.log"
      SLUICE_CUDA_ARRAY_COPY=memcpy SLUICE_BENCH_ONLY=image,volume run_logged "$out/bench.log" \
        "${SLUICE_DEVICE_BENCH_TIMEOUT:-180}" "$bin/bench-interop" --bench || status=1
    fi
  fi
  if [ "$what" = examples ] || [ "$what" = all ]; then
    : >"$out/examples.log"
    local frames="${TMPDIR:-/tmp}/sluice-cuda-frames"
    rm -rf "$frames"
    mkdir -p "$frames"
    for e in "${EXAMPLES[@]}"; do
      echo "== example-$e" | tee -a "$out/examples.log"
      SLUICE_OUT="$frames" run_logged "$out/examples.log" "${SLUICE_DEVICE_EXAMPLES_TIMEOUT:-90}" \
        "$bin/example-$e" || status=1
    done
    local pngs kind
    for kind in cuda_animation cuda_volume cuda_mesh; do
      pngs="$(ls "$frames"/"$kind"-*.png 2>/dev/null || true)"
      if [ -n "$pngs" ]; then
        cp "$(echo "$pngs" | head -n1)" "$(echo "$pngs" | tail -n1)" "$out/"
      fi
    done
  fi
  if [ "$what" = profile ]; then
    [ -f .device-cuda/perf.tgz ] || die "no perf carried: prepare with SLUICE_DEVICE_PERF=1"
    local p="${TMPDIR:-/tmp}/sluice-perf"
    rm -rf "$p"
    mkdir -p "$p"
    tar -C "$p" -xzf .device-cuda/perf.tgz
    local perf=("$p/perf/lib/ld-linux-x86-64.so.2" --library-path "$p/perf/lib" "$p/perf/perf")
    : >"$out/profile-bench.log"
    SLUICE_BENCH_ONLY=image SLUICE_BENCH_PROFILE_SECS="${SLUICE_BENCH_PROFILE_SECS:-8}" \
      run_logged "$out/profile-bench.log" "${SLUICE_DEVICE_BENCH_TIMEOUT:-180}" \
      "${perf[@]}" record -e cpu-clock -F 2000 --call-graph dwarf,8192 -o "$p/perf.data" \
      "$bin/bench-interop" --bench || status=1
    # The process's CPU time by function: its own, then with what it calls.
    "${perf[@]}" report -i "$p/perf.data" --no-children --sort dso,sym -q -g none \
      --percent-limit 0.3 >"$out/profile.txt" 2>&1 || status=1
    "${perf[@]}" report -i "$p/perf.data" --children --sort sym -q -g none \
      --percent-limit 0.5 >"$out/profile-children.txt" 2>&1 || status=1
  fi
  echo "device-cuda: logs in $out; overall status $status"
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
