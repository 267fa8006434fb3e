//! The proxy's path for textures a device upload fills itself (CUDA writes them as arrays on
//! the NVIDIA machine): bound in place of the proxy's own texture, released when the source
//! changes again, and given up for the proxy's own texture when the upload stops providing.
//! A test upload stands in for CUDA here, so these run on any adapter (lavapipe in CI): it
//! fills the textures it provides with `queue.write_texture` and its copies with a buffer.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use common::{assert_pixel, render_pixels};
use parking_lot::Mutex;
use sluice::prelude::*;
use sluice::{
    ChangeLog, Changes, CudaMemory, DeviceCopy, DeviceCopyOutcome, DeviceTexture,
    DeviceTextureRequest, DeviceUpload, DeviceUploadError, ReadRequest, ReadStatus, RenderError,
    Residency, SampledInPlace, SourceError, Version,
};
use wgpu::util::DeviceExt;

const W: usize = 64;
const H: usize = 24;

/// The colour the test source holds at (x, y) in version `frame`.
fn pattern(x: usize, y: usize, frame: usize) -> [u8; 4] {
    [
        (x * 3 + y + 40 * frame) as u8,
        (y * 5 + 7) as u8,
        ((x ^ y) + 2 * frame) as u8,
        255,
    ]
}

fn frame_bytes(frame: usize) -> Vec<u8> {
    (0..H)
        .flat_map(|y| (0..W).flat_map(move |x| pattern(x, y, frame)))
        .collect()
}

#[track_caller]
fn assert_frame(img: &image::RgbaImage, frame: usize) {
    for y in 0..img.height() {
        for x in 0..img.width() {
            assert_pixel(img, x, y, pattern(x as usize, y as usize, frame), 0);
        }
    }
}

/// A source that says its bytes are in (made-up) CUDA memory; only the test upload reads it.
struct DeviceSide {
    log: Mutex<ChangeLog>,
    frame: AtomicUsize,
}

impl DeviceSide {
    fn show(&self, frame: usize) {
        self.frame.store(frame, Ordering::SeqCst);
        self.log.lock().record_all();
    }
}

impl DataSource for DeviceSide {
    fn layout(&self) -> Layout {
        Layout::new(Shape::d2(H, W).unwrap(), ElementType::U8, 4).unwrap()
    }

    fn version(&self) -> Version {
        self.log.lock().version()
    }

    fn changes_since(&self, since: Version) -> Changes {
        self.log.lock().since(since)
    }

    fn residency(&self) -> Residency {
        Residency::Cuda(CudaMemory {
            device_uuid: [0; 16],
            ptr: 0x1000,
            row_pitch: W * 4,
            plane_pitch: W * 4 * H,
            stream: 0,
            ready_event: None,
        })
    }

    fn read(&self, _: &ReadRequest<'_>, _: &mut [u8]) -> Result<ReadStatus, SourceError> {
        Err(SourceError::Custom(
            "the test source is not in host memory".into(),
        ))
    }
}

/// Counts the leases alive.
struct Lease(Arc<AtomicUsize>);

impl Drop for Lease {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The frames counted on in-place textures, and whether they are refused (the memory handed
/// back since the frame took the source's changes).
#[derive(Default)]
struct InPlaceFrames {
    counted: AtomicUsize,
    refused: AtomicUsize,
    refuse: AtomicBool,
}

struct InPlace(Arc<InPlaceFrames>);

impl SampledInPlace for InPlace {
    fn begin_frame(&self) -> bool {
        if self.0.refuse.load(Ordering::SeqCst) {
            self.0.refused.fetch_add(1, Ordering::SeqCst);
            return false;
        }
        self.0.counted.fetch_add(1, Ordering::SeqCst);
        true
    }
}

struct TestUpload {
    source: Arc<DeviceSide>,
    provide: AtomicBool,
    /// Provide textures "sampled in place", which ask before each frame.
    in_place: Option<Arc<InPlaceFrames>>,
    /// Provide textures of another format (a faulty upload).
    wrong_format: AtomicBool,
    leases: Arc<AtomicUsize>,
    copies: AtomicUsize,
    requests: Mutex<Vec<(wgpu::TextureFormat, wgpu::Extent3d)>>,
}

impl DeviceUpload for TestUpload {
    fn check(&self, residency: &Residency, _: &Layout) -> Result<(), DeviceUploadError> {
        match residency {
            Residency::Cuda(_) => Ok(()),
            _ => Err(DeviceUploadError::Other(
                "the test upload takes its own source only".into(),
            )),
        }
    }

    fn copy_to_texture(&self, mut copy: DeviceCopy<'_>) -> Result<DeviceCopyOutcome, RenderError> {
        self.copies.fetch_add(1, Ordering::SeqCst);
        let bytes = frame_bytes(self.source.frame.load(Ordering::SeqCst));
        let buffer = copy
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("test device data"),
                contents: &bytes,
                usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::STORAGE,
            });
        let row = (W * 4) as u64;
        let [z, y, x] = copy.region.origin;
        let first = (z * H + y) as u64 * row + x as u64 * 4;
        copy.copy_from_buffer(&buffer, first, row, row * H as u64);
        Ok(DeviceCopyOutcome::Copied)
    }

