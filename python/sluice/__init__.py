"""sluice: data of any origin on the GPU for visualization.

Sources describe data and how to read it (a numpy array by reference, a memory-mapped file, a
CUDA tensor, or your own class); visuals (Image, Volume, Mesh) show sources with per-visual
settings; a Renderer keeps one GPU copy of each source up to date, uploading only what changed.

    import numpy as np, sluice
    data = np.random.rand(512, 512).astype(np.float32)
    src = sluice.ArraySource(data)          # by reference: no copy
    scene = sluice.Scene()
    image = sluice.Image(src, clim=(0, 1), colormap="viridis")
    scene.add(image)
    renderer = sluice.Renderer()
    target = renderer.create_target(512, 512)
    camera = sluice.PanZoomCamera.fit((0, 0), (512, 512), target.size)
    frame = renderer.render(scene, camera, target)   # (512, 512, 4) uint8
    src[0:64, 0:64] = 0.0                   # only this region is uploaded next frame
"""

from ._sluice import (
    CUDA_SUPPORT,
    ArraySource,
    DeviceError,
    FlyCamera,
    Image,
    InternalError,
    LazySource,
    Mesh,
    MmapSource,
    OrbitCamera,
    PanZoomCamera,
    Renderer,
    Scene,
    SluiceError,
    SourceReadError,
    Target,
    ViewHandle,
    Volume,
    ZarrSource,
    open_npy,
    open_raw,
    open_zarr,
)
import atexit

from ._sluice import _wait_for_devices
from ._source import Source
from ._view import view

# The GPU devices live as long as the process: let them finish what was submitted before the
# interpreter exits (Mesa's lavapipe can crash in its exit handlers otherwise).
atexit.register(_wait_for_devices)

if CUDA_SUPPORT:
    from ._sluice import CudaSource  # noqa: F401
try:  # Linux only (GPU interop)
    from ._sluice import HostBufferSource, HostFrame, HostTarget  # noqa: F401
except ImportError:
    pass

__all__ = [
    "ArraySource",
    "CUDA_SUPPORT",
    "DeviceError",
    "FlyCamera",
    "Image",
    "InternalError",
    "LazySource",
    "Mesh",
    "MmapSource",
    "OrbitCamera",
    "PanZoomCamera",
    "Renderer",
    "Scene",
    "SluiceError",
    "Source",
    "SourceReadError",
    "Target",
    "ViewHandle",
    "Volume",
    "ZarrSource",
    "open_npy",
    "open_raw",
    "open_zarr",
    "view",
]
if CUDA_SUPPORT:
    __all__.append("CudaSource")
if "HostBufferSource" in globals():
    __all__ += ["HostBufferSource", "HostFrame", "HostTarget"]
