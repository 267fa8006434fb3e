//! `sluice.CudaSource`: a CUDA tensor (PyTorch, CuPy, anything with
//! `__cuda_array_interface__` version 2 or 3, or with `__dlpack__` / `__dlpack_device__`)
//! shown without a host copy.
//!
//! The tensor's device pointer, shape, strides and stream are read from its interface; the
//! tensor object (and, through DLPack, the producer's managed tensor) is kept alive as long as
//! the source, and so as long as any renderer shows it. The renderer's copies wait for an
//! event this source records at each `mark_dirty()`: on the stream the interface names (or the
//! framework's current one), or, through DLPack, on the legacy default stream after the
//! producer was asked (`__dlpack__(stream=1)`) to order its pending work before that stream.
//! The copy waits for the producer's work up to that point, and for nothing else (never a
//! device-wide synchronize).

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sluice_core::{
    Changes, CudaMemory, DataSource, Layout, ReadRequest, ReadStatus, Residency, Shape,
    SourceError, Version,
};
use sluice_interop::cuda::cudarc::driver::{result, sys};
use sluice_interop::cuda::{CudaInterop, CudaSource};

use crate::dlpack::{self, ManagedTensor};
use crate::dtype::numpy_dtype;
use crate::errors::{guard, source_error, DeviceError};

pub use crate::interop_device::renderer;
use crate::interop_device::{interop, interop_error};

/// A CUDA event this source records on the producer's stream.
struct ReadyEvent {
    event: sys::CUevent,
}

// SAFETY: a CUDA driver handle; the driver accepts it from any thread (with the context
// current, which every use makes so).
unsafe impl Send for ReadyEvent {}
// SAFETY: as above; it is only passed to driver calls.
unsafe impl Sync for ReadyEvent {}

impl Drop for ReadyEvent {
    fn drop(&mut self) {
        // SAFETY: a live event created by `cuEventCreate`, destroyed once. Destroying an event
        // whose recorded work is still pending is allowed: the driver frees it afterwards.
        unsafe {
            let _ = result::event::destroy(self.event);
        }
    }
}

/// The source a renderer holds: the interop's `CudaSource` plus what must live as long as it.
pub struct TensorSource {
    inner: CudaSource,
    cuda: CudaInterop,
    event: ReadyEvent,
    /// The DLPack tensor `inner` reads (its deleter runs after `inner` drops), for sources
    /// made through `__dlpack__`.
    dlpack: Option<ManagedTensor>,
    /// The tensor whose memory `inner` reads; dropped (with the GIL, by PyO3) after `inner`.
    tensor: Py<PyAny>,
}

impl DataSource for TensorSource {
    fn layout(&self) -> Layout {
        self.inner.layout()
    }
    fn version(&self) -> Version {
        self.inner.version()
    }
    fn changes_since(&self, since: Version) -> Changes {
        self.inner.changes_since(since)
    }
    fn residency(&self) -> Residency {
        self.inner.residency()
    }
    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        self.inner.read(request, dst)
    }
    fn label(&self) -> String {
        self.inner.label()
    }
}

/// The parts of a `__cuda_array_interface__` sluice uses.
struct ArrayInterface {
    shape: Vec<usize>,
    element: sluice_core::ElementType,
    strides: Option<Vec<isize>>,
    ptr: u64,
    /// `None`: no synchronization needed; 1: legacy default stream; 2: per-thread default;
    /// else a `CUstream`.
    stream: Option<u64>,
}

/// The DLPack consumer stream sluice names: the legacy default stream. The producer makes it
/// wait for its pending work; the ready event is recorded on it and the copies run on it.
const DLPACK_STREAM: u64 = 1;

/// A tensor as sluice reads it, from either protocol.
struct Tensor {
    shape: Vec<usize>,
    element: sluice_core::ElementType,
    strides: Option<Vec<isize>>,
    ptr: u64,
    /// The stream the ready event is recorded on at creation.
    stream: u64,
    /// The consumed DLPack tensor (`None`: `__cuda_array_interface__`).
    dlpack: Option<ManagedTensor>,
}

