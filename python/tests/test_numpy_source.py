"""numpy arrays shown by reference: lent in place, region writes upload only their region."""

import numpy as np
import pytest

import sluice
from conftest import centres, gray_entry, pixel_camera, render


def image_scene(source, **settings):
    scene = sluice.Scene()
    scene.add(sluice.Image(source, **settings))
    return scene


def test_array_memory_is_lent_not_copied(renderer):
    data = np.tile(centres(), (64, 1))  # 64 x 256 float32
    src = sluice.ArraySource(data)
    assert src.array is data
    assert src.lends_in_place
    before = renderer.counters()["bytes_uploaded"]
    frame = render(renderer, image_scene(src, clim=(0, 1)), 256, 64)
    assert renderer.counters()["bytes_uploaded"] - before == data.nbytes
    stats = src.stats()
    assert stats == {"lent": data.nbytes, "copied": 0}
    want = gray_entry(data)
    np.testing.assert_array_equal(frame[..., 0], want)
    np.testing.assert_array_equal(frame[..., 3], 255)


def test_numpy_write_plus_mark_dirty_shows_up(renderer):
    data = np.zeros((128, 128), np.uint8)
    src = sluice.ArraySource(data)
    scene = image_scene(src)
    target = renderer.create_target(128, 128)
    cam = pixel_camera(128, 128)
    renderer.render(scene, cam, target)
    data[10:20, 30:40] = 200  # through numpy: sluice is not told yet
    before = renderer.counters()["bytes_uploaded"]
    frame = renderer.render(scene, cam, target)
    assert renderer.counters()["bytes_uploaded"] == before, "nothing marked, nothing uploaded"
    src.mark_dirty(np.s_[10:20, 30:40])
    frame = renderer.render(scene, cam, target)
    uploaded = renderer.counters()["bytes_uploaded"] - before
    # The change lies in one 64 x 64 chunk of u8 samples.
    assert uploaded == 64 * 64
    assert (frame[10:20, 30:40, 0] == 200).all()
    assert (frame[:10, :, 0] == 0).all() and (frame[20:, :, 0] == 0).all()


def test_region_write_uploads_only_that_region(renderer):
    data = np.zeros((512, 512), np.uint16)
    src = sluice.ArraySource(data)
    scene = image_scene(src, clim=(0, 65535))
    target = renderer.create_target(512, 512)
    cam = pixel_camera(512, 512)
    renderer.render(scene, cam, target)
    before = renderer.counters()
    version = src.version
    src[128:192, 256:320] = 65535  # exactly one 64 x 64 chunk
    assert src.version > version
    assert (data[128:192, 256:320] == 65535).all(), "the write lands in the caller's array"
    frame = renderer.render(scene, cam, target)
    after = renderer.counters()
    assert after["bytes_uploaded"] - before["bytes_uploaded"] == 64 * 64 * 2
    assert after["textures_created"] == before["textures_created"]
    assert (frame[128:192, 256:320, 0] == 255).all()
    assert frame[..., 0].sum() == 64 * 64 * 255


def test_strided_arrays_are_read_without_a_full_copy(renderer):
    base = np.arange(256 * 256, dtype=np.float32).reshape(256, 256) / 65536.0
    crop = base[32:96, 16:208]  # rows of samples back to back: lent in place
    src = sluice.ArraySource(crop)
    assert src.lends_in_place
    frame = render(renderer, image_scene(src, clim=(0, 1)), 192, 64)
    np.testing.assert_array_equal(frame[..., 0], gray_entry(crop))
    assert src.stats()["copied"] == 0

    every_other = base[::2, ::3]  # samples not adjacent: gathered sample by sample
    src = sluice.ArraySource(every_other)
    assert not src.lends_in_place
    frame = render(renderer, image_scene(src, clim=(0, 1)), every_other.shape[1], 128)
    np.testing.assert_array_equal(frame[..., 0], gray_entry(every_other))
    assert src.stats() == {"lent": 0, "copied": every_other.nbytes}

    transposed = base[:64, :128].T  # Fortran order
    src = sluice.ArraySource(transposed)
    frame = render(renderer, image_scene(src, clim=(0, 1)), 64, 128)
    np.testing.assert_array_equal(frame[..., 0], gray_entry(transposed))


