//! Cameras: from world coordinates to clip space.

use glam::{Mat4, Vec2, Vec3};

/// Anything that maps world coordinates to clip space for a viewport of a given size.
pub trait Camera {
    /// The view-projection matrix for a viewport of `viewport` = `[width, height]` pixels.
    fn view_projection(&self, viewport: [u32; 2]) -> Mat4;
}

/// A 2-D camera that pans and zooms over the world's xy plane.
///
/// World y points down the screen by default (row 0 of an image at the top, as in image
/// viewers); [`PanZoomCamera::with_y_up`] flips that. `zoom` is screen pixels per world unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PanZoomCamera {
    /// World point at the viewport's centre.
    pub center: Vec2,
    /// Screen pixels per world unit.
    pub zoom: f32,
    /// Whether world y points up the screen.
    pub y_up: bool,
}

impl Default for PanZoomCamera {
    fn default() -> Self {
        PanZoomCamera {
            center: Vec2::ZERO,
            zoom: 1.0,
            y_up: false,
        }
    }
}

impl PanZoomCamera {
    /// A camera centred on `center` at `zoom` screen pixels per world unit.
    pub fn new(center: Vec2, zoom: f32) -> Self {
        PanZoomCamera {
            center,
            zoom,
            y_up: false,
        }
    }

    /// A camera that shows the world rectangle `min..max` whole, as large as fits in a viewport
    /// of `viewport` pixels, keeping the aspect ratio.
    pub fn fit(min: Vec2, max: Vec2, viewport: [u32; 2]) -> Self {
        let size = (max - min).abs().max(Vec2::splat(f32::MIN_POSITIVE));
        let zoom = (viewport[0] as f32 / size.x).min(viewport[1] as f32 / size.y);
        PanZoomCamera::new((min + max) * 0.5, zoom)
    }

    /// The same camera with world y pointing up the screen.
    #[must_use]
    pub fn with_y_up(mut self) -> Self {
        self.y_up = true;
        self
    }

    /// Moves the view by `delta` screen pixels (content follows the pointer).
    pub fn pan_pixels(&mut self, delta: Vec2) {
        let sign = if self.y_up { -1.0 } else { 1.0 };
        self.center -= Vec2::new(delta.x, sign * delta.y) / self.zoom;
    }

    /// Zooms by `factor` keeping the world point under screen pixel `anchor` in place.
    pub fn zoom_about(&mut self, factor: f32, anchor: Vec2, viewport: [u32; 2]) {
        let before = self.screen_to_world(anchor, viewport);
        self.zoom *= factor;
        let after = self.screen_to_world(anchor, viewport);
        self.center += before - after;
    }

    /// The world point under screen pixel position `screen` (origin top-left, y down).
    pub fn screen_to_world(&self, screen: Vec2, viewport: [u32; 2]) -> Vec2 {
        let half = Vec2::new(viewport[0] as f32, viewport[1] as f32) * 0.5;
        let mut d = (screen - half) / self.zoom;
        if self.y_up {
            d.y = -d.y;
        }
        self.center + d
    }

    /// The screen pixel position (origin top-left, y down) of world point `world`.
    pub fn world_to_screen(&self, world: Vec2, viewport: [u32; 2]) -> Vec2 {
        let half = Vec2::new(viewport[0] as f32, viewport[1] as f32) * 0.5;
        let mut d = (world - self.center) * self.zoom;
        if self.y_up {
            d.y = -d.y;
        }
        half + d
    }
}

impl Camera for PanZoomCamera {
    fn view_projection(&self, viewport: [u32; 2]) -> Mat4 {
        let sy = if self.y_up { 1.0 } else { -1.0 };
        let scale = Vec3::new(
            2.0 * self.zoom / viewport[0].max(1) as f32,
            sy * 2.0 * self.zoom / viewport[1].max(1) as f32,
            1.0,
        );
        Mat4::from_scale(scale)
            * Mat4::from_translation(Vec3::new(-self.center.x, -self.center.y, 0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn screen_and_world_round_trip() {
        let vp = [640, 480];
        let mut cam = PanZoomCamera::new(Vec2::new(10.0, 20.0), 4.0);
        let w = Vec2::new(13.0, 17.5);
        let s = cam.world_to_screen(w, vp);
        assert_eq!(s, Vec2::new(320.0 + 12.0, 240.0 - 10.0));
        assert!((cam.screen_to_world(s, vp) - w).length() < 1e-5);
        cam.zoom_about(2.0, s, vp);
        assert!((cam.world_to_screen(w, vp) - s).length() < 1e-4);
    }

    #[test]
    fn projection_matches_screen_mapping() {
        let vp = [200, 100];
        let cam = PanZoomCamera::fit(Vec2::ZERO, Vec2::new(50.0, 50.0), vp);
        assert_eq!(cam.zoom, 2.0);
        let w = Vec2::new(40.0, 10.0);
        let clip = cam.view_projection(vp) * w.extend(0.0).extend(1.0);
        let s = Vec2::new((clip.x + 1.0) * 0.5 * 200.0, (1.0 - clip.y) * 0.5 * 100.0);
        assert!((s - cam.world_to_screen(w, vp)).length() < 1e-4);
    }
}
