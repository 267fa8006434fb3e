//! The Vulkan half of interop. `device`, `memory`, `semaphore` and `texture` are four of the
//! crate's `unsafe` modules; each states what it owns and why its calls are sound.

pub(crate) mod device;
pub(crate) mod memory;
pub(crate) mod semaphore;
pub(crate) mod texture;
