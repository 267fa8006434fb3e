//! The Vulkan half of interop. `device`, `memory` and `semaphore` are three of the crate's
//! `unsafe` modules; each states what it owns and why its calls are sound.

pub(crate) mod device;
pub(crate) mod memory;
pub(crate) mod semaphore;