def test_rgba_channels(renderer):
    rgba = np.zeros((32, 48, 4), np.uint8)
    rgba[..., 0] = np.arange(48, dtype=np.uint8)[None, :] * 5
    rgba[..., 1] = np.arange(32, dtype=np.uint8)[:, None] * 7
    rgba[..., 2] = 100
    rgba[..., 3] = 255
    src = sluice.ArraySource(rgba, channels=True)
    assert (src.shape, src.channels) == ([32, 48], 4)
    frame = render(renderer, image_scene(src), 48, 32)
    np.testing.assert_array_equal(frame, rgba)
    # An (h, w, 4) array given straight to an Image is taken as RGBA too.
    frame = render(renderer, image_scene(rgba), 48, 32)
    np.testing.assert_array_equal(frame, rgba)


def test_clim_gamma_and_colormap_change_without_uploads(renderer):
    data = np.tile(centres(), (8, 1))
    src = sluice.ArraySource(data)
    scene = sluice.Scene()
    image = sluice.Image(src)
    scene.add(image)
    target = renderer.create_target(256, 8)
    cam = pixel_camera(256, 8)
    renderer.render(scene, cam, target)
    before = renderer.counters()["bytes_uploaded"]
    image.clim = (0.25, 0.75)
    image.gamma = 2.0
    frame = renderer.render(scene, cam, target)
    assert renderer.counters()["bytes_uploaded"] == before
    want = gray_entry(data, clim=(0.25, 0.75), gamma=2.0)
    diff = np.abs(frame[..., 0].astype(int) - want.astype(int))
    assert diff.max() <= 1, diff.max()
    assert image.clim == (0.25, 0.75)

    table = np.array([[255, 0, 0, 255], [0, 255, 0, 255], [0, 0, 255, 255], [255, 255, 255, 255]], np.uint8)
    image.clim = (0, 1)
    image.gamma = 1.0
    image.colormap = table
    frame = renderer.render(scene, cam, target)
    entry = np.minimum(np.floor(data * 4), 3).astype(int)
    np.testing.assert_array_equal(frame, table[entry])
    assert renderer.counters()["bytes_uploaded"] == before
    image.colormap = "viridis"
    assert image.colormap == "viridis"


def test_one_source_shown_by_eight_visuals_is_one_texture(renderer):
    data = np.random.default_rng(1).random((256, 256), dtype=np.float32)
    src = sluice.ArraySource(data)
    scene = sluice.Scene()
    images = []
    for i in range(8):
        image = sluice.Image(src, clim=(0, 1 + i))
        images.append(image)
        node = scene.add(image)
        scene.set_position(node, 32.0 * i, 0.0)
    before = renderer.counters()
    render(renderer, scene, 512, 256)
    after = renderer.counters()
    assert after["textures_created"] - before["textures_created"] == 1
    assert after["bytes_uploaded"] - before["bytes_uploaded"] == data.nbytes
    assert after["textures_alive"] - before["textures_alive"] == 1
    assert len(scene) == 8 and scene.visuals[3] is images[3]


def test_texture_is_kept_across_frames_and_freed_with_its_visuals(renderer):
    data = np.ones((64, 64), np.float32)
    scene = sluice.Scene()
    node = scene.add(sluice.Image(sluice.ArraySource(data)))
    target = renderer.create_target(64, 64)
    base = renderer.counters()
    for _ in range(3):
        renderer.render(scene, pixel_camera(64, 64), target)
    c = renderer.counters()
    assert c["textures_created"] - base["textures_created"] == 1
    assert c["bytes_uploaded"] - base["bytes_uploaded"] == data.nbytes
    scene.remove(node)
    renderer.render(scene, pixel_camera(64, 64), target)
    assert renderer.counters()["textures_alive"] == base["textures_alive"]


def test_visual_settings_survive_removal_and_readding(renderer):
    data = np.full((16, 16), 0.5, np.float32)
    image = sluice.Image(data, clim=(0, 2))
    scene = sluice.Scene()
    node = scene.add(image)
    image.clim = (0, 1)
    scene.remove(node)
    assert image.clim == (0, 1)
    other = sluice.Scene()
    other.add(image)
    frame = render(renderer, other, 16, 16)
    assert (frame[..., 0] == gray_entry([0.5])[0]).all()


