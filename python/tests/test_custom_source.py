"""Sources written in Python: read on demand, changes reported through versions."""

import numpy as np
import pytest

import sluice
from conftest import pixel_camera, render


class Ramp(sluice.Source):
    shape = (32, 64)
    dtype = np.uint8

    def __init__(self):
        super().__init__()
        self.offset = 0
        self.reads = []

    def read(self, index):
        self.reads.append(index)
        rows, cols = index
        x = np.arange(cols.start, cols.stop, dtype=np.int32)
        return np.broadcast_to((x * 2 + self.offset) % 256, (rows.stop - rows.start, x.size)).astype(np.uint8)


def test_a_python_source_is_read_and_updated(renderer):
    src = Ramp()
    scene = sluice.Scene()
    scene.add(sluice.Image(src))
    target = renderer.create_target(64, 32)
    frame = renderer.render(scene, pixel_camera(64, 32), target)
    want = (np.arange(64) * 2) % 256
    assert (frame[..., 0] == want[None, :]).all()
    reads = len(src.reads)
    renderer.render(scene, pixel_camera(64, 32), target)
    assert len(src.reads) == reads, "an unchanged version reads nothing"
    src.offset = 10
    src.mark_dirty((slice(0, 32), slice(0, 64)))
    frame = renderer.render(scene, pixel_camera(64, 32), target)
    assert (frame[..., 0] == (want + 10)[None, :]).all()


def test_a_python_sources_exception_comes_back_as_raised(renderer):
    class Broken(Ramp):
        def read(self, index):
            raise KeyError(f"no data for {index}")

    scene = sluice.Scene()
    scene.add(sluice.Image(Broken()))
    with pytest.raises(KeyError, match="no data for"):
        render(renderer, scene, 64, 32)


def test_a_wrong_shape_from_read_is_a_value_error(renderer):
    class Wrong(Ramp):
        def read(self, index):
            return np.zeros((3, 3), np.uint8)

    scene = sluice.Scene()
    scene.add(sluice.Image(Wrong()))
    with pytest.raises(ValueError, match=r"returned shape \[3, 3\]; expected \[32, 64\]"):
        render(renderer, scene, 64, 32)


def test_an_object_without_the_protocol_is_a_type_error():
    with pytest.raises(TypeError, match="has no `read`"):
        sluice.Image(object())
