"""CUDA tensors (PyTorch, CuPy) shown without a host copy. These run on the NVIDIA machine
(scripts/device-python.sh); elsewhere they skip and say why, unless SLUICE_REQUIRE_CUDA=1
makes a skip a failure."""

import gc
import os
import time
import weakref

import numpy as np
import pytest

import sluice
from conftest import pixel_camera

REQUIRE = os.environ.get("SLUICE_REQUIRE_CUDA", "0") not in ("", "0")


def need(reason):
    if REQUIRE:
        pytest.fail(f"SLUICE_REQUIRE_CUDA=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def torch():
    if not sluice.CUDA_SUPPORT:
        need("this sluice build has no CUDA support (build with feature `cuda`)")
    try:
        import torch
    except ImportError:
        need("PyTorch is not installed")
    if not torch.cuda.is_available():
        need("torch.cuda is not available (no NVIDIA driver or GPU)")
    return torch


@pytest.fixture(scope="module")
def cuda_renderer(torch):
    return sluice.Renderer(cuda=True)


def rgba_pattern(torch, h, w, frame):
    y = torch.arange(h, device="cuda", dtype=torch.int32)[:, None]
    x = torch.arange(w, device="cuda", dtype=torch.int32)[None, :]
    t = torch.empty((h, w, 4), device="cuda", dtype=torch.uint8)
    t[..., 0] = ((x * 3 + frame) % 256).to(torch.uint8)
    t[..., 1] = ((y * 5 + frame) % 256).to(torch.uint8)
    t[..., 2] = ((x + y) % 256).to(torch.uint8)
    t[..., 3] = 255
    return t


def show(renderer, source, w, h):
    scene = sluice.Scene()
    scene.add(sluice.Image(source))
    target = renderer.create_target(w, h)
    return scene, target


def test_a_torch_tensor_is_shown_without_a_host_copy(torch, cuda_renderer):
    h, w = 96, 160
    t = rgba_pattern(torch, h, w, 0)
    src = sluice.CudaSource(t, channels=True)
    scene, target = show(cuda_renderer, src, w, h)
    before = cuda_renderer.counters()
    frame = cuda_renderer.render(scene, pixel_camera(w, h), target)
    after = cuda_renderer.counters()
    assert after["bytes_uploaded"] == before["bytes_uploaded"], "nothing went through the host"
    copied = (after["device_bytes_copied"] - before["device_bytes_copied"]) + (
        after["textures_provided"] - before["textures_provided"]
    )
    assert copied > 0
    np.testing.assert_array_equal(frame, t.cpu().numpy())

    # A kernel rewrites the tensor; mark_dirty shows it.
    t.copy_(rgba_pattern(torch, h, w, 7))
    src.mark_dirty()
    frame = cuda_renderer.render(scene, pixel_camera(w, h), target)
    np.testing.assert_array_equal(frame, t.cpu().numpy())
    assert cuda_renderer.counters()["bytes_uploaded"] == before["bytes_uploaded"]


def test_a_cupy_array_is_shown_without_a_host_copy(torch, cuda_renderer):
    try:
        import cupy
    except ImportError:
        need("CuPy is not installed")
    h, w = 64, 128
    # A kernel of CuPy's own writes the array ("i" is reserved in CuPy's kernels: name it k).
    fill = cupy.ElementwiseKernel("int32 k, int32 w", "float32 out", "out = (float)((k % w) + (k / w)) / 255.0f", "fill")
    a = cupy.empty((h, w), cupy.float32)
    fill(cupy.arange(h * w, dtype=cupy.int32).reshape(h, w), cupy.int32(w), a)
    src = sluice.CudaSource(a)
    scene = sluice.Scene()
    scene.add(sluice.Image(src, clim=(0.0, 1.0)))
    target = cuda_renderer.create_target(w, h)
    before = cuda_renderer.counters()["bytes_uploaded"]
    frame = cuda_renderer.render(scene, pixel_camera(w, h), target)
    assert cuda_renderer.counters()["bytes_uploaded"] == before
    v = cupy.asnumpy(a)
    want = np.minimum(np.floor(np.clip(v, 0, 1) * 256), 255).astype(np.uint8)
    assert np.abs(frame[..., 0].astype(int) - want.astype(int)).max() <= 1


def test_a_producer_stream_still_writing_is_waited_for(torch, cuda_renderer):
    h, w = 64, 64
    t = torch.zeros((h, w, 4), device="cuda", dtype=torch.uint8)
    src = sluice.CudaSource(t, channels=True)
    scene, target = show(cuda_renderer, src, w, h)
    cuda_renderer.render(scene, pixel_camera(w, h), target)
    producer = torch.cuda.Stream()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(2_000_000_000)  # about a second of GPU time before the write
        t[..., :3] = 200
        t[..., 3] = 255  # opaque, so the frame shows the colour as it is
        # PyTorch's interface names no stream; its current stream, the producer here, is used.
        src.mark_dirty()
    frame = cuda_renderer.render(scene, pixel_camera(w, h), target)
    # Without the event the copy would run before the fill and show zeros.
    assert (frame[..., :3] == 200).all(), f"stale frame: {np.unique(frame)}"


def test_a_producer_stream_named_explicitly_is_waited_for(torch, cuda_renderer):
    h, w = 64, 64
    t = torch.zeros((h, w, 4), device="cuda", dtype=torch.uint8)
    src = sluice.CudaSource(t, channels=True)
    scene, target = show(cuda_renderer, src, w, h)
    cuda_renderer.render(scene, pixel_camera(w, h), target)
    producer = torch.cuda.Stream()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(2_000_000_000)
        t[..., :3] = 77
        t[..., 3] = 255
    # Outside the `with`, the current stream is no longer the producer: name it.
    src.mark_dirty(stream=producer.cuda_stream)
    frame = cuda_renderer.render(scene, pixel_camera(w, h), target)
    assert (frame[..., :3] == 77).all(), f"stale frame: {np.unique(frame)}"


def test_the_tensor_is_kept_alive_while_shown(torch, cuda_renderer):
    h, w = 128, 128
    t = rgba_pattern(torch, h, w, 3)
    want = t.cpu().numpy()
    ref = weakref.ref(t)
    src = sluice.CudaSource(t, channels=True)
    scene, target = show(cuda_renderer, src, w, h)
    del t
    gc.collect()
    assert ref() is not None, "the source holds the tensor"
    # Memory freed now would be handed out again by the caching allocator and overwritten.
    junk = [torch.full((h, w, 4), 17, device="cuda", dtype=torch.uint8) for _ in range(8)]
    src.mark_dirty()
    frame = cuda_renderer.render(scene, pixel_camera(w, h), target)
    np.testing.assert_array_equal(frame, want)
    del junk


def test_bad_tensors_raise_with_the_numbers(torch):
    with pytest.raises(TypeError, match="__cuda_array_interface__"):
        sluice.CudaSource(np.zeros((4, 4), np.float32))
    t = torch.zeros((8, 8), device="cuda", dtype=torch.int64)
    with pytest.raises(TypeError, match="<i8"):
        sluice.CudaSource(t)
    s = torch.zeros((8, 16), device="cuda", dtype=torch.float32)[:, ::2]
    with pytest.raises(ValueError, match=r"strides \[64, 8\]"):
        sluice.CudaSource(s)


class DlpackOnly:
    """A tensor seen through DLPack alone: __cuda_array_interface__ hidden, as JAX arrays and
    other producers without it look to sluice."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.calls = []

    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        return self.tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def test_a_torch_tensor_through_dlpack_is_shown_without_a_host_copy(torch, cuda_renderer):
    h, w = 96, 160
    t = rgba_pattern(torch, h, w, 0)
    wrapped = DlpackOnly(t)
    assert not hasattr(wrapped, "__cuda_array_interface__")
    src = sluice.CudaSource(wrapped, channels=True)
    assert src.protocol == "dlpack"
    assert wrapped.calls and wrapped.calls[0]["stream"] == 1, "sluice names its stream"
    scene, target = show(cuda_renderer, src, w, h)
    before = cuda_renderer.counters()
    frame = cuda_renderer.render(scene, pixel_camera(w, h), target)
    after = cuda_renderer.counters()
    assert after["bytes_uploaded"] == before["bytes_uploaded"], "nothing went through the host"
    np.testing.assert_array_equal(frame, t.cpu().numpy())
    t.copy_(rgba_pattern(torch, h, w, 9))
    src.mark_dirty()
    frame = cuda_renderer.render(scene, pixel_camera(w, h), target)
    np.testing.assert_array_equal(frame, t.cpu().numpy())
    assert cuda_renderer.counters()["bytes_uploaded"] == before["bytes_uploaded"]


def test_a_cupy_array_through_dlpack(torch, cuda_renderer):
    try:
        import cupy
    except ImportError:
        need("CuPy is not installed")
    h, w = 64, 128
    a = (cupy.arange(h * w, dtype=cupy.float32).reshape(h, w) % 251) / 255.0
    src = sluice.CudaSource(DlpackOnly(a))
    assert src.protocol == "dlpack"
    scene = sluice.Scene()
    scene.add(sluice.Image(src, clim=(0.0, 1.0)))
    target = cuda_renderer.create_target(w, h)
    before = cuda_renderer.counters()["bytes_uploaded"]
    frame = cuda_renderer.render(scene, pixel_camera(w, h), target)
    assert cuda_renderer.counters()["bytes_uploaded"] == before
    v = cupy.asnumpy(a)
    want = np.minimum(np.floor(np.clip(v, 0, 1) * 256), 255).astype(np.uint8)
    assert np.abs(frame[..., 0].astype(int) - want.astype(int)).max() <= 1


def test_a_dlpack_producer_stream_still_writing_is_waited_for(torch, cuda_renderer):
    h, w = 64, 64
    t = torch.zeros((h, w, 4), device="cuda", dtype=torch.uint8)
    src = sluice.CudaSource(DlpackOnly(t), channels=True)
    scene, target = show(cuda_renderer, src, w, h)
    cuda_renderer.render(scene, pixel_camera(w, h), target)
    producer = torch.cuda.Stream()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(2_000_000_000)  # about a second of GPU time before the write
        t[..., :3] = 150
        t[..., 3] = 255
        # __dlpack__(stream=1) makes the legacy default stream wait for the producer (the
        # current stream here); sluice's event is recorded after that wait.
        src.mark_dirty()
    frame = cuda_renderer.render(scene, pixel_camera(w, h), target)
    assert (frame[..., :3] == 150).all(), f"stale frame: {np.unique(frame)}"


def test_the_dlpack_tensor_is_released_when_the_source_goes(torch, cuda_renderer):
    h, w = 512, 512
    # Sources of earlier tests may still be going (their arrays are freed off the render
    # path): settle them first, so that the baseline is this test's own.
    gc.collect()
    cuda_renderer.counters()
    cuda_renderer.wait_idle()
    torch.cuda.synchronize()
    baseline = settled_allocation(torch)
    t = rgba_pattern(torch, h, w, 5)
    want = t.cpu().numpy()
    src = sluice.CudaSource(DlpackOnly(t), channels=True)
    scene, target = show(cuda_renderer, src, w, h)
    del t
    gc.collect()
    held = torch.cuda.memory_allocated()
    assert held >= baseline + h * w * 4, f"the tensor's memory went: {held} B, baseline {baseline} B"
    # The managed tensor holds the memory: new allocations do not reuse it.
    junk = [torch.full((h, w, 4), 17, device="cuda", dtype=torch.uint8) for _ in range(8)]
    frame = cuda_renderer.render(scene, pixel_camera(w, h), target)
    np.testing.assert_array_equal(frame, want)
    del junk, scene, src, frame
    gc.collect()
    cuda_renderer.counters()  # frees the GPU state of dropped visuals, and their sources
    cuda_renderer.wait_idle()
    # The producer's deleter ran: the tensor's memory is back with PyTorch's allocator.
    assert settled_allocation(torch) == baseline


def settled_allocation(torch, seconds=2.0):
    """PyTorch's allocated bytes once they stop changing (sluice frees dropped arrays on a
    thread of its own, off the render path)."""
    deadline = time.monotonic() + seconds
    last = torch.cuda.memory_allocated()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        gc.collect()
        now = torch.cuda.memory_allocated()
        if now == last:
            return now
        last = now
    return last


def test_host_tensors_through_dlpack_are_refused(torch):
    with pytest.raises(TypeError, match=r"device type 1 \(kDLCPU\)"):
        sluice.CudaSource(DlpackOnly(torch.zeros((4, 4), dtype=torch.uint8)))