def test_volume_slices_show_planes(renderer):
    vol = np.zeros((4, 16, 16), np.uint8)
    for z in range(4):
        vol[z] = 60 * z
    src = sluice.ArraySource(vol)
    image = sluice.Image(src, slice=("z", 2))
    scene = sluice.Scene()
    scene.add(image)
    frame = render(renderer, scene, 16, 16)
    assert (frame[..., 0] == 120).all()
    image.slice = ("z", 3)
    frame = render(renderer, scene, 16, 16)
    assert (frame[..., 0] == 180).all()
    assert image.slice == ("z", 3)


def test_memory_maps(renderer, tmp_path):
    data = (np.arange(64 * 64, dtype=np.uint16).reshape(64, 64) * 16)
    path = tmp_path / "a.npy"
    np.save(path, data)
    src = sluice.open_npy(path)
    assert (src.shape, src.dtype) == ([64, 64], np.dtype(np.uint16))
    frame = render(renderer, image_scene(src, clim=(0, 65535)), 64, 64)
    want = gray_entry(data.astype(np.float32), clim=(0, 65535))
    assert np.abs(frame[..., 0].astype(int) - want.astype(int)).max() <= 1
    assert src.bytes_read == data.nbytes

    raw = tmp_path / "a.raw"
    raw.write_bytes(b"\0" * 16 + data.tobytes())
    src = sluice.open_raw(raw, (64, 64), "uint16", offset=16)
    frame2 = render(renderer, image_scene(src, clim=(0, 65535)), 64, 64)
    np.testing.assert_array_equal(frame, frame2)


def test_frames_read_into_one_array(renderer):
    # 33 columns: rows of 132 bytes, padded to 256 on the GPU's side.
    data = np.zeros((7, 33), np.uint8)
    data[2:5, 10:20] = 180
    scene = image_scene(sluice.ArraySource(data))
    target = renderer.create_target(33, 7)
    cam = pixel_camera(33, 7)
    out = np.full((7, 33, 4), 3, np.uint8)
    got = renderer.render(scene, cam, target, out=out)
    assert got is out
    np.testing.assert_array_equal(out[..., 0], data)
    np.testing.assert_array_equal(out[..., 3], 255)
    np.testing.assert_array_equal(renderer.read(target), out)
    data[0, 0] = 90
    scene2 = image_scene(sluice.ArraySource(data))
    assert renderer.render(scene2, cam, target, out=out) is out
    assert out[0, 0, 0] == 90

    wrong = np.full((7, 32, 4), 5, np.uint8)
    with pytest.raises(ValueError, match=r"shape \[7, 32, 4\].*33x7.*\[7, 33, 4\]"):
        renderer.read(target, out=wrong)
    assert (wrong == 5).all()
    strided = np.full((7, 66, 4), 5, np.uint8)[:, ::2]
    with pytest.raises(ValueError, match="C-contiguous"):
        renderer.read(target, out=strided)
    assert (strided == 5).all()
    with pytest.raises(TypeError):
        renderer.read(target, out=np.zeros((7, 33, 4), np.float32))


@pytest.mark.parametrize("draw", ["raster", "compute"])
def test_a_lone_image_is_drawn_either_way_with_the_same_pixels(draw):
    # A 64 x 48 uint8 image, gray, its colours computed with numpy; each renderer draws it
    # the way it was asked, and counts the frames drawn by compute.
    r = sluice.Renderer(image_draw=draw)
    assert r.image_draw() == draw
    y, x = np.mgrid[0:48, 0:64]
    data = ((x * 3 + y * 5) % 256).astype(np.uint8)
    before = r.counters()["image_draws_by_compute"]
    frame = render(r, image_scene(sluice.ArraySource(data)), 64, 48)
    np.testing.assert_array_equal(frame[..., 0], gray_entry(data, clim=(0, 255)))
    np.testing.assert_array_equal(frame[..., 3], 255)
    drawn = r.counters()["image_draws_by_compute"] - before
    assert drawn == (1 if draw == "compute" else 0)


def test_an_unknown_image_draw_is_named():
    with pytest.raises(ValueError, match="SLUICE_IMAGE_DRAW.*'?sideways'?.*compute"):
        sluice.Renderer(image_draw="sideways")