/// Reads `tensor` through `__cuda_array_interface__` where it has one, else through
/// `__dlpack__` (the device checked first: CUDA memory only).
fn read_tensor(tensor: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    if tensor.hasattr("__cuda_array_interface__")? || !tensor.hasattr("__dlpack__")? {
        let ai = array_interface(tensor)?;
        let stream = producer_stream(tensor, ai.stream, None)?;
        return Ok(Tensor {
            shape: ai.shape,
            element: ai.element,
            strides: ai.strides,
            ptr: ai.ptr,
            stream,
            dlpack: None,
        });
    }
    let type_name = tensor.get_type().name()?.to_string();
    dlpack::require_cuda(&type_name, dlpack::device_of(tensor)?)?;
    let managed = dlpack::import(tensor, Some(DLPACK_STREAM))?;
    // The capsule's device, which the producer may have chosen differently.
    dlpack::require_cuda(&type_name, managed.device)?;
    Ok(Tensor {
        shape: managed.shape.clone(),
        element: managed.element,
        strides: Some(managed.strides.clone()),
        ptr: managed.ptr,
        stream: stream_handle(Some(DLPACK_STREAM)),
        dlpack: Some(managed),
    })
}

fn array_interface(tensor: &Bound<'_, PyAny>) -> PyResult<ArrayInterface> {
    let type_name = tensor.get_type().name()?.to_string();
    let cai = tensor.getattr("__cuda_array_interface__").map_err(|_| {
        PyTypeError::new_err(format!(
            "CudaSource takes an object with __cuda_array_interface__ or __dlpack__ (a CUDA torch.Tensor, a CuPy array, a JAX array); {type_name} has neither"
        ))
    })?;
    let cai = cai.cast::<PyDict>()?;
    let get = |key: &str| {
        cai.get_item(key)?.ok_or_else(|| {
            PyValueError::new_err(format!(
                "{type_name}.__cuda_array_interface__ has no {key:?}"
            ))
        })
    };
    let version: u32 = get("version")?.extract()?;
    if version < 2 {
        return Err(PyValueError::new_err(format!(
            "__cuda_array_interface__ version {version}; sluice reads version 2 or 3"
        )));
    }
    let shape: Vec<usize> = get("shape")?.extract()?;
    let typestr = get("typestr")?;
    let descr = numpy::PyArrayDescr::new(tensor.py(), &typestr)?;
    let element = crate::dtype::element_type(&descr).map_err(source_error)?;
    let strides: Option<Vec<isize>> = get("strides")?.extract()?;
    let (ptr, _readonly): (u64, bool) = get("data")?.extract()?;
    let stream: Option<u64> = match cai.get_item("stream")? {
        Some(s) => s.extract()?,
        None => None,
    };
    if cai.get_item("mask")?.is_some_and(|m| !m.is_none()) {
        return Err(PyValueError::new_err(
            "masked CUDA arrays are not supported",
        ));
    }
    Ok(ArrayInterface {
        shape,
        element,
        strides,
        ptr,
        stream,
    })
}

/// The stream the producer wrote on: `explicit` (the caller's `stream=`) where given, else
/// the one its interface names (version 3), else, for frameworks whose interface names none
/// (PyTorch reports version 2), that framework's current stream on the tensor's device, else
/// the legacy default stream.
fn producer_stream(
    tensor: &Bound<'_, PyAny>,
    interface: Option<u64>,
    explicit: Option<u64>,
) -> PyResult<u64> {
    if let Some(s) = explicit.or(interface) {
        return Ok(stream_handle(Some(s)));
    }
    let module = tensor.get_type().module()?.to_string();
    if module.starts_with("torch") {
        let torch = tensor.py().import("torch")?;
        let device = tensor.getattr("device")?;
        let current = torch
            .getattr("cuda")?
            .call_method1("current_stream", (device,))?;
        return current.getattr("cuda_stream")?.extract();
    }
    Ok(stream_handle(None))
}

