#!/usr/bin/env bash
# Runs release test binaries many times on the device machine and, when one crashes or hangs,
# brings back where: the stacks of its threads. For failures that come once in tens of runs
# (the host_buffer binary on NVIDIA, 2026-12-05: a SIGSEGV in about 1 run of 20-45 and a hang
# of its first four tests in 3 of 30, never run alone or on lavapipe). Three halves:
#
#   scripts/device-stress.sh prepare TEST...
#                                      HERE: builds the release test binaries of the tests
#                                      named (tests/TEST.rs; `render_lib` for sluice-render's
#                                      unit tests), keeps their symbol tables (offsets are
#                                      turned into functions here afterwards), builds
#                                      scripts/backtrace-preload.c, reuses or downloads the
#                                      loader .debs in .gl/; all into .device-stress/.
#
#   scripts/device-stress.sh remote [RUNS] [THREADS] [HANG_S]
#                                      THERE: runs each binary RUNS times (default 40) with
#                                      --test-threads THREADS (default 4), the preload in, a run
#                                      past HANG_S seconds (default 20) counted as hung. A crash
#                                      keeps the run's output, which ends with the crashing
#                                      thread's stack; for a hang it lists every thread's name,
#                                      wait channel and kernel stack, sends each SIGUSR1 (the
#                                      preload prints its stack), then kills the run. Logs of
#                                      the first three failures per binary go to $OUT
#                                      (TEST-runN.log); a summary line per binary to stdout.
#                                      SLUICE_STRESS_FRESH_CACHES=1 empties the pipeline and
#                                      driver shader caches before every run.
#
#   scripts/device-stress.sh symbolize LOG [BINARY]
#                                      HERE: prints LOG with each "binary(+0xOFFSET)" frame
#                                      followed by the function (from the symbol table of the
#                                      binary carried, default the one of the log's test).
#
# The device tool call:
#
#   run(kind="nvidia-h200", carry=[".gl", ".device-stress"], timeout_s=600,
#       command="bash scripts/device-stress.sh remote 40 4")
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# scripts/device-stress.sh and its snapshot .device-stress/device-stress.sh both sit one
# below the root.
root="$(cd "$here/.." && pwd)"
cd "$root"

tool=device-stress
# shellcheck source=device-common.sh
source "$here/device-common.sh"

dir=.device-stress

