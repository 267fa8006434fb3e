#!/usr/bin/env bash
# Runs sluice's benches (upload, visuals) and the release test binaries on the NVIDIA H200
# device machine, repeatably. Two halves:
#
#   scripts/device-run.sh prepare [--head]
#                                      HERE, in the repo: downloads the Vulkan/EGL loader .debs
#                                      into .gl/, builds the release bench and test binaries
#                                      (from the working tree, or with --head from a clean
#                                      export of HEAD, which other people's unfinished edits
#                                      cannot break), runs the benches once here as a smoke test
#                                      and only then puts them into .device/ (bin/, tests.tsv,
#                                      manifest.txt, run.sh). Needs network access to Debian's
#                                      package registry. SLUICE_DEVICE_TESTS=0 leaves the
#                                      release test binaries out (benches only): all of them
#                                      are over the 64 MiB the device tool carries;
#                                      SLUICE_DEVICE_TESTS=paged,sluice_render,... keeps the
#                                      test binaries of those targets (tests/NAME.rs, a
#                                      crate's lib tests by its name) and no others;
#                                      SLUICE_DEVICE_BENCHES=0 leaves the benches out (then
#                                      run `remote tests`); SLUICE_DEVICE_BENCHES=frames,...
#                                      keeps only those benches (of upload, visuals, frames,
#                                      chunked, host_import, view), so that for example
#                                      `frames` and a few test binaries travel in one call.
#
#   scripts/device-run.sh remote [bench|tests|all|frames|chunked|host_import]
#                                      THERE, in the repo root copy on the device machine:
#                                      unpacks .gl/*.deb into / (only where no Vulkan/EGL loader
#                                      is installed), points Vulkan/EGL at the NVIDIA driver when
#                                      its files exist, prints nvidia-smi -L, runs the benches
#                                      (`upload-bench --bench` and `visuals-bench --bench`, as
#                                      cargo runs them) teeing to $OUT/bench.log and
#                                      $OUT/visuals.log, then (all, the default) every test
#                                      binary teeing to $OUT/tests.log. Exits non-zero if
#                                      any of them failed. `frames` runs only the frame-cost
#                                      breakdown (benches/frames.rs) into $OUT/frames.log;
#                                      `chunked` the virtual-texture bench (benches/chunked.rs)
#                                      into $OUT/chunked.log; `view` the viewer's bench
#                                      (crates/sluice-view/benches/view.rs) into $OUT/view.log;
#                                      `host_import` the host-memory import bench
#                                      (benches/host_import.rs) into $OUT/host_import.log.
#
# The device tool call (after `prepare` here; .gl and .device are ignored, so they must be
# carried):
#
#   run(kind="nvidia-h200", carry=[".gl", ".device"], timeout_s=600,
#       command="bash scripts/device-run.sh remote")
#
# What comes back: $OUT/bench.log, $OUT/visuals.log, $OUT/tests.log, $OUT/env.log.
#
# Environment (remote): SLUICE_BENCH_ITERS (bench iterations, default 15), SLUICE_BENCH_STRICT=1
# (a missed bench target fails the run), SLUICE_DEVICE_UNPACK=auto|always|never (loader .debs,
# default auto), SLUICE_DEVICE_BENCH_TIMEOUT / SLUICE_DEVICE_TESTS_TIMEOUT (seconds, defaults
# 300 for both benches together / 240, inside the tool's 600 s); the visuals bench also reads
# SLUICE_BENCH_MAX_VOLUME, SLUICE_BENCH_RAYMARCH_SIZE and SLUICE_BENCH_RAYMARCH_ITERS. Without
# $OUT (a local try) logs go to ${TMPDIR:-/tmp}/sluice-device-out, never under .device/ (which
# travels).
#
# Locally, `remote` runs on whatever Vulkan driver is here (lavapipe), e.g.
#   SLUICE_BENCH_ITERS=3 bash scripts/device-run.sh remote
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# scripts/device-run.sh and its snapshot .device/device-run.sh both sit one below the root.
root="$(cd "$here/.." && pwd)"
cd "$root"

tool=device-run
# shellcheck source=device-common.sh
source "$here/device-common.sh"