/// The `CUstream` handle of an interface's stream value.
fn stream_handle(stream: Option<u64>) -> u64 {
    match stream {
        // Legacy default stream (the handle 0), and "no synchronization needed".
        None | Some(1) => 0,
        // CU_STREAM_PER_THREAD.
        Some(2) => 2,
        Some(s) => s,
    }
}

/// A CUDA tensor shown without a host copy: `CudaSource(tensor, channels=False)`. Call
/// `mark_dirty()` after kernels changed it.
#[pyclass(name = "CudaSource", module = "sluice", frozen)]
pub struct PyCudaSource {
    inner: Arc<TensorSource>,
    /// For PyTorch tensors read through `__cuda_array_interface__` (version 2, which names
    /// no stream): what `mark_dirty` calls instead of reading the interface again.
    torch: Option<TorchStream>,
}

/// PyTorch's current stream, looked up once: `torch.cuda.current_stream`, the tensor's
/// device and its `data_ptr` method (to check the memory did not move).
struct TorchStream {
    current_stream: Py<PyAny>,
    device: Py<PyAny>,
    data_ptr: Py<PyAny>,
    ptr: u64,
}

impl TorchStream {
    /// The lookups for `tensor` if it is a PyTorch tensor whose interface names no stream.
    fn new(tensor: &Bound<'_, PyAny>, ptr: u64) -> PyResult<Option<Self>> {
        let module = tensor.get_type().module()?.to_string();
        let names_stream = tensor
            .getattr("__cuda_array_interface__")?
            .cast::<PyDict>()?
            .get_item("stream")?
            .is_some();
        if !module.starts_with("torch") || names_stream {
            return Ok(None);
        }
        let torch = tensor.py().import("torch")?;
        Ok(Some(TorchStream {
            current_stream: torch.getattr("cuda")?.getattr("current_stream")?.unbind(),
            device: tensor.getattr("device")?.unbind(),
            data_ptr: tensor.getattr("data_ptr")?.unbind(),
            ptr,
        }))
    }

    /// PyTorch's current stream on the tensor's device, after checking the tensor's memory is
    /// where the source reads it.
    fn stream(&self, py: Python<'_>) -> PyResult<u64> {
        let now: u64 = self.data_ptr.bind(py).call0()?.extract()?;
        if now != self.ptr {
            return Err(PyValueError::new_err(format!(
                "the tensor's memory moved from {:#x} to {now:#x} (resize_ or set_?); make a new CudaSource",
                self.ptr
            )));
        }
        self.current_stream
            .bind(py)
            .call1((self.device.bind(py),))?
            .getattr("cuda_stream")?
            .extract()
    }
}

