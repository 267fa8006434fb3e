"""sluice.open_zarr: the Zarr arrays and OME-Zarr groups that sluice-zarr's Rust tests read
(written by tests/fixtures/write_zarr.py with zarr-python 3.1.6), read back and rendered from
Python, each sample compared with the script's closed form computed by numpy."""

import importlib.util
import json
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

import sluice
from conftest import gray_entry, need, pixel_camera

zarr = need("zarr", "zarr-python writes the fixtures")

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "write_zarr.py"


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    out = tmp_path_factory.mktemp("zarr-fixtures")
    subprocess.run([sys.executable, str(SCRIPT), str(out)], check=True, capture_output=True)
    spec = importlib.util.spec_from_file_location("write_zarr", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return out, json.loads((out / "manifest.json").read_text()), module


def expected_plain(entry, closed_form):
    """The array as the script wrote it: the closed form, with the skipped chunks at fill."""
    data = closed_form(tuple(entry["shape"]), entry["seed"], entry["dtype"])
    chunks = entry["chunks"]
    for idx in entry["skipped"]:
        sel = tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks))
        data[sel] = entry["fill"]
    return data


@pytest.mark.parametrize(
    "name", ["v2_blosc.zarr", "v2_zstd.zarr", "v2_gzip.zarr", "v3_blosc.zarr", "v3_zstd.zarr",
             "v3_gzip.zarr", "v3_volume.zarr", "v3_sharded.zarr"])
