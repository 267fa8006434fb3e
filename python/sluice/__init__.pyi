from ._sluice import *  # noqa: F401,F403
from ._sluice import (
    CUDA_SUPPORT as CUDA_SUPPORT,
    ArraySource as ArraySource,
    CudaSource as CudaSource,
    DeviceError as DeviceError,
    FlyCamera as FlyCamera,
    HostBufferSource as HostBufferSource,
    Image as Image,
    InternalError as InternalError,
    LazySource as LazySource,
    Mesh as Mesh,
    MmapSource as MmapSource,
    OrbitCamera as OrbitCamera,
    PanZoomCamera as PanZoomCamera,
    Renderer as Renderer,
    Scene as Scene,
    SluiceError as SluiceError,
    SourceReadError as SourceReadError,
    Target as Target,
    ViewHandle as ViewHandle,
    Volume as Volume,
    ZarrSource as ZarrSource,
    open_npy as open_npy,
    open_raw as open_raw,
    open_zarr as open_zarr,
)
from ._source import Source as Source
from ._view import view as view
