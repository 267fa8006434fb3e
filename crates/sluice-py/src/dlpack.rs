//! DLPack: tensors exchanged through `__dlpack__` / `__dlpack_device__` (PyTorch, CuPy, JAX,
//! numpy, ...), read without a copy.
//!
//! The producer hands a `PyCapsule` named `"dltensor_versioned"` (a `DLManagedTensorVersioned`,
//! DLPack 1.x, asked for with `max_version=(1, 1)`) or `"dltensor"` (a `DLManagedTensor`, older
//! producers). Consuming it renames the capsule `"used_…"` (the protocol's rule, so that the
//! capsule's own destructor no longer frees the tensor) and makes [`ManagedTensor`] its owner:
//! the producer's `deleter` runs exactly once, when that owner drops, which keeps the memory
//! (and the producer's object, which the managed tensor references) alive until then.
//!
//! Only the parsing lives here, with no CUDA dependency, so that it is tested on any machine
//! (from numpy's capsules); `sluice.CudaSource` (feature `cuda`) builds on it.

use std::ffi::{c_void, CStr};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyTuple};
use sluice_core::ElementType;

/// `DLDevice`.
#[repr(C)]
#[derive(Clone, Copy)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

/// `DLDataType`.
#[repr(C)]
#[derive(Clone, Copy)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// `DLTensor`.
#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

/// `DLManagedTensor` (DLPack before 1.0, capsule name `"dltensor"`).
#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Clone, Copy)]
struct DlPackVersion {
    major: u32,
    minor: u32,
}

/// `DLManagedTensorVersioned` (DLPack 1.x, capsule name `"dltensor_versioned"`).
#[repr(C)]
struct DlManagedTensorVersioned {
    version: DlPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DlTensor,
}

/// `DLPACK_FLAG_BITMASK_READ_ONLY`.
const FLAG_READ_ONLY: u64 = 1;

/// `kDLCUDA`: memory of a CUDA device.
pub const DEVICE_CUDA: i32 = 2;
/// `kDLCUDAManaged`: CUDA managed (unified) memory, readable by the device.
pub const DEVICE_CUDA_MANAGED: i32 = 13;

/// The DLPack name of a device type (`kDLCPU`, `kDLCUDA`, ...).
pub fn device_name(device_type: i32) -> &'static str {
    match device_type {
        1 => "kDLCPU",
        2 => "kDLCUDA",
        3 => "kDLCUDAHost",
        4 => "kDLOpenCL",
        7 => "kDLVulkan",
        8 => "kDLMetal",
        9 => "kDLVPI",
        10 => "kDLROCM",
        11 => "kDLROCMHost",
        12 => "kDLExtDev",
        13 => "kDLCUDAManaged",
        14 => "kDLOneAPI",
        15 => "kDLWebGPU",
        16 => "kDLHexagon",
        17 => "kDLMAIA",
        _ => "an unknown device type",
    }
}

const VERSIONED: &CStr = c"dltensor_versioned";
const UNVERSIONED: &CStr = c"dltensor";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
const USED_UNVERSIONED: &CStr = c"used_dltensor";

/// Which managed-tensor struct a consumed capsule held.
enum Managed {
    Versioned(*mut DlManagedTensorVersioned),
    Unversioned(*mut DlManagedTensor),
}

/// A consumed DLPack tensor: what it describes, and the producer's memory kept alive until
/// this drops (then the producer's deleter runs, once).
pub struct ManagedTensor {
    managed: Managed,
    /// `(device type, device id)` of the memory.
    pub device: (i32, i32),
    /// Address of the first element (`data + byte_offset`).
    pub ptr: u64,
    /// Shape, numpy order.
    pub shape: Vec<usize>,
    /// Byte strides, numpy order (C order where the producer gave none).
    pub strides: Vec<isize>,
    /// The element type.
    pub element: ElementType,
    /// The DLPack version of a versioned capsule, `None` for an unversioned one.
    pub version: Option<(u32, u32)>,
    /// Whether the producer marked the memory read-only (versioned capsules only).
    pub read_only: bool,
}

// SAFETY: the managed tensor is only read (its fields were copied out at consumption) and its
// deleter called once, on drop; DLPack producers' deleters may run on any thread (they take
// the GIL themselves where they need it, and `Drop` calls them with the GIL held anyway).
unsafe impl Send for ManagedTensor {}
// SAFETY: as above; shared references give access to the copied-out fields only.
unsafe impl Sync for ManagedTensor {}

