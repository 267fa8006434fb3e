"""Every bad input raises the right exception, naming the numbers; nothing crashes."""

import numpy as np
import pytest

import sluice


def test_unsupported_dtypes_are_type_errors():
    for dtype, name in [(np.int64, "<i8"), (np.complex64, "<c8"), (np.bool_, "|b1")]:
        with pytest.raises(TypeError, match=name):
            sluice.ArraySource(np.zeros((4, 4), dtype))
    with pytest.raises(TypeError, match=">f4"):
        sluice.ArraySource(np.zeros((4, 4), ">f4"))
    with pytest.raises(TypeError, match="numpy.ndarray, got list"):
        sluice.ArraySource([[1, 2], [3, 4]])


def test_bad_shapes_are_value_errors():
    with pytest.raises(ValueError, match=r"\[2, 2, 2, 2\] has 4 axes"):
        sluice.ArraySource(np.zeros((2, 2, 2, 2), np.float32))
    with pytest.raises(ValueError, match="5 channels"):
        sluice.ArraySource(np.zeros((4, 4, 5), np.uint8), channels=True)
    with pytest.raises(ValueError, match="empty"):
        sluice.ArraySource(np.zeros((0, 4), np.uint8))


def test_region_writes_outside_the_source():
    src = sluice.ArraySource(np.zeros((100, 200), np.float32))
    with pytest.raises(ValueError, match=r"0\.\.300 of an axis of length 200 \(shape \[100, 200\]\)"):
        src[0:10, 0:300] = 1.0
    with pytest.raises(ValueError, match="index 100 on axis 0 is out of bounds of an axis of length 100"):
        src[100, 0:10] = 1.0
    with pytest.raises(ValueError, match="step 2"):
        src[0:10:2, :] = 1.0
    with pytest.raises(ValueError, match="3 entries"):
        src[0:1, 0:1, 0:1] = 1.0
    with pytest.raises(ValueError, match="could not broadcast"):
        src[0:10, 0:10] = np.ones((3, 3))
    src[-10:, -20:] = 2.0
    assert (src.array[90:, 180:] == 2.0).all()
    with pytest.raises(TypeError, match="integers or slices"):
        src.mark_dirty(("a", 1))


def test_files():
    with pytest.raises(FileNotFoundError, match="/nonexistent/x.npy"):
        sluice.open_npy("/nonexistent/x.npy")


def test_truncated_raw_file(tmp_path):
    path = tmp_path / "short.raw"
    path.write_bytes(b"\0" * 100)
    with pytest.raises(ValueError, match="the file has 100 bytes, but its layout declares 128 bytes of data at offset 0"):
        sluice.open_raw(path, (8, 8), np.uint16)
    with pytest.raises(TypeError, match="<i8"):
        sluice.open_raw(path, (2, 2), np.int64)
    with pytest.raises(ValueError, match="does not fit"):
        sluice.open_raw(path, (2**40, 2**40), np.uint8)


