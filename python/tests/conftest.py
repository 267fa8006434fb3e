"""Shared fixtures: one renderer for the session (on the adapter SLUICE_BACKEND / SLUICE_ADAPTER
pick; lavapipe in CI), and a camera mapping world units to target pixels."""

import importlib
import os

import numpy as np
import pytest

import sluice


def need(module, why):
    """Imports `module` for a test that needs it. scripts/test-python.sh installs every such
    module and sets SLUICE_REQUIRE_PY_DEPS=1, so there (and in CI) a missing one fails the
    test; run by hand without it, the test says it skipped and why."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if os.environ.get("SLUICE_REQUIRE_PY_DEPS") == "1":
            pytest.fail(f"SLUICE_REQUIRE_PY_DEPS=1 but {module} is missing ({why}): {e}")
        pytest.skip(f"{module} is not installed ({why}): {e}", allow_module_level=True)


@pytest.fixture(scope="session")
def renderer():
    # Rendering tests never skip for want of an adapter: no adapter is a failure.
    return sluice.Renderer()


def pixel_camera(w, h):
    """World (0, 0)..(w, h) onto a w x h target, pixel for pixel."""
    return sluice.PanZoomCamera((w / 2, h / 2), 1.0)


def render(renderer, scene, w, h):
    target = renderer.create_target(w, h)
    return renderer.render(scene, pixel_camera(w, h), target)


def rgba_pattern(h, w, frame):
    """An (h, w, 4) uint8 RGBA image whose every pixel differs from its neighbours' and from
    the same pixel of another `frame`."""
    y, x = np.mgrid[0:h, 0:w]
    img = np.empty((h, w, 4), np.uint8)
    img[..., 0] = (x * 3 + y + 11 * frame) % 256
    img[..., 1] = (y * 5 + 7 + frame) % 256
    img[..., 2] = ((x ^ y) + 2 * frame) % 256
    img[..., 3] = 255
    return img


def gray_entry(values, clim=(0.0, 1.0), gamma=1.0, n=256):
    """The gray colormap's entry index for each value, computed with numpy the way the docs
    define it: t = clamp((v - lo) / (hi - lo), 0, 1) ** gamma; entry min(floor(t * n), n - 1)."""
    lo, hi = clim
    t = np.clip((np.asarray(values, np.float32) - lo) / (hi - lo), 0, 1) ** gamma
    return np.minimum(np.floor(t * n), n - 1).astype(np.uint8)


def centres(n=256):
    """Values at the centre of each of n colormap entries (far from rounding boundaries)."""
    return ((np.arange(n) + 0.5) / n).astype(np.float32)