prepare() {
  local from=tree
  case "${1:-}" in
    --head) from=head ;;
    "") ;;
    *) die "prepare takes --head or nothing, not '$1'" ;;
  esac
  command -v cargo >/dev/null || die "cargo not found"
  command -v jq >/dev/null || die "jq not found (needed to read cargo's JSON messages)"
  [ "$(uname -m)" = x86_64 ] || die "the device machine is x86-64; build there instead of on $(uname -m)"

  # A misspelt bench name fails here, before minutes of building.
  local name
  case ",${SLUICE_DEVICE_BENCHES:-1}," in
    ,1, | ,0,) ;;
    *)
      for name in ${SLUICE_DEVICE_BENCHES//,/ }; do
        case "$name" in upload | visuals | frames | chunked | host_import | view) ;;
          *) die "SLUICE_DEVICE_BENCHES names '$name'; the benches are upload, visuals, frames, chunked, host_import and view" ;;
        esac
      done
      ;;
  esac

  keep_out_of_git .gl .device
  fetch_loaders

  # Build from the working tree (default) or, with --head, from a clean export of HEAD, so
  # that other people's half-made edits cannot end up in the binaries.
  local src="$root" commit
  commit="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
  if [ "$from" = head ]; then
    src="$(mktemp -d /tmp/sluice-head.XXXXXX)"
    git archive HEAD | tar -x -C "$src"
    # Dependencies are shared with the working tree's builds.
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
  elif ! git diff --quiet HEAD 2>/dev/null; then
    commit="$commit (plus uncommitted changes)"
  fi
  echo "== building release binaries from $src ($commit)"
  # Everything goes to a staging folder, swapped in only when complete and smoke-tested.
  local stage msgs
  stage="$(mktemp -d /tmp/sluice-device.XXXXXX)"
  msgs="$(mktemp)"
  mkdir -p "$stage/bin"
  # SLUICE_DEVICE_BENCHES=0: test binaries only (the benches take ~48 MB of the 64 MiB).
  if [ "${SLUICE_DEVICE_BENCHES:-1}" != 0 ]; then
    (cd "$src" && cargo bench --bench upload --bench visuals --bench frames --bench chunked \
      --bench host_import --no-run --message-format=json-render-diagnostics) >"$msgs"
    (cd "$src" && cargo bench -p sluice-view --bench view --no-run \
      --message-format=json-render-diagnostics) >>"$msgs"
    local bench name
    local keep=",${SLUICE_DEVICE_BENCHES:-1},"
    for name in upload visuals frames chunked host_import view; do
      case "$keep" in ,1,) ;; *",$name,"*) ;; *) continue ;; esac
      bench="$(jq -r --arg name "$name" \
        'select(.reason == "compiler-artifact" and .target.name == $name
                and (.target.kind | index("bench")) and .executable != null)
         | .executable' "$msgs" | tail -n1)"
      [ -n "$bench" ] && [ -x "$bench" ] || die "$name bench executable not found in cargo's messages"
      cp "$bench" "$stage/bin/$name-bench"
    done
  fi

  : >"$stage/tests.tsv"
  if [ "${SLUICE_DEVICE_TESTS:-1}" = 0 ]; then
    # Benches only: the release test binaries (45 of them, ~225 MB gzipped) no longer fit
    # the 64 MiB the device tool carries.
    rm -f "$msgs"
  else
  (cd "$src" && cargo test --release --workspace --no-run --message-format=json-render-diagnostics) >"$msgs"
  # One line per test binary: stable name, package folder relative to the root (cargo runs
  # each test binary there).
  jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
         | [(.target.kind | join("-")), .target.name,
            (.manifest_path | sub("/Cargo.toml$"; "")), .executable] | @tsv' "$msgs" >"$msgs.tsv"
  : >"$stage/tests.tsv"
  local kind dir exe stable rel
  local only=",${SLUICE_DEVICE_TESTS:-1},"
  while IFS=$'\t' read -r kind name dir exe; do
    # SLUICE_DEVICE_TESTS=a,b: only the test binaries of those targets (all of them no
    # longer fit the 64 MiB carried).
    case "$only" in ,1,) ;; *",$name,"*) ;; *) continue ;; esac
    stable="test-${name}-${kind}"
    rel="${dir#"$src"}"
    rel="${rel#/}"
    cp "$exe" "$stage/bin/$stable"
    printf '%s\t%s\n' "$stable" "${rel:-.}" >>"$stage/tests.tsv"
  done <"$msgs.tsv"
  rm -f "$msgs" "$msgs.tsv"
  [ -s "$stage/tests.tsv" ] || die "no test binaries found in cargo's messages"
  fi

  # Debug info out, symbols kept (backtraces still name functions): a smaller transfer.
  strip --strip-debug "$stage"/bin/* 2>/dev/null || true

  # A snapshot of this script beside the binaries it built, and the entry point.
  cp "$here/device-run.sh" "$here/device-common.sh" "$stage/"
  cat >"$stage/run.sh" <<'EOF'
#!/usr/bin/env bash
# Written by `scripts/device-run.sh prepare`: runs the remote half with the script snapshot
# that built these binaries. Usage: bash .device/run.sh [bench|tests|all]
exec bash "$(dirname "${BASH_SOURCE[0]}")/device-run.sh" remote "$@"
EOF
  chmod 755 "$stage" "$stage/run.sh" "$stage/device-run.sh" "$stage/device-common.sh"
  {
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $commit"
    echo "root: $src"
    echo "rustc: $(rustc --version)"
  } >"$stage/manifest.txt"
  if [ "$from" = head ]; then rm -rf "$src"; fi

  # One quick pass of each bench on this machine's GPU or lavapipe: a binary that fails here
  # would only waste device time. SLUICE_DEVICE_SMOKE=0 skips it.
  if [ "${SLUICE_DEVICE_SMOKE:-1}" != 0 ] && [ "${SLUICE_DEVICE_BENCHES:-1}" != 0 ]; then
    for name in upload visuals frames; do
      # Only the benches that were kept (SLUICE_DEVICE_BENCHES=frames,...).
      [ -x "$stage/bin/$name-bench" ] || continue
      echo "== smoke run of the $name bench here (1 iteration)"
      if ! SLUICE_BENCH_ITERS=1 SLUICE_BENCH_WARMUP=0 SLUICE_BENCH_RAYMARCH_ITERS=1 \
        SLUICE_BACKEND="${SLUICE_BACKEND:-vulkan}" \
        "$stage/bin/$name-bench" --bench >"$stage/smoke.log" 2>&1; then
        tail -n 30 "$stage/smoke.log" >&2
        die "the $name bench failed its smoke run; .device left as it was (new build in $stage)"
      fi
      grep -A 30 '^summary' "$stage/smoke.log" || true
      rm -f "$stage/smoke.log"
    done
  fi
  # gzip shrinks what travels to about a third (the remote half unpacks it).
  gzip -9 "$stage"/bin/*
  rm -rf .device
  mv "$stage" .device

  echo "== what travels with carry [\".gl\", \".device\"]"
  ls -l .device/bin
  cat .device/tests.tsv
  du -sh .gl .device
  check_travel_size .gl .device
  git status --short --ignored .gl .device
}

remote() {
  local what="${1:-all}"
  case "$what" in bench | tests | all | frames | chunked | host_import | view) ;; *) die "remote takes bench, tests, all, frames, chunked, host_import or view, not '$what'" ;; esac
  local name f
  # Binaries travel gzipped: unpack them next to themselves.
  for f in .device/bin/*.gz; do
    [ -e "$f" ] || continue
    gunzip -c "$f" >"${f%.gz}" && chmod 755 "${f%.gz}" && rm -f "$f"
  done
  # Each mode checks for the benches it runs: `tests` needs none (SLUICE_DEVICE_BENCHES=0
  # builds none), `frames` only the frames bench, `bench` and `all` upload and visuals.
  local needs=""
  case "$what" in bench | all) needs="upload visuals" ;; frames) needs="frames" ;; esac
  for name in $needs; do
    [ -x ".device/bin/$name-bench" ] || die ".device/bin/$name-bench missing: run 'prepare' here (SLUICE_DEVICE_BENCHES keeps it) and carry .device"
  done
  local out="${OUT:-${TMPDIR:-/tmp}/sluice-device-out}"
  mkdir -p "$out"

  # Loaders: the device image has none; the carried .debs are unpacked into / then.
  setup_loaders
  export SLUICE_BACKEND="${SLUICE_BACKEND:-vulkan}"
  export RUST_BACKTRACE="${RUST_BACKTRACE:-1}"

  # Tests built with absolute paths (env!("CARGO_MANIFEST_DIR")) find the tree at the
  # build root: on the device machine ($OUT set), a link from there to this copy.
  local build_root
  build_root="$(sed -n 's/^root: //p' .device/manifest.txt 2>/dev/null || true)"
  if [ -n "${OUT:-}" ] && [ -n "$build_root" ] && [ ! -e "$build_root" ] && [ "$(id -u)" = 0 ]; then
    mkdir -p "$(dirname "$build_root")" && ln -s "$root" "$build_root"
  fi

  {
    echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -srm) on $(hostname)"
    cat .device/manifest.txt 2>/dev/null || true
    echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-<unset: system ICDs>}"
    echo "__EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-<unset>}"
    echo "SLUICE_BACKEND=$SLUICE_BACKEND SLUICE_BENCH_ITERS=${SLUICE_BENCH_ITERS:-<default>}"
    if command -v nvidia-smi >/dev/null; then nvidia-smi -L; else echo "nvidia-smi: not found"; fi
    ldconfig -p | grep -E 'libvulkan\.so\.1 |libEGL\.so\.1 ' || true
  } 2>&1 | tee "$out/env.log"

  local status=0
  if [ "$what" = chunked ]; then
    # The virtual-texture bench alone (benches/chunked.rs; SLUICE_BENCH_VOLUME_ONLY=1 for its
    # volume case only).
    [ -x .device/bin/chunked-bench ] || die ".device/bin/chunked-bench missing: run 'prepare' here"
    echo "== bench: chunked-bench --bench"
    set +e
    timeout "${SLUICE_DEVICE_BENCH_TIMEOUT:-300}" .device/bin/chunked-bench --bench 2>&1 | tee "$out/chunked.log"
    local rc=${PIPESTATUS[0]}
    set -e
    echo "device-run: logs in $out; chunked bench status $rc"
    return "$rc"
  fi
  if [ "$what" = view ]; then
    # The viewer's bench alone (crates/sluice-view/benches/view.rs: offscreen, no window).
    [ -x .device/bin/view-bench ] || die ".device/bin/view-bench missing: run 'prepare' here"
    echo "== bench: view-bench --bench"
    set +e
    timeout "${SLUICE_DEVICE_BENCH_TIMEOUT:-300}" .device/bin/view-bench --bench 2>&1 | tee "$out/view.log"
    local rc=${PIPESTATUS[0]}
    set -e
    echo "device-run: logs in $out; view bench status $rc"
    return "$rc"
  fi
  if [ "$what" = host_import ]; then
    # Host memory imported as device memory alone (benches/host_import.rs: HostImportSource,
    # HostBufferSource's replace, a bare wgpu copy from imported pages, the staged path).
    [ -x .device/bin/host_import-bench ] || die ".device/bin/host_import-bench missing: run 'prepare' here"
    echo "== bench: host_import-bench --bench"
    set +e
    timeout "${SLUICE_DEVICE_BENCH_TIMEOUT:-300}" .device/bin/host_import-bench --bench 2>&1 | tee "$out/host_import.log"
    local rc=${PIPESTATUS[0]}
    set -e
    echo "device-run: logs in $out; host_import bench status $rc"
    return "$rc"
  fi
  if [ "$what" = frames ]; then
    # The frame-cost breakdown alone (benches/frames.rs).
    echo "== bench: frames-bench --bench"
    set +e
    timeout "${SLUICE_DEVICE_BENCH_TIMEOUT:-300}" .device/bin/frames-bench --bench 2>&1 | tee "$out/frames.log"
    local rc=${PIPESTATUS[0]}
    set -e
    echo "device-run: logs in $out; frames bench status $rc"
    return "$rc"
  fi
  if [ "$what" != tests ]; then
    # Both benches share one time budget.
    local bench_deadline=$((SECONDS + ${SLUICE_DEVICE_BENCH_TIMEOUT:-300}))
    local log
    for name in upload visuals; do
      # The upload bench keeps its log's old name.
      if [ "$name" = upload ]; then log="$out/bench.log"; else log="$out/$name.log"; fi
      local left=$((bench_deadline - SECONDS))
      if [ "$left" -le 0 ]; then
        echo "== bench $name-bench: not run, out of time" | tee "$log"
        status=1
        continue
      fi
      echo "== bench: $name-bench --bench"
      set +e
      timeout "$left" ".device/bin/$name-bench" --bench 2>&1 | tee "$log"
      local rc=${PIPESTATUS[0]}
      set -e
      echo "== bench exit status $rc" | tee -a "$log"
      [ "$rc" = 0 ] || status=1
    done
  fi

  if [ "$what" != bench ]; then
    : >"$out/tests.log"
    local deadline=$((SECONDS + ${SLUICE_DEVICE_TESTS_TIMEOUT:-240}))
    while IFS=$'\t' read -r name dir; do
      local left=$((deadline - SECONDS))
      if [ "$left" -le 0 ]; then
        echo "== $name: not run, out of time" | tee -a "$out/tests.log"
        status=1
        continue
      fi
      echo "== test binary $name (in $dir)" | tee -a "$out/tests.log"
      set +e
      # The interop tests and pipeline_cache's open and drop devices of their own
      # (`Interop::with_own_device`): NVIDIA's driver 580 can deadlock destroying one device
      # while another thread submits to a second, so they run one at a time (renderers and
      # `Interop`s otherwise share one device per adapter and run in parallel).
      local threads=()
      case "$name" in *interop* | *pipeline_cache*) threads=(--test-threads=1) ;; esac
      (cd "$dir" && CARGO_MANIFEST_DIR="$root/$dir" timeout "$left" "$root/.device/bin/$name" "${threads[@]}") \
        2>&1 | tee -a "$out/tests.log"
      local rc=${PIPESTATUS[0]}
      set -e
      echo "== $name exit status $rc" | tee -a "$out/tests.log"
      [ "$rc" = 0 ] || status=1
    done <.device/tests.tsv
  fi
  echo "device-run: logs in $out; overall status $status"
  return "$status"
}

case "${1:-}" in
  prepare)
    shift
    prepare "$@"
    ;;
  remote)
    shift
    remote "$@"
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d'
    exit 2
    ;;
esac
