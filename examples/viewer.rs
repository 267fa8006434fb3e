//! A window: a 2048 x 2048 field through a colormap, with a brush that paints into the source
//! every frame. Drag to pan, scroll to zoom about the cursor, `R` to reset the view, `S` for a
//! screenshot, `Escape` to quit. The side panel holds the layer's controls; the status bar
//! shows what the last frame uploaded and redrew: a painted stroke uploads its chunk and
//! redraws only the pixels around it.
//!
//! `cargo run --release --example viewer`
//!
//! With `SLUICE_VIEWER_FRAMES=N` it quits after N frames and writes the last one to
//! `target/sluice-out/viewer.png` (how it is checked without a screen, under Xvfb).

use std::sync::Arc;

use sluice::ndarray::Array2;
use sluice::prelude::*;
use sluice::view::Viewer;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const SIDE: usize = 2048;
const BRUSH: usize = 32;

/// The field: smooth waves, values in about [-2, 2].
fn field() -> Array2<f32> {
    Array2::from_shape_fn((SIDE, SIDE), |(y, x)| {
        let (u, v) = (x as f32 / 97.0, y as f32 / 131.0);
        u.sin() + v.cos() + 0.5 * ((u + v) * 0.7).sin()
    })
}

/// Paints the brush along a circle, one stamp per frame.
fn paint(source: &ArraySource, frame: u64) -> Result<(), SourceError> {
    let t = frame as f32 * 0.05;
    let r = SIDE as f32 * 0.3;
    let c = SIDE as f32 / 2.0;
    let x = (c + r * t.cos()) as usize;
    let y = (c + r * (1.3 * t).sin()) as usize;
    let stamp = Array2::from_elem((BRUSH, BRUSH), 2.5f32 * (0.5 + 0.5 * (3.0 * t).sin()));
    source.write(&[y, x], stamp.view()).map(|_| ())
}

fn main() -> Res<()> {
    let stop_after: Option<u64> = match std::env::var("SLUICE_VIEWER_FRAMES") {
        Ok(v) => Some(
            v.trim()
                .parse()
                .map_err(|e| format!("SLUICE_VIEWER_FRAMES={v:?}: {e}"))?,
        ),
        Err(_) => None,
    };
    let source = Arc::new(ArraySource::new(field())?);
    let mut scene = Scene::new();
    scene.set_background([0.08, 0.08, 0.1, 1.0]);
    let node = scene.add(
        Image::new(source.clone())
            .with_clim(-2.0, 2.5)?
            .with_colormap(Colormap::Viridis),
    );
    let painter = source.clone();
    // The first painting error, reported once the window has closed.
    let paint_error = std::rc::Rc::new(std::cell::RefCell::new(None));
    let paint_error_in = paint_error.clone();
    let mut viewer = Viewer::new()
        .title("sluice viewer")
        .size(1024, 768)
        .layer(node, "field")
        .on_frame(move |frame| match paint(&painter, frame.index) {
            Ok(()) => frame.animate = true,
            Err(e) => {
                paint_error_in.borrow_mut().get_or_insert(e);
            }
        });
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/sluice-out/viewer.png");
    if let Some(n) = stop_after {
        viewer = viewer.quit_after_frames(n).save_last_frame(&out);
    }
    let report = viewer.show(scene)?;
    if let Some(e) = paint_error.borrow_mut().take() {
        return Err(e.into());
    }
    if stop_after.is_some() {
        println!(
            "{} frames ({} drawn); the last one is in {}",
            report.frames,
            report.frames_rendered,
            out.display()
        );
    }
    Ok(())
}
