//! The side panel driven through egui_kittest (by its accessibility tree, as a user would):
//! choosing a colormap, auto-contrast and the clim slider change the rendered pixels to the
//! colormap entries computed on the CPU, and upload nothing.

use std::sync::Arc;

use egui::accesskit::Role;
use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use sluice_core::ndarray::Array2;
use sluice_core::ArraySource;
use sluice_render::{Colormap, Renderer};
use sluice_view::input::Input;
use sluice_view::layers;
use sluice_view::panel::{layer_controls, AUTO_CONTRAST_PERCENTILES};
use sluice_view::{Settings, View};

const W: usize = 40;
const H: usize = 24;

/// Values 0 to 1 with a few outliers at 10, which auto-contrast leaves out.
fn data() -> Array2<f32> {
    Array2::from_shape_fn((H, W), |(y, x)| {
        if x == 0 && y < 3 {
            10.0
        } else {
            (x + y * W) as f32 / (W * H) as f32
        }
    })
}

fn expected(map: &Colormap, v: f32, [lo, hi]: [f64; 2]) -> [u8; 4] {
    let t = ((v as f64 - lo) / (hi - lo)).clamp(0.0, 1.0);
    let n = map.entries().len();
    map.entries()[((t * n as f64) as usize).min(n - 1)]
}

/// Renders the view and checks every pixel against `map` under `clim` (the neighbour entry
/// is accepted for values within 1e-4 of an entry boundary); returns bytes uploaded.
fn render_and_check(renderer: &mut Renderer, view: &View, map: &Colormap, clim: [f64; 2]) -> u64 {
    let before = renderer.counters();
    let target = renderer.create_target(W as u32, H as u32).unwrap();
    let camera = view.fit_camera(target.size());
    renderer.render(&view.scene, &camera, &target).unwrap();
    let uploaded = renderer.counters().since(&before).bytes_uploaded;
    let image = renderer.read_image(&target).unwrap();
    let data = data();
    for y in 0..H {
        for x in 0..W {
            let v = data[[y, x]];
            let got = image.get_pixel(x as u32, y as u32).0;
            let ok = [-1e-4f32, 0.0, 1e-4]
                .iter()
                .any(|d| expected(map, v + d, clim) == got);
            assert!(
                ok,
                "pixel ({x}, {y}) of value {v}: got {got:?}, want {:?}",
                expected(map, v, clim)
            );
        }
    }
    uploaded
}

#[test]
fn colormap_auto_contrast_and_clim_slider_change_pixels_and_upload_nothing() {
    let input = Input::new("ramp", Arc::new(ArraySource::new(data()).unwrap()));
    let settings = Settings {
        clim: Some([0.0, 1.0]),
        ..Settings::default()
    };
    let view = View::build(&[input], &settings).unwrap();
    let node = view.layers[0].node;
    let mut renderer =
        Renderer::with_options(sluice_render::RendererOptions::from_env().unwrap()).unwrap();
    let first = render_and_check(&mut renderer, &view, &Colormap::Gray, [0.0, 1.0]);
    assert_eq!(
        first,
        (W * H * 4) as u64,
        "the first frame uploads the image once"
    );

    let mut harness = Harness::new_ui_state(
        |ui, view: &mut View| {
            layer_controls(ui, &mut view.scene, &mut view.layers);
        },
        view,
    );
    harness.run();

    // Open the colormap box and pick magma.
    harness.get_by_role(Role::ComboBox).click();
    harness.run();
    harness.get_by_label("magma").click();
    harness.run();
    let view = harness.state();
    assert_eq!(layers::colormap(&view.scene, node), Some(Colormap::Magma));
    let uploaded = render_and_check(&mut renderer, view, &Colormap::Magma, [0.0, 1.0]);
    assert_eq!(uploaded, 0, "a colormap change uploads nothing");

    // Auto-contrast: the limits become the data's percentiles, leaving out the outliers.
    harness.get_by_label("auto contrast").click();
    harness.run();
    let view = harness.state();
    let [p_lo, p_hi] = AUTO_CONTRAST_PERCENTILES;
    let want = view.layers[0].stats.percentiles(p_lo, p_hi);
    let clim = layers::clim(&view.scene, node).unwrap();
    assert_eq!(clim, want);
    assert!(
        clim[1] < 1.0 && clim[0] > 0.0,
        "percentile limits {clim:?} exclude the outliers"
    );
    let uploaded = render_and_check(&mut renderer, view, &Colormap::Magma, clim);
    assert_eq!(uploaded, 0, "a contrast change uploads nothing");

    // The upper limit's slider, set through its accessibility action as a screen reader would.
    harness
        .get_by_role_and_label(Role::Slider, "clim high")
        .set_value_accesskit(0.5);
    harness.run();
    let view = harness.state();
    let moved = layers::clim(&view.scene, node).unwrap();
    assert_eq!(moved, [clim[0], 0.5]);
    let uploaded = render_and_check(&mut renderer, view, &Colormap::Magma, moved);
    assert_eq!(uploaded, 0, "a slider change uploads nothing");
}

/// Two layered inputs of one value each, gray over [0, 1]: the second draws over the first
/// until its "down" button (or the first's "up") trades their places, which uploads nothing.
#[test]
fn moving_a_layer_changes_which_one_is_on_top_and_uploads_nothing() {
    let constant = |name: &str, v: f32| {
        Input::new(
            name,
            Arc::new(ArraySource::new(Array2::from_elem((H, W), v)).unwrap()),
        )
    };
    let settings = Settings {
        clim: Some([0.0, 1.0]),
        ..Settings::default()
    };
    let view = View::build(
        &[constant("dark", 0.25), constant("light", 0.75)],
        &settings,
    )
    .unwrap();
    let mut renderer =
        Renderer::with_options(sluice_render::RendererOptions::from_env().unwrap()).unwrap();
    let target = renderer.create_target(W as u32, H as u32).unwrap();
    let shown = |renderer: &mut Renderer, view: &View| {
        let before = renderer.counters();
        renderer
            .render(&view.scene, &view.fit_camera(target.size()), &target)
            .unwrap();
        let uploaded = renderer.counters().since(&before).bytes_uploaded;
        (
            renderer.read_image(&target).unwrap().get_pixel(5, 5).0,
            uploaded,
        )
    };
    let gray = |v: f32| expected(&Colormap::Gray, v, [0.0, 1.0]);
    let (pixel, _) = shown(&mut renderer, &view);
    assert_eq!(pixel, gray(0.75), "the later layer is on top");

    let mut harness = Harness::new_ui_state(
        |ui, view: &mut View| {
            layer_controls(ui, &mut view.scene, &mut view.layers);
        },
        view,
    );
    harness.run();
    // The first layer's "up" button (the second layer's is disabled: it is on top).
    harness.get_all_by_label("up").next().unwrap().click();
    harness.run();
    let view = harness.state();
    assert_eq!(view.layers[0].name, "light");
    assert_eq!(view.layers[1].name, "dark");
    let (pixel, uploaded) = shown(&mut renderer, view);
    assert_eq!(pixel, gray(0.25), "the moved layer is on top");
    assert_eq!(uploaded, 0, "reordering uploads nothing");
}
