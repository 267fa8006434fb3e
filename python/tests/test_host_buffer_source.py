"""HostBufferSource: numpy arrays handed over whole and replaced per update, copied by the GPU
from their own pages on lavapipe (VK_EXT_external_memory_host), with nothing staged; arrays
that cannot be imported and host_only give the same pixels; bad arrays raise ValueError or
TypeError with the numbers."""

import os

import numpy as np
import pytest

import sluice
from conftest import render, rgba_pattern

pytestmark = pytest.mark.skipif(
    not hasattr(sluice, "HostBufferSource"), reason="GPU interop is Linux-only"
)


@pytest.fixture(scope="module")
def interop_renderer():
    return sluice.Renderer(interop=True)


rgba = rgba_pattern


def show(renderer, source, h, w):
    scene = sluice.Scene()
    scene.add(sluice.Image(source))
    return scene


def cpu_device(renderer):
    """Whether 2-D arrays are drawn from their pages (lavapipe) rather than copied. With
    SLUICE_REQUIRE_IN_PLACE (set by .ci/run, whose device is lavapipe) a device where they
    would not fails the test rather than test the copy only."""
    info = renderer.adapter_info()
    in_place = info["device_type"] == "Cpu" and info["driver"].lower().startswith("llvmpipe")
    if os.environ.get("SLUICE_REQUIRE_IN_PLACE", "0") != "0":
        assert in_place, f"SLUICE_REQUIRE_IN_PLACE: arrays would be copied on {info}"
    return in_place


@pytest.mark.parametrize("in_place", [False, True])
def test_alternating_arrays_are_copied_from_their_own_pages(interop_renderer, in_place):
    """Copied from their pages by the GPU, or (on a CPU device, by default) drawn from them
    with nothing copied at all."""
    h, w = 256, 256  # 256 KiB: imported
    a, b = rgba(h, w, 0), rgba(h, w, 1)
    expected = {id(a): a.copy(), id(b): b.copy()}
    src = sluice.HostBufferSource(a, sample_in_place=in_place)
    assert src.staged_reason is None
    assert src.imported, src.fallback_reason
    scene = show(interop_renderer, src, h, w)
    before = interop_renderer.counters()["bytes_uploaded"]
    np.testing.assert_array_equal(render(interop_renderer, scene, w, h), a)
    spare = b
    for _ in range(5):
        shown = spare
        spare = src.replace(spare)
        assert spare is not shown
        assert src.imported, src.fallback_reason
        np.testing.assert_array_equal(render(interop_renderer, scene, w, h), expected[id(shown)])
    stats = src.stats()
    assert stats["imports_made"] == 2, stats  # one per array, not per update
    assert stats["bytes_copied"] == 0
    if in_place and cpu_device(interop_renderer):
        assert src.in_place_refusal is None
        assert (stats["gpu_copies"], stats["in_place_images"]) == (0, 6), stats
    else:
        assert (stats["gpu_copies"], stats["in_place_images"]) == (6, 0), stats
    assert interop_renderer.counters()["bytes_uploaded"] == before, "nothing was staged"


def test_a_returned_array_can_be_refilled(interop_renderer):
    h, w = 256, 512
    src = sluice.HostBufferSource(rgba(h, w, 0))
    scene = show(interop_renderer, src, h, w)
    render(interop_renderer, scene, w, h)
    spare = rgba(h, w, 1)
    for frame in range(1, 5):
        spare[...] = rgba(h, w, frame)  # the user's next data, in the array handed back
        spare = src.replace(spare)
        np.testing.assert_array_equal(render(interop_renderer, scene, w, h), rgba(h, w, frame))


def test_small_arrays_and_host_only_show_the_same_pixels(interop_renderer):
    h, w = 16, 32  # 2 KiB: copied into the source's pages
    src = sluice.HostBufferSource(rgba(h, w, 0))
    assert not src.imported
    assert "MIN_IMPORT_BYTES" in src.fallback_reason
    scene = show(interop_renderer, src, h, w)
    np.testing.assert_array_equal(render(interop_renderer, scene, w, h), rgba(h, w, 0))
    src.replace(rgba(h, w, 3))
    np.testing.assert_array_equal(render(interop_renderer, scene, w, h), rgba(h, w, 3))
    assert src.stats()["bytes_copied"] == 2 * h * w * 4

    h, w = 128, 160
    staged = sluice.HostBufferSource(rgba(h, w, 0), host_only=True)
    assert "host_only" in staged.staged_reason
    scene = show(interop_renderer, staged, h, w)
    before = interop_renderer.counters()["bytes_uploaded"]
    np.testing.assert_array_equal(render(interop_renderer, scene, w, h), rgba(h, w, 0))
    staged.replace(rgba(h, w, 2))
    np.testing.assert_array_equal(render(interop_renderer, scene, w, h), rgba(h, w, 2))
    assert interop_renderer.counters()["bytes_uploaded"] - before == 2 * h * w * 4


def test_float_images_are_imported(interop_renderer):
    """float32 arrays: copied from their pages or drawn in place, the same pixels both ways
    (tolerance 0), the array handed back being the one shown before."""
    h, w = 128, 256
    a = np.linspace(0, 1, h * w, dtype=np.float32).reshape(h, w)
    frames = {}
    for in_place in (False, True):
        src = sluice.HostBufferSource(a, sample_in_place=in_place)
        assert src.imported, src.fallback_reason
        scene = sluice.Scene()
        scene.add(sluice.Image(src, clim=(0, 1)))
        first = render(interop_renderer, scene, w, h)
        back = src.replace(1 - a)
        assert back is a
        frames[in_place] = (first, render(interop_renderer, scene, w, h))
        drawn_in_place = in_place and cpu_device(interop_renderer)
        stats = src.stats()
        expected = (0, 2) if drawn_in_place else (2, 0)
        assert (stats["gpu_copies"], stats["in_place_images"]) == expected, src.in_place_refusal
    for copied, drawn in zip(frames[False], frames[True]):
        np.testing.assert_array_equal(drawn, copied)
    # The two frames differ (a, then 1 - a), so the comparison above sees both versions.
    assert not np.array_equal(frames[True][0], frames[True][1])


def test_bad_arrays_raise_with_the_numbers():
    a = rgba(128, 160, 0)
    src = sluice.HostBufferSource(a)
    with pytest.raises(ValueError, match=r"\[128, 160, 4\].*\[128, 161, 4\]"):
        src.replace(rgba(128, 161, 0))
    with pytest.raises(ValueError, match="float32"):
        src.replace(a.astype(np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        src.replace(np.asfortranarray(a))
    with pytest.raises(ValueError, match="C-contiguous"):
        sluice.HostBufferSource(rgba(64, 64, 0)[:, ::2])
    with pytest.raises(TypeError, match="numpy.ndarray"):
        sluice.HostBufferSource([1, 2, 3])
    with pytest.raises(TypeError, match="numpy.ndarray"):
        src.replace("not an array")


def test_replace_refuses_the_array_shown_now():
    a = rgba(64, 80, 0)
    src = sluice.HostBufferSource(a)
    # The array shown, or a view of its bytes, would come back as free to write: refused.
    with pytest.raises(ValueError, match="overlap those of the array shown now"):
        src.replace(a)
    with pytest.raises(ValueError, match="overlap those of the array shown now"):
        src.replace(a.view())
    b = rgba(64, 80, 1)
    back = src.replace(b)
    assert back is a
    with pytest.raises(ValueError, match="overlap those of the array shown now"):
        src.replace(b)
    # The array handed back is free again.
    assert src.replace(a) is b