#[pymethods]
impl PyCudaSource {
    #[new]
    #[pyo3(signature = (tensor, *, channels = false))]
    fn new(tensor: &Bound<'_, PyAny>, channels: bool) -> PyResult<Self> {
        let ai = read_tensor(tensor)?;
        let py = tensor.py();
        let (spatial, channel_count) = if channels {
            match ai.shape.split_last() {
                Some((&c, s)) if !s.is_empty() => (s.to_vec(), c),
                _ => {
                    return Err(source_error(SourceError::UnsupportedDimensions {
                        shape: ai.shape.clone(),
                    }))
                }
            }
        } else {
            (ai.shape.clone(), 1)
        };
        let shape = Shape::new(&spatial).map_err(source_error)?;
        let layout = Layout::new(shape, ai.element, channel_count).map_err(source_error)?;
        let sample = layout.sample_bytes();
        // Byte strides, numpy order; C order when the interface gives none.
        let strides: Vec<isize> = match &ai.strides {
            Some(s) => s.clone(),
            None => {
                let mut s = vec![0isize; ai.shape.len()];
                let mut step = ai.element.size() as isize;
                for (i, &d) in ai.shape.iter().enumerate().rev() {
                    s[i] = step;
                    step *= d as isize;
                }
                s
            }
        };
        let n = spatial.len();
        let inner_ok = strides[n - 1] == sample as isize
            && (!channels || strides[n] == ai.element.size() as isize);
        let pitches_ok = strides[..n].iter().all(|&s| s > 0);
        if !inner_ok || !pitches_ok {
            return Err(PyValueError::new_err(format!(
                "CudaSource needs each row's samples back to back and positive row/plane strides; got strides {strides:?} (bytes) for shape {:?} of {}: make the tensor contiguous first",
                ai.shape, ai.element
            )));
        }
        let row_pitch = if n >= 2 {
            strides[n - 2] as usize
        } else {
            sample * spatial[0]
        };
        let plane_pitch = if n >= 3 {
            strides[0] as usize
        } else {
            row_pitch * layout.shape().height()
        };
        let stream = ai.stream;
        let torch = match ai.dlpack {
            None => TorchStream::new(tensor, ai.ptr)?,
            Some(_) => None,
        };
        let dlpack = ai.dlpack;
        let tensor_obj = tensor.clone().unbind();
        py.detach(|| {
            guard(|| {
                let cuda = interop()?.cuda().map_err(interop_error)?;
                check_device(&cuda, ai.ptr)?;
                cuda.context()
                    .bind_to_thread()
                    .map_err(|e| DeviceError::new_err(format!("cuCtxSetCurrent: {e}")))?;
                let event = ReadyEvent {
                    event: result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
                        .map_err(|e| DeviceError::new_err(format!("cuEventCreate: {e}")))?,
                };
                record(&event, stream)?;
                let memory = CudaMemory {
                    device_uuid: cuda.device_uuid().0,
                    ptr: ai.ptr,
                    row_pitch,
                    plane_pitch,
                    stream,
                    ready_event: Some(event.event as usize as u64),
                };
                // SAFETY: `memory.ptr` is the tensor's device memory on `cuda`'s device
                // (checked above) holding `layout` at these pitches (its interface says so,
                // and `pitches_ok` / `inner_ok` held); the `TensorSource` keeps the tensor
                // (and its DLPack managed tensor), and so its memory, alive as long as the
                // source. `stream` is the producer's stream of the primary context (PyTorch
                // and CuPy use it) or a default stream, and `ready_event` an event of that
                // context the source owns.
                let inner = unsafe { CudaSource::from_raw(&cuda, layout, memory) }
                    .map_err(interop_error)?;
                Ok(PyCudaSource {
                    inner: Arc::new(TensorSource {
                        inner,
                        cuda,
                        event,
                        dlpack,
                        tensor: tensor_obj,
                    }),
                    torch,
                })
            })
        })
    }

