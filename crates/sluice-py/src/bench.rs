//! The Rust API's side of python/bench/bench_python.py, run in the same process so that the
//! Python API's figure is a ratio against the Rust API measured in the same run.

use std::sync::Arc;
use std::time::Instant;

use pyo3::prelude::*;
use sluice_core::ndarray::{Array3, Zip};
use sluice_core::ArraySource;
use sluice_render::{Image, PanZoomCamera, Renderer, Scene};

use crate::errors::{guard, render_error, source_error};

/// Seconds per iteration of: write a whole `n` x `n` RGBA8 image (two arrays, alternating)
/// into an `ArraySource`, render it into a `canvas`^2 target and read the frame back: what
/// `bench_python.py` times through the Python API. `warmup` untimed iterations first.
#[pyfunction]
#[pyo3(signature = (n, canvas, warmup, iters))]
pub fn _rust_full_update_frame(
    py: Python<'_>,
    n: usize,
    canvas: u32,
    warmup: usize,
    iters: usize,
) -> PyResult<Vec<f64>> {
    py.detach(|| {
        guard(|| {
            let mut a = Array3::<u8>::zeros((n, n, 4));
            Zip::indexed(&mut a).for_each(|(y, x, c), v| {
                *v = if c == 3 {
                    255
                } else {
                    ((x * 7 + y * 13 + c * 31) % 251) as u8
                };
            });
            let b = a.mapv(|v| v ^ 0x55);
            let pair = [a, b];
            let source =
                Arc::new(ArraySource::with_channels(pair[0].clone()).map_err(source_error)?);
            let mut scene = Scene::new();
            scene.add(Image::new(source.clone()));
            let mut renderer = Renderer::new().map_err(render_error)?;
            let target = renderer
                .create_target(canvas, canvas)
                .map_err(render_error)?;
            let camera = PanZoomCamera::fit(
                [0.0, 0.0].into(),
                [n as f32, n as f32].into(),
                target.size(),
            );
            let mut times = Vec::with_capacity(iters);
            for i in 0..warmup + iters {
                let start = Instant::now();
                source
                    .write(&[0, 0], pair[i % 2].view())
                    .map_err(source_error)?;
                renderer
                    .render(&scene, &camera, &target)
                    .map_err(render_error)?;
                let frame = renderer.read_image(&target).map_err(render_error)?;
                std::hint::black_box(frame);
                if i >= warmup {
                    times.push(start.elapsed().as_secs_f64());
                }
            }
            Ok(times)
        })
    })
}