impl Drop for ManagedTensor {
    fn drop(&mut self) {
        let call = || {
            // SAFETY: the pointer is the live managed tensor this owner took from its capsule
            // (renamed "used_…", so the capsule never calls the deleter); it is called once,
            // here, as the protocol requires of the consumer.
            unsafe {
                match self.managed {
                    Managed::Versioned(p) => {
                        if let Some(deleter) = (*p).deleter {
                            deleter(p)
                        }
                    }
                    Managed::Unversioned(p) => {
                        if let Some(deleter) = (*p).deleter {
                            deleter(p)
                        }
                    }
                }
            }
        };
        // Producers' deleters release Python objects: run them with the GIL. When the
        // interpreter is gone (process exit) the memory goes with the process: leak instead.
        let _ = Python::try_attach(|_| call());
    }
}

impl ManagedTensor {
    /// Takes ownership of the tensor in `capsule` (what `__dlpack__` returned): renames the
    /// capsule `"used_…"` and reads the tensor's description. Errors name what is wrong (a
    /// capsule consumed before, another capsule, a dtype or shape sluice cannot read); the
    /// tensor is released (its deleter run) on every error after it was taken.
    pub fn from_capsule(capsule: &Bound<'_, PyAny>) -> PyResult<ManagedTensor> {
        let capsule = capsule.cast::<PyCapsule>().map_err(|_| {
            PyTypeError::new_err(format!(
                "__dlpack__ returned {}, not a PyCapsule",
                capsule
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        let raw = capsule.as_ptr();
        // SAFETY: `raw` is a live capsule (borrowed from `capsule`, with the GIL held); the
        // names are NUL-terminated statics. `PyCapsule_IsValid` checks name and pointer.
        let managed = unsafe {
            if pyo3::ffi::PyCapsule_IsValid(raw, VERSIONED.as_ptr()) == 1 {
                let p = pyo3::ffi::PyCapsule_GetPointer(raw, VERSIONED.as_ptr());
                Managed::Versioned(p.cast())
            } else if pyo3::ffi::PyCapsule_IsValid(raw, UNVERSIONED.as_ptr()) == 1 {
                let p = pyo3::ffi::PyCapsule_GetPointer(raw, UNVERSIONED.as_ptr());
                Managed::Unversioned(p.cast())
            } else {
                let name = pyo3::ffi::PyCapsule_GetName(raw);
                let name = if name.is_null() {
                    "no name".to_string()
                } else {
                    format!("{:?}", CStr::from_ptr(name).to_string_lossy())
                };
                let used = name.contains("used_dltensor");
                return Err(PyValueError::new_err(if used {
                    format!("this DLPack capsule ({name}) was consumed already; call __dlpack__() again for a new one")
                } else {
                    format!("a capsule named {name} is not a DLPack tensor (\"dltensor\" or \"dltensor_versioned\")")
                }));
            }
        };
        let used = match managed {
            Managed::Versioned(_) => USED_VERSIONED,
            Managed::Unversioned(_) => USED_UNVERSIONED,
        };
        // SAFETY: as above; renaming is what marks the capsule consumed (its destructor then
        // leaves the tensor to us).
        if unsafe { pyo3::ffi::PyCapsule_SetName(raw, used.as_ptr()) } != 0 {
            return Err(PyErr::fetch(capsule.py()));
        }
        let version = match managed {
            // SAFETY: a valid capsule of this name holds a live managed tensor of this struct
            // (the protocol's contract); its fields stay valid until its deleter runs. A
            // versioned struct starts with its version, readable whatever the version is.
            Managed::Versioned(p) => Some(unsafe { (*p).version }),
            Managed::Unversioned(_) => None,
        };
        // From here on the owner exists: an error below releases the tensor as it drops.
        let mut owned = ManagedTensor {
            managed,
            device: (0, 0),
            ptr: 0,
            shape: Vec::new(),
            strides: Vec::new(),
            element: ElementType::U8,
            version: version.map(|v| (v.major, v.minor)),
            read_only: false,
        };
        if let Some(v) = version {
            if v.major != 1 {
                return Err(PyValueError::new_err(format!(
                    "DLPack version {}.{}: sluice reads version 1.x",
                    v.major, v.minor
                )));
            }
        }
        // SAFETY: the capsule's live managed tensor, as above, whose layout is version 1's
        // (checked just above) or the unversioned struct's.
        let (flags, tensor) = unsafe {
            match owned.managed {
                Managed::Versioned(p) => ((*p).flags, &(*p).dl_tensor),
                Managed::Unversioned(p) => (0, &(*p).dl_tensor),
            }
        };
        owned.device = (tensor.device.device_type, tensor.device.device_id);
        owned.read_only = flags & FLAG_READ_ONLY != 0;
        owned.element = element_of(tensor.dtype)?;
        let ndim = usize::try_from(tensor.ndim)
            .ok()
            .filter(|&n| n <= 32)
            .ok_or_else(|| {
                PyValueError::new_err(format!("DLPack tensor with ndim {}", tensor.ndim))
            })?;
        let read = |p: *const i64| -> Vec<i64> {
            if ndim == 0 || p.is_null() {
                return Vec::new();
            }
            // SAFETY: a DLPack tensor's non-null `shape` / `strides` hold `ndim` entries,
            // valid until the deleter runs.
            unsafe { std::slice::from_raw_parts(p, ndim) }.to_vec()
        };
        let shape = read(tensor.shape);
        if shape.len() != ndim {
            return Err(PyValueError::new_err(format!(
                "DLPack tensor of ndim {ndim} has no shape"
            )));
        }
        owned.shape = shape
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<_, _>>()
            .map_err(|_| PyValueError::new_err(format!("DLPack tensor of shape {shape:?}")))?;
        let size = owned.element.size() as i64;
        let elements = read(tensor.strides);
        let strides: Option<Vec<isize>> = if elements.is_empty() {
            c_order_strides(&owned.shape, owned.element.size())
        } else {
            elements
                .iter()
                .map(|&s| s.checked_mul(size).and_then(|b| isize::try_from(b).ok()))
                .collect()
        };
        owned.strides = strides.ok_or_else(|| {
            PyValueError::new_err(format!(
                "DLPack tensor of shape {shape:?} and strides {elements:?} (elements of {size} bytes): the byte strides overflow"
            ))
        })?;
        owned.ptr = (tensor.data as u64)
            .checked_add(tensor.byte_offset)
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "DLPack data pointer {:#x} plus byte_offset {} overflows",
                    tensor.data as u64, tensor.byte_offset
                ))
            })?;
        Ok(owned)
    }

