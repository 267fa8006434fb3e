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

/// How a 3-D camera projects.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Projection {
    /// Perspective with a vertical field of view in degrees.
    Perspective {
        /// Vertical field of view, degrees.
        fov_y_degrees: f32,
    },
    /// Orthographic, showing `height` world units vertically.
    Orthographic {
        /// World units from the bottom to the top of the viewport.
        height: f32,
    },
}

impl Projection {
    fn matrix(&self, viewport: [u32; 2], near: f32, far: f32) -> Mat4 {
        let aspect = viewport[0].max(1) as f32 / viewport[1].max(1) as f32;
        match *self {
            Projection::Perspective { fov_y_degrees } => {
                Mat4::perspective_rh(fov_y_degrees.to_radians(), aspect, near, far)
            }
            Projection::Orthographic { height } => {
                let h = height * 0.5;
                Mat4::orthographic_rh(-h * aspect, h * aspect, -h, h, near, far)
            }
        }
    }
}

/// The orientation shared by the 3-D cameras: yaw about the up axis, then pitch about the
/// right axis. With both zero the camera looks along +z with +x to the right and -y up, so
/// that a volume seen from the front looks like its planes shown as images (row 0 at the top).
fn orientation(yaw: f32, pitch: f32) -> (Vec3, Vec3) {
    let q =
        glam::Quat::from_axis_angle(Vec3::NEG_Y, yaw) * glam::Quat::from_axis_angle(Vec3::X, pitch);
    (q * Vec3::Z, q * Vec3::NEG_Y)
}

/// A camera orbiting a target point: turntable rotation (azimuth about the up axis, elevation
/// above the horizontal plane), perspective or orthographic.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OrbitCamera {
    /// The point looked at and orbited.
    pub target: Vec3,
    /// Distance from the target to the eye.
    pub distance: f32,
    /// Rotation about the up axis, radians.
    pub azimuth: f32,
    /// Rotation above the horizontal plane, radians (clamped short of the poles).
    pub elevation: f32,
    /// The projection.
    pub projection: Projection,
    /// Near clipping distance.
    pub near: f32,
    /// Far clipping distance.
    pub far: f32,
}

impl OrbitCamera {
    /// A perspective camera (30 degrees field of view) looking at the box `min..max` whole
    /// from the front (along +z), at the given azimuth and elevation in degrees.
    pub fn fit(min: Vec3, max: Vec3, azimuth_degrees: f32, elevation_degrees: f32) -> Self {
        let fov = 30.0f32;
        let radius = ((max - min).length() * 0.5).max(f32::MIN_POSITIVE);
        let distance = radius / (fov.to_radians() * 0.5).sin() * 1.05;
        OrbitCamera {
            target: (min + max) * 0.5,
            distance,
            azimuth: azimuth_degrees.to_radians(),
            elevation: elevation_degrees.to_radians(),
            projection: Projection::Perspective { fov_y_degrees: fov },
            near: (distance - radius * 1.5).max(distance * 1e-3),
            far: distance + radius * 1.5,
        }
    }

    /// The same camera with an orthographic projection showing the fitted box whole.
    #[must_use]
    pub fn orthographic(mut self) -> Self {
        let radius = self.distance * (15.0f32.to_radians()).sin() / 1.05;
        self.projection = Projection::Orthographic {
            height: radius * 2.0 * 1.05,
        };
        self
    }

    /// Turns the camera about the target by `d_azimuth` and `d_elevation` radians.
    pub fn orbit(&mut self, d_azimuth: f32, d_elevation: f32) {
        self.azimuth += d_azimuth;
        let limit = std::f32::consts::FRAC_PI_2 - 1e-3;
        self.elevation = (self.elevation + d_elevation).clamp(-limit, limit);
    }

    /// Moves the eye towards (`factor` < 1) or away from the target.
    pub fn dolly(&mut self, factor: f32) {
        self.distance *= factor;
        self.near *= factor;
        self.far *= factor;
    }

    /// The eye position.
    pub fn eye(&self) -> Vec3 {
        let (forward, _) = orientation(self.azimuth, -self.elevation);
        self.target - forward * self.distance
    }

    /// The view matrix (world to eye coordinates).
    pub fn view(&self) -> Mat4 {
        let (forward, up) = orientation(self.azimuth, -self.elevation);
        Mat4::look_to_rh(self.eye(), forward, up)
    }
}

