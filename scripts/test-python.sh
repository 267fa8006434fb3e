#!/usr/bin/env bash
# Builds the Python package (abi3 wheel, maturin) in a virtual environment, installs the wheel
# and runs python/tests with pytest. Used by .ci/run; runnable by hand.
#
# Environment: SLUICE_VENV (default /tmp/sluice-venv; created when missing, with maturin,
# numpy, pytest, zarr and dask), SLUICE_WHEEL_PROFILE (cargo profile of the wheel: dev, the default, shares
# the test build's cache; release for benchmarks). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${SLUICE_VENV:-/tmp/sluice-venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
# What the tests need beyond the wheel: zarr-python writes the Zarr fixtures, and a dask array
# is shown as it is. With them installed a test that misses one fails (SLUICE_REQUIRE_PY_DEPS).
"$venv/bin/python" -m pip install -q --disable-pip-version-check maturin numpy pytest \
  zarr==3.1.6 "dask[array]==2026.8.0"
export SLUICE_REQUIRE_PY_DEPS=1

wheels="target/python-wheels"
rm -rf "$wheels"
profile="${SLUICE_WHEEL_PROFILE:-dev}"
(cd python && "$venv/bin/maturin" build --quiet --profile "$profile" --interpreter "$venv/bin/python" --out "../$wheels")
"$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheels"/sluice-*.whl

export SLUICE_BACKEND="${SLUICE_BACKEND:-vulkan}"
# Run from the repository root with the venv's pytest (not `python -m pytest`, which would put
# the working directory first on sys.path): the tests import the installed wheel, not the
# sources in python/sluice.
# The window tests (test_view.py) need a display: without one, run under Xvfb when it is
# installed (.ci/run installs it), and make a window test that cannot open fail, not skip.
wrap=()
if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && command -v xvfb-run >/dev/null 2>&1; then
  # -noreset: Xvfb otherwise resets when its last client leaves and refuses the next one
  # meanwhile (see .ci/run).
  wrap=(xvfb-run -a -s "-screen 0 1280x1024x24 -noreset")
  export SLUICE_REQUIRE_WINDOW="${SLUICE_REQUIRE_WINDOW:-1}"
fi
status=0
"${wrap[@]}" "$venv/bin/pytest" -q -p no:cacheprovider python/tests "$@" || status=$?
if [ "$status" = 5 ]; then
  echo "test-python.sh: pytest collected no tests: python/tests is missing or broken" >&2
  exit 1
fi
exit "$status"