    fn provide_texture(
        &self,
        request: DeviceTextureRequest<'_>,
    ) -> Result<Option<DeviceTexture>, RenderError> {
        self.requests.lock().push((request.format, request.size));
        if !self.provide.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let format = if self.wrong_format.load(Ordering::SeqCst) {
            wgpu::TextureFormat::R32Uint
        } else {
            request.format
        };
        let texture = request.device.create_texture(&wgpu::TextureDescriptor {
            label: Some("test provided texture"),
            size: request.size,
            mip_level_count: 1,
            sample_count: 1,
            dimension: request.dimension,
            format,
            usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
            view_formats: &[],
        });
        request.queue.write_texture(
            texture.as_image_copy(),
            &frame_bytes(self.source.frame.load(Ordering::SeqCst)),
            wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some((W * 4) as u32),
                rows_per_image: None,
            },
            request.size,
        );
        self.leases.fetch_add(1, Ordering::SeqCst);
        Ok(Some(DeviceTexture {
            view: texture.create_view(&wgpu::TextureViewDescriptor::default()),
            texture,
            lease: Box::new(Lease(self.leases.clone())),
            in_place: self
                .in_place
                .as_ref()
                .map(|frames| Arc::new(InPlace(frames.clone())) as Arc<dyn SampledInPlace>),
        }))
    }
}

fn setup() -> (Renderer, Scene, Arc<DeviceSide>, Arc<TestUpload>) {
    setup_with(None)
}

fn setup_with(
    in_place: Option<Arc<InPlaceFrames>>,
) -> (Renderer, Scene, Arc<DeviceSide>, Arc<TestUpload>) {
    let source = Arc::new(DeviceSide {
        log: Mutex::new(ChangeLog::new(1)),
        frame: AtomicUsize::new(0),
    });
    let upload = Arc::new(TestUpload {
        source: source.clone(),
        provide: AtomicBool::new(true),
        in_place,
        wrong_format: AtomicBool::new(false),
        leases: Arc::new(AtomicUsize::new(0)),
        copies: AtomicUsize::new(0),
        requests: Mutex::new(Vec::new()),
    });
    let mut renderer = common::renderer();
    renderer.set_device_upload(upload.clone());
    let mut scene = Scene::new();
    // Two visuals of one source share its proxy, and so the provided texture.
    scene.add(Image::new(source.clone()));
    let second = scene.add(Image::new(source.clone()));
    scene.set_transform(
        second,
        Mat4::from_translation(Vec3::new(0.0, H as f32, 0.0)),
    );
    (renderer, scene, source, upload)
}

/// Renders both visuals (one above the other) and checks each shows `frame`.
#[track_caller]
fn assert_shows(renderer: &mut Renderer, scene: &Scene, frame: usize) {
    let img = render_pixels(renderer, scene, W as u32, 2 * H as u32);
    let top = image::imageops::crop_imm(&img, 0, 0, W as u32, H as u32).to_image();
    let bottom = image::imageops::crop_imm(&img, 0, H as u32, W as u32, H as u32).to_image();
    assert_frame(&top, frame);
    assert_frame(&bottom, frame);
}

#[test]
fn provided_textures_are_bound_and_released_when_the_source_changes() {
    let (mut renderer, scene, source, upload) = setup();
    assert_shows(&mut renderer, &scene, 0);
    let counters = renderer.counters();
    assert_eq!(counters.textures_provided, 1);
    assert_eq!(
        counters.bytes_uploaded, 0,
        "nothing staged through the host"
    );
    assert_eq!(upload.copies.load(Ordering::SeqCst), 0, "nothing copied");
    assert_eq!(upload.leases.load(Ordering::SeqCst), 1);
    assert_eq!(
        upload.requests.lock()[0],
        (
            wgpu::TextureFormat::Rgba8Uint,
            wgpu::Extent3d {
                width: W as u32,
                height: H as u32,
                depth_or_array_layers: 1
            }
        ),
        "the request names the proxy's own format and size"
    );

    for frame in 1..4 {
        source.show(frame);
        assert_shows(&mut renderer, &scene, frame);
        assert_eq!(
            upload.leases.load(Ordering::SeqCst),
            1,
            "frame {frame}: the texture shown before was released"
        );
    }
    assert_eq!(renderer.counters().textures_provided, 4);
    // No change: nothing is asked again, and the texture stays bound.
    assert_shows(&mut renderer, &scene, 3);
    assert_eq!(renderer.counters().textures_provided, 4);
    assert_eq!(upload.requests.lock().len(), 4);

    drop(renderer);
    assert_eq!(
        upload.leases.load(Ordering::SeqCst),
        0,
        "dropping the renderer released the texture"
    );
}