def test_visual_settings():
    src = sluice.ArraySource(np.zeros((8, 8), np.float32))
    with pytest.raises(ValueError, match='unknown colormap "nope"; built-in: gray, viridis'):
        sluice.Image(src, colormap="nope")
    with pytest.raises(ValueError, match=r"shape \(n, 3\) or \(n, 4\) with n >= 1; got \[4, 5\]"):
        sluice.Image(src, colormap=np.zeros((4, 5), np.uint8))
    with pytest.raises(ValueError, match="0 to 255; this one spans 0 to 300"):
        sluice.Image(src, colormap=np.array([[0, 0, 0], [300, 0, 0]]))
    with pytest.raises(ValueError, match="2049 entries; 1 to 2048"):
        sluice.Image(src, colormap=np.zeros((2049, 4), np.uint8))
    with pytest.raises(ValueError, match=r"contrast limits \(1, 1\)"):
        sluice.Image(src, clim=(1, 1))
    with pytest.raises(ValueError, match="gamma -1"):
        sluice.Image(src, gamma=-1)
    with pytest.raises(ValueError, match='unknown interpolation "cubic"'):
        sluice.Image(src, interpolation="cubic")
    with pytest.raises(ValueError, match="opacity 2 must be in"):
        sluice.Image(src, opacity=2)
    with pytest.raises(ValueError, match="a slice is"):
        sluice.Image(src, slice=("w", 1))
    with pytest.raises(ValueError, match='unknown volume mode "max"'):
        sluice.Volume(np.zeros((4, 4, 4), np.float32), mode="max")
    with pytest.raises(ValueError, match="depth samples"):
        sluice.Volume(np.zeros((4, 4, 4), np.float32), depth_samples=0)
    volume = sluice.Volume(np.zeros((4, 4, 4), np.float32))
    assert volume.depth_samples == 256
    volume.depth_samples = None
    assert volume.depth_samples is None
    with pytest.raises(ValueError, match="depth samples"):
        volume.depth_samples = 0
    assert volume.depth_samples is None
    # One level: a lock on level 1 names both numbers; a bias is kept (clamped when drawn).
    with pytest.raises(ValueError, match="level 1, but the source has 1 level"):
        sluice.Volume(np.zeros((4, 4, 4), np.float32), level_lock=1)
    with pytest.raises(ValueError, match="level 1, but the source has 1 level"):
        volume.level_lock = 1
    volume.level_bias = 2
    assert (volume.level_bias, volume.level_lock) == (2, None)
    with pytest.raises(ValueError, match="level 1, but the source has 1 level"):
        sluice.Image(np.zeros((4, 4), np.float32), level_lock=1)
    with pytest.raises(ValueError, match='unknown shading "phong"'):
        sluice.Mesh(np.zeros((3, 3), np.float32), shading="phong")


def test_scene_and_renderer_inputs(renderer):
    scene = sluice.Scene()
    image = sluice.Image(np.zeros((8, 8), np.float32))
    scene.add(image)
    with pytest.raises(ValueError, match="already in a scene"):
        scene.add(image)
    with pytest.raises(TypeError, match="Image, Volume or Mesh, got int"):
        scene.add(3)
    with pytest.raises(IndexError, match="node 7 is not in the scene"):
        scene.set_visible(7, False)
    with pytest.raises(ValueError, match=r"4x4 matrix; got shape \[3, 3\]"):
        scene.set_transform(0, np.eye(3))
    with pytest.raises(ValueError, match="render target of 0x10 pixels"):
        renderer.create_target(0, 10)
    target = renderer.create_target(8, 8)
    with pytest.raises(TypeError, match="a camera is a PanZoomCamera"):
        renderer.render(scene, "camera", target)
    with pytest.raises(ValueError, match="invalid renderer option"):
        sluice.Renderer(backend="nonsense")


def test_a_volume_of_a_2d_source_is_refused_with_the_shape(renderer):
    scene = sluice.Scene()
    scene.add(sluice.Volume(np.zeros((8, 8), np.float32)))
    with pytest.raises(ValueError, match=r"Volume cannot show"):
        renderer.render(scene, sluice.OrbitCamera.fit((0, 0, 0), (8, 8, 1)), renderer.create_target(8, 8))
    # The renderer stays usable.
    ok = sluice.Scene()
    ok.add(sluice.Image(np.ones((8, 8), np.float32)))
    frame = renderer.render(ok, sluice.PanZoomCamera((4, 4), 1.0), renderer.create_target(8, 8))
    assert (frame[..., 0] == 255).all()


def test_mesh_index_out_of_range_names_the_numbers(renderer):
    positions = np.zeros((3, 3), np.float32)
    scene = sluice.Scene()
    scene.add(sluice.Mesh(positions, indices=np.array([0, 1, 7], np.uint32)))
    with pytest.raises(ValueError, match="7"):
        renderer.render(scene, sluice.OrbitCamera.fit((0, 0, 0), (1, 1, 1)), renderer.create_target(8, 8))


def test_errors_of_sluice_itself_share_a_base():
    assert issubclass(sluice.DeviceError, sluice.SluiceError)
    assert issubclass(sluice.InternalError, sluice.SluiceError)
    assert issubclass(sluice.SourceReadError, sluice.SluiceError)
