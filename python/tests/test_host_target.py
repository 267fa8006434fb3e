"""HostTarget: a target whose frames are read in host memory, seen as a read-only numpy array
with no copy. On lavapipe (a CPU device) the frame is drawn there in place; elsewhere it is
copied into a HostFrame's pages. Every pixel equals the pattern drawn one texel per pixel
(computed with numpy) and Renderer.read of an ordinary target of the same scene (tolerance 0);
odd widths (lavapipe pads 100-pixel rows to 448 bytes), frames over frames, the copied target,
when the pixels may be looked at, and bad calls raising with the sizes."""

import numpy as np
import pytest

import sluice
from conftest import pixel_camera, rgba_pattern

pytestmark = pytest.mark.skipif(
    not hasattr(sluice, "HostTarget"), reason="GPU interop is Linux-only"
)

pattern = rgba_pattern


@pytest.fixture(scope="module")
def interop_renderer():
    return sluice.Renderer(interop=True)


def cpu_device(renderer):
    return renderer.adapter_info()["device_type"].lower() == "cpu"


@pytest.mark.parametrize("h,w", [(48, 64), (37, 100)])
def test_frames_are_read_where_they_were_drawn(interop_renderer, h, w):
    src = sluice.ArraySource(pattern(h, w, 0), channels=True)
    scene = sluice.Scene()
    scene.add(sluice.Image(src))
    host = sluice.HostTarget(interop_renderer, w, h)
    plain = interop_renderer.create_target(w, h)
    if cpu_device(interop_renderer):
        assert host.is_in_place, host.fallback_reason
        assert host.fallback_reason is None
    else:
        assert not host.is_in_place and "across the bus" in host.fallback_reason
    assert host.bytes_per_row >= w * 4
    first = None
    for n in range(3):
        src[:, :] = pattern(h, w, n)
        pixels = host.render(interop_renderer, scene, pixel_camera(w, h))
        assert pixels.shape == (h, w, 4) and pixels.dtype == np.uint8
        assert not pixels.flags.writeable, "the target's memory is read-only from numpy"
        assert pixels.base is host, "the array views the target's memory and keeps the target"
        np.testing.assert_array_equal(pixels, pattern(h, w, n))
        np.testing.assert_array_equal(
            pixels, interop_renderer.render(scene, pixel_camera(w, h), plain)
        )
        if first is None:
            first = pixels
    # An array from an earlier frame views the same memory: it shows the last frame read.
    np.testing.assert_array_equal(first, pattern(h, w, 2))


def test_pixels_are_there_from_a_read_to_the_next_draw(interop_renderer):
    h, w = 20, 30
    src = sluice.ArraySource(pattern(h, w, 6), channels=True)
    scene = sluice.Scene()
    scene.add(sluice.Image(src))
    for host in (
        sluice.HostTarget(interop_renderer, w, h),
        sluice.HostTarget(interop_renderer, w, h, copied=True),
    ):
        with pytest.raises(sluice.DeviceError, match="read the target"):
            host.array
        stats = host.draw(interop_renderer, scene, pixel_camera(w, h))
        assert stats["visuals_drawn"] == 1
        with pytest.raises(sluice.DeviceError, match="read the target"):
            host.array
        np.testing.assert_array_equal(host.read(interop_renderer), pattern(h, w, 6))
        np.testing.assert_array_equal(host.array, pattern(h, w, 6))
        host.invalidate()
        np.testing.assert_array_equal(
            host.render(interop_renderer, scene, pixel_camera(w, h)), pattern(h, w, 6)
        )
    assert not host.is_in_place and "on request" in host.fallback_reason


def test_an_array_keeps_its_target_alive(interop_renderer):
    h, w = 16, 24
    scene = sluice.Scene()
    scene.add(sluice.Image(sluice.ArraySource(pattern(h, w, 3), channels=True)))
    pixels = sluice.HostTarget(interop_renderer, w, h).render(
        interop_renderer, scene, pixel_camera(w, h)
    )
    import gc

    gc.collect()
    np.testing.assert_array_equal(pixels, pattern(h, w, 3))


def test_bad_sizes_and_renderers_raise_naming_them(interop_renderer):
    with pytest.raises(sluice.DeviceError, match="0x16"):
        sluice.HostTarget(interop_renderer, 0, 16)
    with pytest.raises(sluice.DeviceError, match="device"):
        sluice.HostTarget(sluice.Renderer(), 16, 16)