prepare() {
  [ $# -gt 0 ] || die "name the tests to stress (tests/NAME.rs, or render_lib)"
  keep_out_of_git .gl "$dir"
  fetch_loaders --reuse
  rm -rf "$dir"
  mkdir -p "$dir/bin"
  local t exe args
  for t in "$@"; do
    if [ "$t" = render_lib ]; then
      args=(-p sluice-render --lib)
    else
      [ -f "tests/$t.rs" ] || die "no tests/$t.rs"
      args=(-p sluice --test "$t")
    fi
    # Cargo's errors go to the terminal; a failed build leaves `exe` empty.
    exe="$(cargo test --release --no-run "${args[@]}" --message-format=json-render-diagnostics |
      python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])' | tail -1 || true)"
    [ -n "$exe" ] || die "building the $t test binary failed"
    gzip -c "$exe" >"$dir/bin/$t.gz"
    echo "$t: $exe"
  done
  cc -shared -fPIC -O1 -o "$dir/backtrace-preload.so" scripts/backtrace-preload.c ||
    die "building the preload failed (a C compiler is needed here)"
  cp scripts/device-stress.sh scripts/device-common.sh "$dir/"
  du -b "$dir"/bin/*.gz "$dir/backtrace-preload.so"
  check_travel_size .gl "$dir"
}

# Every thread of the hung process `pid`: name, wait channel, kernel stack; then its stack
# from the preload.
dump_hung() {
  local pid=$1 t tid
  for t in /proc/"$pid"/task/*; do
    tid="$(basename "$t")"
    echo "--- thread $tid \"$(cat "$t/comm" 2>/dev/null)\" wchan=$(cat "$t/wchan" 2>/dev/null)"
    head -8 "$t/stack" 2>/dev/null || true
  done
  for t in /proc/"$pid"/task/*; do
    python3 -c 'import ctypes, sys; ctypes.CDLL(None).syscall(234, int(sys.argv[1]), int(sys.argv[2]), 10)' \
      "$pid" "$(basename "$t")" || true
    sleep 0.05
  done
  sleep 1
}

remote() {
  local runs="${1:-40}" threads="${2:-4}" hang="${3:-20}"
  local out="${OUT:-${TMPDIR:-/tmp}/sluice-device-out}"
  mkdir -p "$out" /tmp/stress
  setup_loaders
  export SLUICE_BACKEND="${SLUICE_BACKEND:-vulkan}"
  nvidia-smi -L 2>/dev/null || true
  local preload="$root/$dir/backtrace-preload.so" gz t bin i pid rc k failures crashes hangs
  [ -f "$preload" ] || die "no $preload: run prepare here and carry $dir"
  for gz in "$dir"/bin/*.gz; do
    t="$(basename "$gz" .gz)"
    bin="/tmp/stress/$t"
    gunzip -c "$gz" >"$bin"
    chmod +x "$bin"
    failures=0 crashes=0 hangs=0
    for i in $(seq 1 "$runs"); do
      if [ "${SLUICE_STRESS_FRESH_CACHES:-0}" = 1 ]; then
        rm -rf ~/.cache/sluice ~/.cache/nvidia ~/.nv
      fi
      # Appended to (the process and the hang dump write into one file).
      local log="/tmp/stress/$t-run$i.log"
      : >"$log"
      if [ "$t" = render_lib ]; then
        (cd crates/sluice-render && CARGO_MANIFEST_DIR="$root/crates/sluice-render" \
          LD_PRELOAD="$preload" exec "$bin" --test-threads "$threads") >>"$log" 2>&1 &
      else
        CARGO_MANIFEST_DIR="$root" LD_PRELOAD="$preload" "$bin" --test-threads "$threads" \
          >>"$log" 2>&1 &
      fi
      pid=$!
      for k in $(seq 1 $((hang * 4))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
      done
      if kill -0 "$pid" 2>/dev/null; then
        hangs=$((hangs + 1))
        { echo "=== hung after ${hang} s"; dump_hung "$pid"; } >>"$log" 2>&1
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        rc=hung
      else
        rc=0
        wait "$pid" || rc=$?
        [ "$rc" = 0 ] || [ "$rc" = 101 ] || crashes=$((crashes + 1))
      fi
      if [ "$rc" != 0 ]; then
        failures=$((failures + 1))
        echo "$t run $i: $rc"
        echo "  tests passed before: $(grep -cE '^test .* ok$' "$log" || true)"
        [ "$failures" -gt 3 ] || cp "$log" "$out/$t-run$i.log"
      fi
    done
    echo "== $t: $failures of $runs runs failed ($crashes died of a signal, $hangs hung), --test-threads $threads"
  done
}

symbolize() {
  local log="${1:?LOG}" bin="${2:-}"
  if [ -z "$bin" ]; then
    local t
    t="$(basename "$log" | sed 's/-run[0-9]*\.log$//')"
    bin=/tmp/device-stress-$t
    gunzip -c "$dir/bin/$t.gz" >"$bin"
  fi
  nm -C --defined-only "$bin" | awk '$2 ~ /^[tTwW]$/' | sort >/tmp/device-stress-syms
  python3 - "$log" "$(basename "$bin")" /tmp/device-stress-syms <<'EOF'
import bisect, re, sys
log, name, syms = sys.argv[1], sys.argv[2], sys.argv[3]
addrs, names = [], []
for line in open(syms):
    parts = line.rstrip("\n").split(" ", 2)
    if len(parts) == 3:
        addrs.append(int(parts[0], 16))
        names.append(parts[2])
frame = re.compile(r"\(\+0x([0-9a-f]+)\)")
for line in open(log, errors="replace"):
    print(line, end="")
    m = frame.search(line)
    if m and addrs and ("/stress/" in line or name in line):
        off = int(m.group(1), 16)
        i = bisect.bisect_right(addrs, off) - 1
        if i >= 0:
            print(f"      -> {names[i]} +{off - addrs[i]:#x}")
EOF
}

case "${1:-}" in
prepare) shift; prepare "$@" ;;
remote) shift; remote "$@" ;;
symbolize) shift; symbolize "$@" ;;
*) die "usage: $0 prepare TEST... | remote [RUNS] [THREADS] [HANG_S] | symbolize LOG [BINARY]" ;;
esac