    /// The description as a dict (for tests and `repr`): device, ptr, shape, strides
    /// (bytes), dtype, version, read_only.
    pub fn describe<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("device_type", self.device.0)?;
        d.set_item("device_name", device_name(self.device.0))?;
        d.set_item("device_id", self.device.1)?;
        d.set_item("ptr", self.ptr)?;
        d.set_item("shape", self.shape.clone())?;
        d.set_item("strides", self.strides.clone())?;
        d.set_item("dtype", crate::dtype::numpy_dtype(py, self.element))?;
        d.set_item("version", self.version)?;
        d.set_item("read_only", self.read_only)?;
        Ok(d)
    }
}

/// C-order byte strides of `shape` with elements of `size` bytes (`None` on overflow).
fn c_order_strides(shape: &[usize], size: usize) -> Option<Vec<isize>> {
    let mut strides = vec![0isize; shape.len()];
    let mut step = isize::try_from(size).ok()?;
    for (i, &d) in shape.iter().enumerate().rev() {
        strides[i] = step;
        step = step.checked_mul(isize::try_from(d).ok()?)?;
    }
    Some(strides)
}

/// The element type of a DLPack dtype.
fn element_of(dtype: DlDataType) -> PyResult<ElementType> {
    let element = match (dtype.code, dtype.bits, dtype.lanes) {
        (1, 8, 1) => Some(ElementType::U8),
        (0, 8, 1) => Some(ElementType::I8),
        (1, 16, 1) => Some(ElementType::U16),
        (0, 16, 1) => Some(ElementType::I16),
        (1, 32, 1) => Some(ElementType::U32),
        (0, 32, 1) => Some(ElementType::I32),
        (2, 16, 1) => Some(ElementType::F16),
        (2, 32, 1) => Some(ElementType::F32),
        (2, 64, 1) => Some(ElementType::F64),
        _ => None,
    };
    element.ok_or_else(|| {
        let kind = match dtype.code {
            0 => "int",
            1 => "uint",
            2 => "float",
            3 => "opaque handle",
            4 => "bfloat",
            5 => "complex",
            6 => "bool",
            _ => "unknown code",
        };
        PyTypeError::new_err(format!(
            "DLPack dtype {kind} (code {}) of {} bits, {} lane(s) is not supported; supported: uint8, int8, uint16, int16, uint32, int32, float16, float32, float64",
            dtype.code, dtype.bits, dtype.lanes
        ))
    })
}