    /// The tensor has new data (written by kernels on a stream): records the ready event on
    /// that stream and publishes a new version. The stream is `stream` (a `CUstream` handle,
    /// e.g. `torch.cuda.Stream().cuda_stream` or `cupy.cuda.Stream().ptr`) where given, else
    /// the one the tensor's interface names now, else (PyTorch, whose interface names none)
    /// PyTorch's current stream on the tensor's device. A DLPack tensor without `stream` is
    /// asked again with `__dlpack__(stream=1)`, which makes the producer order its pending
    /// work before the legacy default stream; the event is recorded there.
    #[pyo3(signature = (stream=None))]
    fn mark_dirty(&self, py: Python<'_>, stream: Option<u64>) -> PyResult<u64> {
        let tensor = self.inner.tensor.bind(py);
        let stream = match (&self.inner.dlpack, stream) {
            (Some(_), Some(s)) => stream_handle(Some(s)),
            (Some(first), None) => {
                let again = dlpack::import(tensor, Some(DLPACK_STREAM))?;
                if again.ptr != first.ptr || again.shape != first.shape {
                    return Err(PyValueError::new_err(format!(
                        "the tensor's memory moved: __dlpack__ now gives {:#x} of shape {:?}, the source shows {:#x} of shape {:?}; make a new CudaSource",
                        again.ptr, again.shape, first.ptr, first.shape
                    )));
                }
                stream_handle(Some(DLPACK_STREAM))
            }
            (None, Some(s)) => stream_handle(Some(s)),
            (None, None) => match &self.torch {
                Some(torch) => torch.stream(py)?,
                None => {
                    let ai = array_interface(tensor)?;
                    producer_stream(tensor, ai.stream, None)?
                }
            },
        };
        let source = self.inner.clone();
        py.detach(|| {
            guard(|| {
                source
                    .cuda
                    .context()
                    .bind_to_thread()
                    .map_err(|e| DeviceError::new_err(format!("cuCtxSetCurrent: {e}")))?;
                record(&source.event, stream)?;
                Ok(source.inner.publish().0)
            })
        })
    }

    /// `"cuda_array_interface"` or `"dlpack"`: the protocol the tensor was read through.
    #[getter]
    fn protocol(&self) -> &'static str {
        if self.inner.dlpack.is_some() {
            "dlpack"
        } else {
            "cuda_array_interface"
        }
    }

    /// The tensor shown.
    #[getter]
    fn tensor(&self, py: Python<'_>) -> Py<PyAny> {
        self.inner.tensor.clone_ref(py)
    }

    /// Spatial shape, numpy order.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.inner.layout().shape().dims().to_vec()
    }

    /// The element type as a numpy dtype.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> Bound<'py, numpy::PyArrayDescr> {
        numpy_dtype(py, self.inner.layout().element())
    }

    /// The version: moves on every `mark_dirty`.
    #[getter]
    fn version(&self) -> u64 {
        self.inner.version().0
    }
}

impl PyCudaSource {
    /// The source as renderers hold it (keeping the tensor alive).
    pub fn shared(&self) -> sluice_core::SharedSource {
        self.inner.clone()
    }
}

fn record(event: &ReadyEvent, stream: u64) -> PyResult<()> {
    // SAFETY: a live event of the current (primary) context; `stream` is 0, the per-thread
    // default stream, or the producer's live stream of that context (from its interface).
    unsafe { result::event::record(event.event, stream as usize as sys::CUstream) }
        .map_err(|e| DeviceError::new_err(format!("cuEventRecord on stream {stream:#x}: {e}")))
}

/// Fails unless `ptr` is device memory of `cuda`'s device.
fn check_device(cuda: &CudaInterop, ptr: u64) -> PyResult<()> {
    cuda.context()
        .bind_to_thread()
        .map_err(|e| DeviceError::new_err(format!("cuCtxSetCurrent: {e}")))?;
    let mut ordinal: i32 = -1;
    // SAFETY: `ordinal` is a valid destination for this attribute (an int); the driver
    // checks `ptr` and answers an error for pointers it does not know.
    let status = unsafe {
        sys::cuPointerGetAttribute(
            (&mut ordinal as *mut i32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ptr,
        )
    };
    if status != sys::CUresult::CUDA_SUCCESS {
        return Err(PyValueError::new_err(format!(
            "pointer {ptr:#x} is not CUDA device memory the driver knows ({status:?})"
        )));
    }
    let want = cuda.context().ordinal();
    if ordinal as usize != want {
        return Err(PyValueError::new_err(format!(
            "the tensor is on CUDA device {ordinal}; the renderer's GPU is CUDA device {want} (UUID {}): move it there first",
            cuda.device_uuid()
        )));
    }
    Ok(())
}

/// Registers the class.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCudaSource>()
}
