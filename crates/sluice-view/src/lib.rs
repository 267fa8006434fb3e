//! # sluice-view: look at data
//!
//! A window for library users ([`Viewer`]): it presents a renderer's target through egui (no
//! shader or wgpu type in the user's code), with mouse cameras (2-D: drag to pan, scroll to
//! zoom; 3-D: drag to orbit, right-drag or shift-drag to pan, scroll to zoom), a side panel of
//! layer controls and a status bar. It redraws only on input, on a control change, when a
//! source wakes the renderer, or through a [`RedrawHandle`]: idle, it costs nothing.
//!
//! The `sluice` binary ([`cli`]) opens files ([`input`]) and Zarr / OME-Zarr stores from a
//! directory or a URL ([`store`]), and shows them (`view`), renders them to PNG (`render`, once
//! every chunk shown has loaded), describes them (`info`), and streams a live source (`demo
//! stream`). The status bar counts the chunks of lazy sources ([`chunks`]).
//!
//! Errors are [`ViewError`]s naming the path, value or numbers involved.

pub mod chunks;
pub mod cli;
mod error;
pub mod input;
pub mod layers;
pub mod panel;
mod progress;
pub mod shared;
pub mod store;
mod window;

pub use error::ViewError;
pub use layers::{Layer, LayerKind, Settings, ShowAs, View, ViewCamera};
pub use progress::Progress;
pub use store::ZarrInput;
pub use window::{Frame, RedrawHandle, Viewer, ViewerReport};