#[test]
fn when_the_upload_stops_providing_the_proxy_copies_the_whole_source_into_its_own_texture() {
    let (mut renderer, scene, source, upload) = setup();
    assert_shows(&mut renderer, &scene, 0);
    upload.provide.store(false, Ordering::SeqCst);
    source.show(1);
    assert_shows(&mut renderer, &scene, 1);
    assert_eq!(upload.leases.load(Ordering::SeqCst), 0, "released");
    assert_eq!(upload.copies.load(Ordering::SeqCst), 1, "one whole copy");
    assert_eq!(renderer.counters().textures_provided, 1);

    upload.provide.store(true, Ordering::SeqCst);
    source.show(2);
    assert_shows(&mut renderer, &scene, 2);
    assert_eq!(upload.leases.load(Ordering::SeqCst), 1);
    assert_eq!(upload.copies.load(Ordering::SeqCst), 1);
}

#[test]
fn a_provided_texture_of_another_format_is_refused_with_both_formats() {
    let (mut renderer, scene, _source, upload) = setup();
    upload.wrong_format.store(true, Ordering::SeqCst);
    let target = renderer.create_target(W as u32, H as u32).unwrap();
    let camera = common::pixel_camera(W as u32, H as u32);
    let e = renderer.render(&scene, &camera, &target).unwrap_err();
    let message = e.to_string();
    assert!(
        message.contains("R32Uint") && message.contains("Rgba8Uint"),
        "{message}"
    );
    assert_eq!(upload.leases.load(Ordering::SeqCst), 0, "not kept");
}

/// Textures sampled in place (a CPU device drawing a host buffer where it lies): every frame
/// that draws one is counted first, once per frame however many visuals show it; a frame whose
/// texture was refused (its memory handed back after the frame took the source's changes)
/// never draws it, and copies what the source shows then into the proxy's own texture.
#[test]
fn in_place_textures_count_each_frame_and_a_refused_one_is_never_drawn() {
    let frames = Arc::new(InPlaceFrames::default());
    let (mut renderer, scene, source, upload) = setup_with(Some(frames.clone()));
    assert_shows(&mut renderer, &scene, 0);
    let c = renderer.counters();
    assert_eq!((c.textures_provided, c.textures_in_place), (1, 1));
    assert_eq!(
        (c.device_bytes_copied, c.copies_issued, c.bytes_uploaded),
        (0, 0, 0),
        "nothing copied for a texture sampled in place"
    );
    assert_eq!(
        frames.counted.load(Ordering::SeqCst),
        1,
        "one count per frame"
    );
    // Unchanged frames are counted too: they sample the memory as much as the first.
    assert_shows(&mut renderer, &scene, 0);
    assert_shows(&mut renderer, &scene, 0);
    assert_eq!(frames.counted.load(Ordering::SeqCst), 3);
    assert_eq!(upload.requests.lock().len(), 1, "nothing asked again");

    // The memory is handed back while the source shows frame 5 and the texture still holds
    // frame 0: the texture is refused, so the frame copies frame 5 instead of drawing it.
    source.frame.store(5, Ordering::SeqCst);
    frames.refuse.store(true, Ordering::SeqCst);
    assert_shows(&mut renderer, &scene, 5);
    assert_eq!(frames.refused.load(Ordering::SeqCst), 1);
    assert_eq!(upload.copies.load(Ordering::SeqCst), 1, "one whole copy");
    assert_eq!(
        upload.leases.load(Ordering::SeqCst),
        0,
        "the refused texture was released"
    );
    let c = renderer.counters();
    assert_eq!(c.in_place_fallbacks, 1);
    assert_eq!(c.textures_in_place, 1);
    // The copy stays until the source changes; nothing more is asked of the refused texture.
    assert_shows(&mut renderer, &scene, 5);
    assert_eq!(frames.refused.load(Ordering::SeqCst), 1);

    // Provided and refused in the same frame (replaced again before the frame counted it):
    // the own texture given up for the provided one is made again and filled.
    source.show(7);
    frames.refuse.store(true, Ordering::SeqCst);
    assert_shows(&mut renderer, &scene, 7);
    assert_eq!(frames.refused.load(Ordering::SeqCst), 2);
    assert_eq!(upload.copies.load(Ordering::SeqCst), 2);
    assert_eq!(renderer.counters().in_place_fallbacks, 2);
    assert_eq!(upload.leases.load(Ordering::SeqCst), 0);

    // A new version is offered in place again, and counted again.
    frames.refuse.store(false, Ordering::SeqCst);
    source.show(6);
    assert_shows(&mut renderer, &scene, 6);
    let c = renderer.counters();
    assert_eq!((c.textures_provided, c.textures_in_place), (3, 3));
    assert_eq!(frames.counted.load(Ordering::SeqCst), 4);
    assert_eq!(upload.copies.load(Ordering::SeqCst), 2);
}
