//! Device setup: the process-wide wgpu instances and devices, and the adapter choice.

use crate::error::RenderError;

/// The adapters of one set of native backends, enumerated once per process under a lock and
/// kept, with the instance they came from, for the life of the process: instances are cheap to
/// share (adapters and devices keep theirs alive) and costly to create.
///
/// Enumerating once is also what keeps NVIDIA's Vulkan driver 580 up: with four test threads
/// each enumerating the adapters of the shared instance (the first step of every renderer and
/// `Interop`), one of them died of a SIGSEGV inside the driver's physical-device queries
/// (`libnvidia-eglcore`, under wgpu-hal's `expose_adapter`) in about 1 run of 40, on an H100,
/// in two test binaries. The Vulkan spec allows those queries from many threads; this
/// driver was seen not to.
///
/// GL is the exception: a GL adapter is one GL context, current on one thread at a time, so
/// every GL renderer enumerates on an instance (and so an adapter and context) of its own.
fn adapters(backends: wgpu::Backends) -> Vec<wgpu::Adapter> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    if backends.contains(wgpu::Backends::GL) {
        let instance = wgpu::Instance::new(desc);
        return pollster::block_on(instance.enumerate_adapters(backends));
    }
    // Held while enumerating: no two threads query the driver at once.
    let mut enumerated = ENUMERATED.lock();
    if let Some((_, adapters)) = enumerated.iter().find(|(b, _)| *b == backends) {
        return adapters.clone();
    }
    let instance = wgpu::Instance::new(desc);
    let adapters = pollster::block_on(instance.enumerate_adapters(backends));
    #[cfg(test)]
    ENUMERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    enumerated.push((backends, adapters.clone()));
    adapters
}

/// The native adapters enumerated so far, per set of backends (see [`adapters`]).
type Enumerated = Vec<(wgpu::Backends, Vec<wgpu::Adapter>)>;
static ENUMERATED: parking_lot::Mutex<Enumerated> = parking_lot::Mutex::new(Vec::new());

/// How many times [`adapters`] asked the driver (native backends), for the tests.
#[cfg(test)]
static ENUMERATIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The devices renderers share, opened once each and kept for the life of the process.
type Opened = (wgpu::AdapterInfo, wgpu::Device, wgpu::Queue);
static DEVICES: parking_lot::Mutex<Vec<Opened>> = parking_lot::Mutex::new(Vec::new());

/// Waits until every device sluice's renderers share has finished the work submitted to it,
/// and has let go of what was dropped. A program that is about to exit calls it after its last
/// frame: the shared devices live as long as the process, and Mesa's lavapipe was seen to
/// crash in its exit handlers (heap corruption while its queue thread still ran a submission)
/// when the process exited with work in flight. `sluice`'s command line and the Python package
/// (at interpreter exit) call it. Renderers made after it work as before. The devices of
/// `sluice_interop::Interop`, kept as long too, are waited for as well ([`keep_until_exit`]).
pub fn wait_for_devices() {
    let mut devices: Vec<wgpu::Device> = DEVICES.lock().iter().map(|(_, d, _)| d.clone()).collect();
    devices.extend(KEPT.lock().iter().cloned());
    for device in devices {
        // An error here is a lost device: nothing is in flight on it any more.
        let _ = device.poll(wgpu::PollType::wait_indefinitely());
    }
}

/// Devices other crates keep for the life of the process (`sluice_interop::Interop`'s),
/// which [`wait_for_devices`] waits for too.
static KEPT: parking_lot::Mutex<Vec<wgpu::Device>> = parking_lot::Mutex::new(Vec::new());

/// Adds `device`, which the caller keeps open until the process exits, to those
/// [`wait_for_devices`] waits for (`sluice_interop::Interop` registers its devices here).
pub fn keep_until_exit(device: &wgpu::Device) {
    let mut kept = KEPT.lock();
    if !kept.iter().any(|d| d == device) {
        kept.push(device.clone());
    }
}

