from ._sluice import *  # noqa: F401,F403
from ._sluice import (
    CUDA_SUPPORT as CUDA_SUPPORT,
    ArraySource as ArraySource,
    CudaSource as CudaSource,
    DeviceError as DeviceError,
    FlyCamera as FlyCamera,
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
    Volume as Volume,
    open_npy as open_npy,
    open_raw as open_raw,
)
from ._source import Source as Source
