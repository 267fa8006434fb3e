"""Lazy chunked arrays (dask, zarr, or any object with .shape, .dtype, .chunks and indexing):
chunks read on the loader pool, frames completed as they arrive."""

import threading
import time

import numpy as np
import pytest

import sluice
from conftest import gray_entry, need, pixel_camera


class ChunkedArray:
    """A stand-in for a zarr array: regular chunks, reads counted."""

    def __init__(self, data, chunks):
        self.data, self.chunks = data, chunks
        self.shape, self.dtype, self.ndim = data.shape, data.dtype, data.ndim
        self.reads = []
        self.lock = threading.Lock()

    def __getitem__(self, index):
        with self.lock:
            self.reads.append(index)
        time.sleep(0.002)  # a slow store
        return self.data[index]


def render_until_complete(renderer, scene, camera, target, limit_s=20.0):
    deadline = time.monotonic() + limit_s
    while True:
        stats = renderer.draw(scene, camera, target)
        if not stats["uploads_pending"]:
            return renderer.read(target)
        assert time.monotonic() < deadline, "chunks did not arrive in time"
        time.sleep(0.01)


def test_a_chunked_array_is_read_chunk_by_chunk(renderer):
    data = (np.arange(256 * 384, dtype=np.float32).reshape(256, 384) % 1000) / 1000.0
    array = ChunkedArray(data, (64, 128))
    scene = sluice.Scene()
    image = sluice.Image(array, clim=(0, 1))
    scene.add(image)
    assert isinstance(image.source, sluice.LazySource)
    assert image.source.chunks == [64, 128]
    target = renderer.create_target(384, 256)
    frame = render_until_complete(renderer, scene, pixel_camera(384, 256), target)
    np.testing.assert_array_equal(frame[..., 0], gray_entry(data))
    # Every chunk read once, each exactly one chunk of the grid.
    assert len(array.reads) == 4 * 3 == image.source.loader_calls
    for rows, cols in array.reads:
        assert (rows.stop - rows.start, cols.stop - cols.start) == (64, 128)
        assert rows.start % 64 == 0 and cols.start % 128 == 0


def test_a_dask_array_appears(renderer):
    da = need("dask.array", "a dask array as it is")
    data = np.random.default_rng(2).random((200, 300), dtype=np.float32)
    array = da.from_array(data, chunks=(64, 100))
    scene = sluice.Scene()
    scene.add(sluice.Image(array * 1.0, clim=(0, 1)))
    target = renderer.create_target(300, 200)
    frame = render_until_complete(renderer, scene, pixel_camera(300, 200), target)
    np.testing.assert_array_equal(frame[..., 0], gray_entry(data))


def test_irregular_chunks_are_refused_with_the_numbers():
    class Irregular(ChunkedArray):
        pass

    array = Irregular(np.zeros((10, 10), np.uint8), ((3, 7), (5, 5)))
    with pytest.raises(ValueError, match=r"axis 0 has irregular chunks \[3, 7\]"):
        sluice.LazySource(array)


def test_a_failing_chunk_read_is_reported(renderer):
    class Failing(ChunkedArray):
        def __getitem__(self, index):
            raise OSError("store unreachable")

    scene = sluice.Scene()
    scene.add(sluice.Image(Failing(np.zeros((64, 64), np.uint8), (32, 32))))
    target = renderer.create_target(64, 64)
    # Failed chunks read as the fill value (zeros); the frame completes without crashing.
    frame = render_until_complete(renderer, scene, pixel_camera(64, 64), target)
    assert (frame[..., 0] == 0).all()