/// The device and queue that renderers made by [`Renderer::new`] and
/// [`Renderer::with_options`] share on `adapter`, opened on first use and kept for the life of
/// the process.
///
/// GL adapters are the exception: a GL context is current on one thread at a time, so each GL
/// renderer opens its own device.
///
/// Sharing is cheaper (one device's worth of driver state and shader caches), and it avoids
/// destroying devices while other threads submit work: NVIDIA's Vulkan driver 580 was seen to
/// deadlock on an H200 when one thread destroyed a device while another submitted to a second
/// one (renderers made and dropped on many threads at once, as parallel tests do). Renderers
/// keep their own proxies, targets and staging; only the device is common.
pub(crate) fn shared_device(
    adapter: &wgpu::Adapter,
) -> Result<(wgpu::Device, wgpu::Queue), RenderError> {
    let info = adapter.get_info();
    // A GL context is current on one thread at a time: GL renderers keep devices of their own.
    let share = info.backend != wgpu::Backend::Gl;
    let mut devices = DEVICES.lock();
    if let Some((_, device, queue)) = devices.iter().find(|(i, _, _)| share && *i == info) {
        return Ok((device.clone(), queue.clone()));
    }
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("sluice"),
        required_features: optional_features(adapter),
        required_limits: adapter.limits(),
        experimental_features: wgpu::ExperimentalFeatures::disabled(),
        memory_hints: wgpu::MemoryHints::Performance,
        trace: wgpu::Trace::Off,
    }))
    .map_err(|e| RenderError::RequestDevice {
        adapter: info.name.clone(),
        reason: e.to_string(),
    })?;
    if share {
        devices.push((info, device.clone(), queue.clone()));
    }
    Ok((device, queue))
}

pub(crate) fn choose_adapter(
    backends: wgpu::Backends,
    filter: Option<&str>,
) -> Result<wgpu::Adapter, RenderError> {
    let describe = |a: &wgpu::Adapter| {
        let i = a.get_info();
        format!("{} ({:?}, {:?})", i.name, i.backend, i.device_type)
    };
    let matches = |a: &wgpu::Adapter| {
        filter.is_none_or(|w| a.get_info().name.to_lowercase().contains(&w.to_lowercase()))
    };
    let score = |a: &wgpu::Adapter| {
        let i = a.get_info();
        let device = match i.device_type {
            wgpu::DeviceType::DiscreteGpu => 4,
            wgpu::DeviceType::IntegratedGpu => 3,
            wgpu::DeviceType::VirtualGpu => 2,
            wgpu::DeviceType::Cpu => 1,
            wgpu::DeviceType::Other => 0,
        };
        let backend = match i.backend {
            wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 2,
            wgpu::Backend::Gl => 1,
            _ => 0,
        };
        device * 10 + backend
    };
    // Native backends first, GL only if they have no match: merely creating a GL instance
    // probes EGL, which is slow and noisy where Vulkan already works.
    let primary = backends & wgpu::Backends::PRIMARY;
    let mut seen = Vec::new();
    for group in [primary, backends - primary] {
        if group.is_empty() {
            continue;
        }
        let adapters = adapters(group);
        seen.extend(adapters.iter().map(describe));
        if let Some(best) = adapters
            .into_iter()
            .filter(|a| matches(a))
            .max_by_key(score)
        {
            return Ok(best);
        }
    }
    Err(RenderError::NoAdapter {
        backends: format!("{backends:?}"),
        filter: filter.map(str::to_string),
        seen,
    })
}

/// The optional device features a renderer uses where `adapter` has them: filterable formats
/// (`FLOAT32_FILTERABLE`, `TEXTURE_FORMAT_16BIT_NORM`: hardware filtering of f32 and u16 data,
/// see docs/architecture.md, "Sampling") and `PIPELINE_CACHE` (pipelines kept on disk). A
/// device opened elsewhere for a renderer (sluice-interop's) asks for the same.
pub fn optional_features(adapter: &wgpu::Adapter) -> wgpu::Features {
    crate::format::sampling_features(adapter.features())
        | (adapter.features() & wgpu::Features::PIPELINE_CACHE)
}

#[cfg(test)]
mod tests {
    use crate::RendererOptions;
    use std::sync::atomic::Ordering;

    /// Threads choosing an adapter at once ask the driver once per set of backends: after
    /// eight of them (and whatever other tests of this binary did), the driver was asked as
    /// many times as there are sets enumerated, not once per call.
    #[test]
    fn adapters_are_enumerated_once_for_all_threads() {
        let options = RendererOptions::from_env().expect("SLUICE_BACKEND and SLUICE_ADAPTER");
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    barrier.wait();
                    options.choose_adapter().expect("a device (lavapipe in CI)");
                });
            }
        });
        let adapter = options.choose_adapter().unwrap();
        if adapter.get_info().backend == wgpu::Backend::Gl {
            // GL adapters are enumerated per renderer (one context each).
            return;
        }
        let enumerated = super::ENUMERATED.lock();
        let asked = super::ENUMERATIONS.load(Ordering::Relaxed);
        assert!(
            !enumerated.is_empty() && asked == enumerated.len(),
            "the driver was asked {asked} times; sets of backends enumerated: {}",
            enumerated.len()
        );
    }
}