/// `object.__dlpack_device__()`: `(device type, device id)`.
pub fn device_of(object: &Bound<'_, PyAny>) -> PyResult<(i32, i32)> {
    let type_name = object.get_type().name()?.to_string();
    let device = object.call_method0("__dlpack_device__").map_err(|e| {
        PyTypeError::new_err(format!(
            "{type_name} has no working __dlpack_device__ ({e}); DLPack producers define both __dlpack__ and __dlpack_device__"
        ))
    })?;
    let (kind, id): (i32, i32) = device.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "{type_name}.__dlpack_device__() returned {}, not (device_type, device_id)",
            device.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })?;
    Ok((kind, id))
}

/// Refuses `device` unless it is CUDA memory (`kDLCUDA`, `kDLCUDAManaged`), naming it.
pub fn require_cuda(type_name: &str, device: (i32, i32)) -> PyResult<()> {
    if matches!(device.0, DEVICE_CUDA | DEVICE_CUDA_MANAGED) {
        return Ok(());
    }
    Err(PyTypeError::new_err(format!(
        "CudaSource takes CUDA device memory (an object with __cuda_array_interface__, or with __dlpack__ on a CUDA device); {type_name}.__dlpack_device__() is ({}, {}): device type {} ({}), not {DEVICE_CUDA} (kDLCUDA) or {DEVICE_CUDA_MANAGED} (kDLCUDAManaged). Show host arrays with sluice.ArraySource",
        device.0,
        device.1,
        device.0,
        device_name(device.0)
    )))
}

/// Calls `object.__dlpack__(stream=stream, max_version=(1, 1))` (falling back to
/// `__dlpack__(stream=stream)` for producers that predate `max_version`) and consumes the
/// capsule. `stream` is the consumer's stream in the protocol's terms: `None` for host memory
/// or no synchronization, 1 the legacy default CUDA stream, 2 the per-thread default, else a
/// `CUstream` handle; the producer makes that stream wait for its pending work.
pub fn import(object: &Bound<'_, PyAny>, stream: Option<u64>) -> PyResult<ManagedTensor> {
    let py = object.py();
    let kwargs = PyDict::new(py);
    kwargs.set_item("stream", stream)?;
    kwargs.set_item("max_version", PyTuple::new(py, [1u32, 1])?)?;
    let capsule = match object.call_method("__dlpack__", (), Some(&kwargs)) {
        Ok(c) => c,
        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
            kwargs.del_item("max_version")?;
            object.call_method("__dlpack__", (), Some(&kwargs))?
        }
        Err(e) => return Err(e),
    };
    ManagedTensor::from_capsule(&capsule)
}

/// `sluice._sluice._dlpack_describe(object_or_capsule, *, cuda=False)`: consumes a DLPack
/// capsule (or asks `object` for one) and returns what sluice read from it, releasing it
/// before returning. With `cuda=True` the device is checked first, as `CudaSource` does.
/// For tests of the parsing on machines without CUDA.
#[pyfunction]
#[pyo3(signature = (object, *, cuda = false))]
pub fn _dlpack_describe<'py>(
    object: &Bound<'py, PyAny>,
    cuda: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let py = object.py();
    crate::errors::guard(|| {
        let tensor = if object.cast::<PyCapsule>().is_ok() {
            ManagedTensor::from_capsule(object)?
        } else {
            let device = device_of(object)?;
            if cuda {
                require_cuda(&object.get_type().name()?.to_string(), device)?;
            }
            import(object, None)?
        };
        tensor.describe(py)
    })
}