impl Camera for OrbitCamera {
    fn view_projection(&self, viewport: [u32; 2]) -> Mat4 {
        self.projection.matrix(viewport, self.near, self.far) * self.view()
    }
}

/// A first-person camera: a position and a heading (yaw, pitch), moved from code.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlyCamera {
    /// Eye position.
    pub position: Vec3,
    /// Heading about the up axis, radians (0: looking along +z).
    pub yaw: f32,
    /// Heading above the horizontal plane, radians.
    pub pitch: f32,
    /// The projection.
    pub projection: Projection,
    /// Near clipping distance.
    pub near: f32,
    /// Far clipping distance.
    pub far: f32,
}

impl FlyCamera {
    /// A perspective camera (60 degrees) at `position` looking along +z.
    pub fn new(position: Vec3, near: f32, far: f32) -> Self {
        FlyCamera {
            position,
            yaw: 0.0,
            pitch: 0.0,
            projection: Projection::Perspective {
                fov_y_degrees: 60.0,
            },
            near,
            far,
        }
    }

    /// The unit view direction.
    pub fn forward(&self) -> Vec3 {
        orientation(self.yaw, -self.pitch).0
    }

    /// Moves along the view direction (negative: backwards).
    pub fn move_forward(&mut self, distance: f32) {
        self.position += self.forward() * distance;
    }

    /// Turns the heading by `d_yaw` and `d_pitch` radians.
    pub fn turn(&mut self, d_yaw: f32, d_pitch: f32) {
        self.yaw += d_yaw;
        let limit = std::f32::consts::FRAC_PI_2 - 1e-3;
        self.pitch = (self.pitch + d_pitch).clamp(-limit, limit);
    }
}

impl Camera for FlyCamera {
    fn view_projection(&self, viewport: [u32; 2]) -> Mat4 {
        let (forward, up) = orientation(self.yaw, -self.pitch);
        self.projection.matrix(viewport, self.near, self.far)
            * Mat4::look_to_rh(self.position, forward, up)
    }
}

#[cfg(test)]
mod tests_3d {
    use super::*;

    fn to_screen(m: Mat4, p: Vec3, vp: [u32; 2]) -> Vec3 {
        let c = m * p.extend(1.0);
        let n = c.truncate() / c.w;
        Vec3::new(
            (n.x + 1.0) * 0.5 * vp[0] as f32,
            (1.0 - n.y) * 0.5 * vp[1] as f32,
            n.z,
        )
    }

    #[test]
    fn front_view_looks_along_z_with_rows_down() {
        let vp = [100, 100];
        let cam = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(10.0), 0.0, 0.0);
        assert!((cam.eye() - Vec3::new(5.0, 5.0, 5.0 - cam.distance)).length() < 1e-4);
        let m = cam.view_projection(vp);
        let centre = to_screen(m, Vec3::splat(5.0), vp);
        assert!((centre.truncate() - glam::Vec2::splat(50.0)).length() < 1e-3);
        let right = to_screen(m, Vec3::new(9.0, 5.0, 5.0), vp);
        let down = to_screen(m, Vec3::new(5.0, 9.0, 5.0), vp);
        assert!(right.x > 55.0 && (right.y - 50.0).abs() < 1e-3);
        assert!(down.y > 55.0 && (down.x - 50.0).abs() < 1e-3);
        let near = to_screen(m, Vec3::new(5.0, 5.0, 0.0), vp);
        let far = to_screen(m, Vec3::new(5.0, 5.0, 10.0), vp);
        assert!(near.z < far.z && (0.0..=1.0).contains(&near.z) && (0.0..=1.0).contains(&far.z));
    }

    #[test]
    fn azimuth_turns_about_the_up_axis() {
        let mut cam = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(2.0), 90.0, 0.0);
        let e = cam.eye() - cam.target;
        assert!(
            e.y.abs() < 1e-4 && e.z.abs() < 1e-3 && e.x.abs() > 1.0,
            "{e}"
        );
        let above = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(2.0), 0.0, 30.0);
        assert!(
            above.eye().y < above.target.y,
            "positive elevation looks from above (up is -y)"
        );
        cam.orbit(0.0, 10.0);
        assert!(cam.elevation < std::f32::consts::FRAC_PI_2);
        let mut fly = FlyCamera::new(Vec3::ZERO, 0.1, 100.0);
        fly.move_forward(2.0);
        assert!((fly.position - Vec3::new(0.0, 0.0, 2.0)).length() < 1e-5);
    }
}
