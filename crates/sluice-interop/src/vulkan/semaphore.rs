//! Timeline semaphores shared by file descriptor (`VK_KHR_external_semaphore_fd`), waited on
//! and signalled by the interop device's queue around its submits.
//!
//! One of the crate's `unsafe` modules: it creates, exports, imports and destroys
//! `VkSemaphore`s with `ash`, and queues waits and signals on wgpu's queue through
//! `wgpu::hal` (`Queue::add_wait_semaphore` / `add_signal_semaphore`, drained into the next
//! `Queue::submit`). A semaphore is destroyed only once no submitted or queued work uses it.

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ash::vk;
use wgpu::hal::api::Vulkan;

use crate::error::InteropError;
use crate::interop::Interop;

const OPAQUE_FD: vk::ExternalSemaphoreHandleTypeFlags =
    vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD;

/// How long dropping a semaphore waits for GPU work that still uses it before leaking it
/// (a producer that died without signalling would otherwise hang the drop).
const DROP_TIMEOUT: Duration = Duration::from_secs(10);

/// A Vulkan timeline semaphore on the interop device that another API or process shares by
/// file descriptor: created here and exported, or imported from elsewhere.
///
/// Values only grow. The interop device's queue waits for a value before its next submit
/// ([`SharedSemaphore::wait_before_next_submit`]) and signals one after it
/// ([`SharedSemaphore::signal_after_next_submit`]); CUDA or another process does the same on
/// its side.
pub struct SharedSemaphore {
    interop: Interop,
    handle: vk::Semaphore,
    /// The highest value queued or submitted work waits for.
    pending_wait: AtomicU64,
    /// The highest value queued or submitted work signals.
    pending_signal: AtomicU64,
}

impl SharedSemaphore {
    /// A new exportable timeline semaphore at value 0.
    pub(crate) fn create(interop: &Interop) -> Result<Self, InteropError> {
        // Only exportable where the device can export it.
        interop.semaphore_fd()?;
        let mut timeline = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(0);
        let mut export = vk::ExportSemaphoreCreateInfo::default().handle_types(OPAQUE_FD);
        let info = vk::SemaphoreCreateInfo::default()
            .push_next(&mut timeline)
            .push_next(&mut export);
        // SAFETY: a valid create info whose pNext chain lives until the call returns; the
        // device supports exporting timeline semaphores as opaque fds (checked at open).
        let handle = unsafe { interop.vulkan().raw.create_semaphore(&info, None) }
            .map_err(|e| InteropError::vulkan("vkCreateSemaphore (timeline, exportable)", e))?;
        Ok(SharedSemaphore {
            interop: interop.clone(),
            handle,
            pending_wait: AtomicU64::new(0),
            pending_signal: AtomicU64::new(0),
        })
    }

    /// Imports a timeline semaphore exported as an opaque fd (the fd is duplicated; the caller
    /// keeps its own).
    pub(crate) fn import(interop: &Interop, fd: &OwnedFd) -> Result<Self, InteropError> {
        let semaphore_fd = interop.semaphore_fd()?;
        let mut timeline = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(0);
        let info = vk::SemaphoreCreateInfo::default().push_next(&mut timeline);
        // SAFETY: a valid create info whose pNext chain lives until the call returns.
        let handle = unsafe { interop.vulkan().raw.create_semaphore(&info, None) }
            .map_err(|e| InteropError::vulkan("vkCreateSemaphore (timeline)", e))?;
        let semaphore = SharedSemaphore {
            interop: interop.clone(),
            handle,
            pending_wait: AtomicU64::new(0),
            pending_signal: AtomicU64::new(0),
        };
        let fd = fd.try_clone()?;
        let import = vk::ImportSemaphoreFdInfoKHR::default()
            .semaphore(handle)
            .handle_type(OPAQUE_FD)
            .fd(fd.as_raw_fd());
        // SAFETY: `handle` is a new semaphore nothing uses yet; the fd is an open descriptor
        // we own (a duplicate).
        unsafe { semaphore_fd.import_semaphore_fd(&import) }
            .map_err(|e| InteropError::vulkan("vkImportSemaphoreFdKHR", e))?;
        // The import succeeded: Vulkan owns the fd now.
        let _ = fd.into_raw_fd();
        Ok(semaphore)
    }