def test_plain_arrays_read_as_numpy_wrote_them(fixtures, name):
    out, manifest, script = fixtures
    entry = manifest[name]
    src = sluice.open_zarr(out / name)
    assert src.shape == entry["shape"]
    assert src.dtype == np.dtype(entry["dtype"])
    assert src.chunks == entry["chunks"]
    assert src.ome_version is None and src.channels == 1
    want = expected_plain(entry, script.closed_form)
    np.testing.assert_array_equal(src.read_region(), want)
    # A region across chunk borders.
    index = tuple(slice(s // 3, s // 3 + max(1, s // 2)) for s in entry["shape"])
    np.testing.assert_array_equal(src.read_region(index), want[index])


def render_until_complete(renderer, scene, w, h, limit_s=30.0):
    target = renderer.create_target(w, h)
    camera = pixel_camera(w, h)
    deadline = time.monotonic() + limit_s
    while renderer.draw(scene, camera, target)["uploads_pending"]:
        assert time.monotonic() < deadline, "zarr chunks did not arrive in time"
        time.sleep(0.01)
    return renderer.read(target)


def test_a_zarr_image_renders_the_stored_values(renderer, fixtures):
    out, manifest, script = fixtures
    entry = manifest["v2_gzip.zarr"]  # uint8, two chunks left at fill 7
    src = sluice.open_zarr(str(out / "v2_gzip.zarr"))
    scene = sluice.Scene()
    scene.add(sluice.Image(src, clim=(0, 255)))
    h, w = entry["shape"]
    frame = render_until_complete(renderer, scene, w, h)
    want = gray_entry(expected_plain(entry, script.closed_form).astype(np.float32), clim=(0, 255))
    assert np.abs(frame[..., 0].astype(int) - want.astype(int)).max() <= 1
    assert src.loader_calls == 5 * 8, "each chunk of the 5 x 8 grid read once"


def test_ome_zarr_time_channels_and_level(renderer, fixtures):
    out, manifest, script = fixtures
    entry = manifest["ome05.zarr"]  # t, c, z, y, x: (2, 3, 10, 72, 100), three levels
    src = sluice.open_zarr(out / "ome05.zarr", time=1, channels=[2, 0], level=1)
    assert src.ome_version == "0.5"
    assert [kind for _, kind in src.axes] == ["time", "channel", "space", "space", "space"]
    assert src.array_shape == [2, 3, 10, 72, 100]
    assert (src.time, src.channel_indices, src.level, src.channels) == (1, [2, 0], 1, 2)
    lv = entry["levels"][1]
    assert src.shape == lv["shape"][2:]
    assert [l["path"] for l in src.levels] == ["/s0", "/s1", "/s2"]
    assert src.levels[1]["downsample"] == [2.0, 2.0, 2.0]
    full = script.closed_form(tuple(lv["shape"]), lv["seed"], "uint16")
    want = np.stack([full[1, 2], full[1, 0]], axis=-1)  # channels interleaved as selected
    np.testing.assert_array_equal(src.read_region(), want)

    # Level 2 alone as a volume of one channel: every chunk loads, and the pixels are the
    # stored values (a z slice through the gray colormap).
    lv2 = entry["levels"][2]
    one = sluice.open_zarr(out / "ome05.zarr", time=0, channels=[1], level=2)
    data = script.closed_form(tuple(lv2["shape"]), lv2["seed"], "uint16")[0, 1]
    np.testing.assert_array_equal(one.read_region(), data)
    z = 1
    scene = sluice.Scene()
    scene.add(sluice.Image(one, clim=(0, 65535), slice=("z", z)))
    h, w = data.shape[1:]
    frame = render_until_complete(renderer, scene, w, h)
    want = gray_entry(data[z].astype(np.float32), clim=(0, 65535))
    assert np.abs(frame[..., 0].astype(int) - want.astype(int)).max() <= 1


def test_slices_of_a_multiscale_volume_show_its_planes(renderer, fixtures):
    # All three levels of the OME-Zarr group: a lazy multiscale volume, whose planes are drawn
    # from its 3-D pages at the level the view needs (level 0 at one sample per pixel).
    out, manifest, script = fixtures
    entry = manifest["ome05.zarr"]
    src = sluice.open_zarr(out / "ome05.zarr", time=0, channels=[1])
    lv0 = entry["levels"][0]
    data = script.closed_form(tuple(lv0["shape"]), lv0["seed"], "uint16")[0, 1]
    for axis, index, plane in [("z", 5, data[5]), ("y", 30, data[:, 30, :]),
                               ("x", 70, data[:, :, 70])]:
        scene = sluice.Scene()
        scene.add(sluice.Image(src, clim=(0, 65535), slice=(axis, index)))
        h, w = plane.shape
        frame = render_until_complete(renderer, scene, w, h)
        want = gray_entry(plane.astype(np.float32), clim=(0, 65535))
        diff = np.abs(frame[..., 0].astype(int) - want.astype(int))
        assert diff.max() <= 1, f"{axis} = {index}: {np.count_nonzero(diff > 1)} pixels off"


def test_zarr_errors_name_the_numbers(fixtures, tmp_path):
    out, _, _ = fixtures
    with pytest.raises(FileNotFoundError, match="no Zarr array"):
        sluice.open_zarr(tmp_path)
    with pytest.raises(ValueError, match=r"time point 5 selected; the time axis has 2 point"):
        sluice.open_zarr(out / "ome05.zarr", time=5)
    with pytest.raises(ValueError, match=r"channels \[7\] selected.*3 channel"):
        sluice.open_zarr(out / "ome05.zarr", channels=[7])
    with pytest.raises(ValueError, match=r"level 3 requested; the source has 3 level"):
        sluice.open_zarr(out / "ome05.zarr", level=3)
    with pytest.raises(ValueError, match="timeout -1"):
        sluice.open_zarr(out / "ome05.zarr", timeout=-1)
    src = sluice.open_zarr(out / "v3_zstd.zarr")
    with pytest.raises(ValueError, match=r"0\.\.400 of an axis of length 300"):
        src.read_region(np.s_[0:400, :])


def test_a_store_still_being_written_fills_in_when_watched(renderer, tmp_path):
    # zarr-python writes one chunk of four; sluice shows it and the fill for the rest, then
    # zarr-python writes the others while sluice renders: every chunk appears.
    path = tmp_path / "growing.zarr"
    h, w = 64, 64
    arr = zarr.create_array(str(path), shape=(h, w), chunks=(32, 32), dtype="uint8",
                            fill_value=0)
    data = ((np.arange(h)[:, None] * 3 + np.arange(w)[None, :] * 5) % 250 + 5).astype(np.uint8)
    arr[:32, :32] = data[:32, :32]
    src = sluice.open_zarr(path, watch=0.02)
    assert src.watch == pytest.approx(0.02)
    scene = sluice.Scene()
    scene.add(sluice.Image(src, clim=(0, 255)))
    frame = render_until_complete(renderer, scene, w, h)
    first = data.copy()
    first[32:, :] = 0
    first[:, 32:] = 0
    want = gray_entry(first.astype(np.float32), clim=(0, 255))
    assert np.abs(frame[..., 0].astype(int) - want.astype(int)).max() <= 1
    arr[:32, 32:] = data[:32, 32:]
    arr[32:, :] = data[32:, :]
    want = gray_entry(data.astype(np.float32), clim=(0, 255))
    deadline = time.monotonic() + 20.0
    while True:
        frame = render_until_complete(renderer, scene, w, h)
        off = np.abs(frame[..., 0].astype(int) - want.astype(int)) > 1
        if not off.any():
            break
        assert time.monotonic() < deadline, f"{off.sum()} pixels never appeared"
        time.sleep(0.02)
    assert src.chunks_appeared == 3 and src.watch_polls > 0
    with pytest.raises(ValueError, match="watch -1 s"):
        sluice.open_zarr(path, watch=-1)
    assert sluice.open_zarr(path).watch is None


def test_a_level_lock_draws_that_level_of_a_multiscale_store(renderer, fixtures):
    # For slow links: the plane z = 5 of the OME-Zarr group drawn from level 2 at level 0's
    # size. Level 2 halves twice (downsample 4): pixel (x, y) shows its sample
    # (z 5.5 // 4 = 1, y // 4, x // 4).
    out, manifest, script = fixtures
    entry = manifest["ome05.zarr"]
    src = sluice.open_zarr(out / "ome05.zarr", time=0, channels=[1])
    lv2 = entry["levels"][2]
    coarse = script.closed_form(tuple(lv2["shape"]), lv2["seed"], "uint16")[0, 1]
    h, w = entry["levels"][0]["shape"][3:]
    image = sluice.Image(src, clim=(0, 65535), slice=("z", 5), level_lock=2)
    assert (image.level_lock, image.level_bias) == (2, 0)
    scene = sluice.Scene()
    scene.add(image)
    frame = render_until_complete(renderer, scene, w, h)
    ys, xs = np.meshgrid(np.arange(h) // 4, np.arange(w) // 4, indexing="ij")
    plane = coarse[1][np.minimum(ys, coarse.shape[1] - 1), np.minimum(xs, coarse.shape[2] - 1)]
    want = gray_entry(plane.astype(np.float32), clim=(0, 65535))
    diff = np.abs(frame[..., 0].astype(int) - want.astype(int))
    assert diff.max() <= 1, f"{np.count_nonzero(diff > 1)} pixels off level 2"
    with pytest.raises(ValueError, match="level 3"):
        image.level_lock = 3
    assert image.level_lock == 2
    image.level_lock = None
    image.level_bias = 1
    assert (image.level_lock, image.level_bias) == (None, 1)
