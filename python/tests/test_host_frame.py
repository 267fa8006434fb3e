"""HostFrame: a target read back into host pages the GPU writes itself (lavapipe has
VK_EXT_external_memory_host), seen as a read-only numpy array with no copy. Every pixel equals
the pattern drawn one texel per pixel (computed with numpy) and Renderer.read of the same
target (tolerance 0); padded rows (100 pixels wide: 400 bytes padded to 512), the staged frame,
and bad calls raising with the sizes."""

import numpy as np
import pytest

import sluice
from conftest import pixel_camera, rgba_pattern

pytestmark = pytest.mark.skipif(
    not hasattr(sluice, "HostFrame"), reason="GPU interop is Linux-only"
)


@pytest.fixture(scope="module")
def interop_renderer():
    return sluice.Renderer(interop=True)


pattern = rgba_pattern


def drawn(renderer, h, w, frame):
    """A target of h x w showing `pattern(h, w, frame)` one texel per pixel, and its source."""
    src = sluice.ArraySource(pattern(h, w, frame), channels=True)
    scene = sluice.Scene()
    scene.add(sluice.Image(src))
    target = renderer.create_target(w, h)
    renderer.draw(scene, pixel_camera(w, h), target)
    return target, src, scene


@pytest.mark.parametrize("h,w", [(48, 64), (37, 100)])
def test_frames_land_in_the_frames_pages(interop_renderer, h, w):
    target, src, scene = drawn(interop_renderer, h, w, 0)
    frame = sluice.HostFrame(target)
    assert frame.is_imported, frame.fallback_reason
    assert frame.fallback_reason is None
    assert frame.bytes_per_row == -(-w * 4 // 256) * 256
    first = None
    for n in range(3):
        src[:, :] = pattern(h, w, n)
        interop_renderer.draw(scene, pixel_camera(w, h), target)
        pixels = frame.read(interop_renderer, target)
        assert pixels.shape == (h, w, 4) and pixels.dtype == np.uint8
        assert not pixels.flags.writeable, "the frame's pages are read-only from numpy"
        assert pixels.base is frame, "the array views the frame's pages and keeps the frame"
        np.testing.assert_array_equal(pixels, pattern(h, w, n))
        np.testing.assert_array_equal(pixels, interop_renderer.read(target))
        if first is None:
            first = pixels
    # An array from an earlier read views the same pages: it shows the last frame.
    np.testing.assert_array_equal(first, pattern(h, w, 2))
    np.testing.assert_array_equal(frame.array, pattern(h, w, 2))


def test_an_array_keeps_its_frame_alive(interop_renderer):
    h, w = 32, 64
    target, _, _ = drawn(interop_renderer, h, w, 4)
    pixels = sluice.HostFrame(target).read(interop_renderer, target)
    import gc

    gc.collect()
    np.testing.assert_array_equal(pixels, pattern(h, w, 4))


def test_a_staged_frame_reads_the_same_pixels(interop_renderer):
    h, w = 37, 100
    target, _, _ = drawn(interop_renderer, h, w, 5)
    frame = sluice.HostFrame(width=w, height=h, staged=True)
    assert not frame.is_imported and "staged" in frame.fallback_reason
    assert frame.bytes_per_row == w * 4
    np.testing.assert_array_equal(frame.read(interop_renderer, target), pattern(h, w, 5))


def test_bad_frames_and_targets_raise_naming_the_sizes(interop_renderer):
    with pytest.raises(sluice.DeviceError, match="0 x 16"):
        sluice.HostFrame(width=0, height=16)
    with pytest.raises(ValueError, match="one of the two"):
        sluice.HostFrame()
    target = interop_renderer.create_target(32, 16)
    frame = sluice.HostFrame(width=16, height=32)
    before = frame.array.copy()
    with pytest.raises(sluice.DeviceError, match=r"16 x 32.*32 x 16"):
        frame.read(interop_renderer, target)
    np.testing.assert_array_equal(frame.array, before)
    # A renderer off the interop device cannot read into the frame.
    plain = sluice.Renderer()
    other = plain.create_target(16, 32)
    with pytest.raises(sluice.DeviceError, match="device"):
        frame.read(plain, other)