    /// A new file descriptor for the semaphore, for CUDA or another process to import. Each
    /// call returns a new one; the caller owns it.
    pub fn export_fd(&self) -> Result<OwnedFd, InteropError> {
        let semaphore_fd = self.interop.semaphore_fd()?;
        let info = vk::SemaphoreGetFdInfoKHR::default()
            .semaphore(self.handle)
            .handle_type(OPAQUE_FD);
        // SAFETY: the semaphore is alive and was created exportable as an opaque fd (imported
        // ones re-export the same payload, which Vulkan allows for opaque fds).
        let fd = unsafe { semaphore_fd.get_semaphore_fd(&info) }
            .map_err(|e| InteropError::vulkan("vkGetSemaphoreFdKHR", e))?;
        // SAFETY: vkGetSemaphoreFdKHR returned a new descriptor that nobody else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Makes the interop device's next `Queue::submit` wait until the semaphore reaches
    /// `value` before any of its commands run.
    pub fn wait_before_next_submit(&self, value: u64) {
        self.pending_wait.fetch_max(value, Ordering::AcqRel);
        self.with_hal_queue(|queue| {
            queue.add_wait_semaphore(
                self.handle,
                Some(value),
                vk::PipelineStageFlags::ALL_COMMANDS,
            )
        });
    }

    /// Makes the interop device's next `Queue::submit` signal `value` once all its commands
    /// have finished. Values must grow from one signal to the next.
    pub fn signal_after_next_submit(&self, value: u64) {
        self.pending_signal.fetch_max(value, Ordering::AcqRel);
        self.with_hal_queue(|queue| queue.add_signal_semaphore(self.handle, Some(value)));
    }

    /// The semaphore's current value.
    pub fn value(&self) -> Result<u64, InteropError> {
        // SAFETY: the semaphore is a live timeline semaphore of this device.
        unsafe {
            self.interop
                .vulkan()
                .raw
                .get_semaphore_counter_value(self.handle)
        }
        .map_err(|e| InteropError::vulkan("vkGetSemaphoreCounterValue", e))
    }

    /// Blocks until the semaphore reaches `value` or `timeout` passes; returns whether it did.
    pub fn wait(&self, value: u64, timeout: Duration) -> Result<bool, InteropError> {
        let semaphores = [self.handle];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default()
            .semaphores(&semaphores)
            .values(&values);
        let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: the semaphore is a live timeline semaphore of this device; the arrays live
        // until the call returns.
        match unsafe { self.interop.vulkan().raw.wait_semaphores(&info, nanos) } {
            Ok(()) => Ok(true),
            Err(vk::Result::TIMEOUT) => Ok(false),
            Err(e) => Err(InteropError::vulkan("vkWaitSemaphores", e)),
        }
    }

    /// Signals `value` from the host (it must be greater than the current value and than any
    /// pending signal).
    pub fn signal(&self, value: u64) -> Result<(), InteropError> {
        let info = vk::SemaphoreSignalInfo::default()
            .semaphore(self.handle)
            .value(value);
        // SAFETY: the semaphore is a live timeline semaphore of this device.
        unsafe { self.interop.vulkan().raw.signal_semaphore(&info) }
            .map_err(|e| InteropError::vulkan("vkSignalSemaphore", e))
    }

    fn with_hal_queue(&self, f: impl FnOnce(&wgpu::hal::vulkan::Queue)) {
        // SAFETY: the guard is used only to queue a wait or signal of a semaphore of this
        // device, which stays alive until that work completes (see `Drop`).
        let queue = unsafe { self.interop.vulkan().queue.as_hal::<Vulkan>() };
        if let Some(queue) = queue {
            f(&queue);
        }
    }
}

impl Drop for SharedSemaphore {
    fn drop(&mut self) {
        // Work queued but not submitted yet must not reach the GPU with a destroyed handle.
        self.with_hal_queue(|queue| {
            queue.remove_wait_semaphore(self.handle);
            queue.remove_signal_semaphore(self.handle);
        });
        let waits = *self.pending_wait.get_mut();
        let signals = *self.pending_signal.get_mut();
        let pending = waits.max(signals);
        if pending > 0 {
            match self.wait(pending, DROP_TIMEOUT) {
                // Our own signal is the last thing the last batch using the semaphore does:
                // once it is seen, that batch has completed.
                Ok(true) if signals >= waits => {}
                Ok(true) => {
                    // A wait reached does not mean the batch that waited has completed.
                    let _ = self
                        .interop
                        .device()
                        .poll(wgpu::PollType::wait_indefinitely());
                }
                outcome => {
                    log::warn!(
                        "leaking a shared semaphore: value {pending} not reached within {DROP_TIMEOUT:?} ({outcome:?}); GPU work may still use it"
                    );
                    return;
                }
            }
        }
        // SAFETY: no queued work refers to the semaphore (removed above) and submitted work
        // that did has completed (waited above).
        unsafe {
            self.interop
                .vulkan()
                .raw
                .destroy_semaphore(self.handle, None)
        };
    }
}

impl std::fmt::Debug for SharedSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSemaphore")
            .field("handle", &self.handle)
            .field("pending_wait", &self.pending_wait)
            .field("pending_signal", &self.pending_signal)
            .finish()
    }
}

impl Interop {
    /// A new timeline semaphore at value 0 that can be exported as file descriptors. Fails
    /// where the driver lacks `VK_KHR_external_semaphore_fd`.
    pub fn create_semaphore(&self) -> Result<SharedSemaphore, InteropError> {
        SharedSemaphore::create(self)
    }

    /// Imports a timeline semaphore exported as an opaque fd (duplicated; the caller keeps
    /// its own).
    pub fn import_semaphore(
        &self,
        fd: &std::os::fd::OwnedFd,
    ) -> Result<SharedSemaphore, InteropError> {
        SharedSemaphore::import(self, fd)
    }
}
