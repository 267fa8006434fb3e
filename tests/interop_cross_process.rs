//! Frames shared across processes through a ring of exported GPU buffers: this test binary
//! starts itself again as the producer, which writes frames with a compute shader into
//! buffers it exports and passes their file descriptors over a Unix socket; the display here
//! imports them, draws each frame it takes and checks every pixel. Runs on lavapipe in CI.
#![cfg(target_os = "linux")]

mod common;

use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::render_pixels;
use sluice::interop::ring::{RingDisplay, RingProducer};
use sluice::interop::{Interop, InteropError, Pitches};
use sluice::prelude::*;

/// Set in the producer process: the socket to connect to.
const PRODUCER_ENV: &str = "SLUICE_TEST_RING_PRODUCER";
const TEST_NAME: &str = "frames_cross_processes_whole_and_in_order";
const WIDTH: usize = 128;
const HEIGHT: usize = 96;
const SLOTS: usize = 5;
const FRAMES_TO_SHOW: usize = 12;

/// The colour the producer's shader writes at (x, y) of frame `frame` (as in `SHADER`).
fn pattern(x: u32, y: u32, frame: u64) -> [u8; 4] {
    let f = frame as u32;
    [
        ((x * 3 + y + f) & 255) as u8,
        ((y * 5 + 7) & 255) as u8,
        (((x ^ y) + 2 * f) & 255) as u8,
        255,
    ]
}

const SHADER: &str = r#"
struct Params { width: u32, height: u32, row_words: u32, frame: u32 }
@group(0) @binding(0) var<storage, read_write> pixels: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x >= params.width || id.y >= params.height) { return; }
    let f = params.frame;
    let r = (id.x * 3u + id.y + f) & 255u;
    let g = (id.y * 5u + 7u) & 255u;
    let b = ((id.x ^ id.y) + 2u * f) & 255u;
    pixels[id.y * params.row_words + id.x] = r | (g << 8u) | (b << 16u) | (255u << 24u);
}
"#;

#[test]
fn frames_cross_processes_whole_and_in_order() {
    if let Ok(socket) = std::env::var(PRODUCER_ENV) {
        produce_until_the_display_leaves(&socket);
        return;
    }
    let dir = std::env::temp_dir().join(format!("sluice-ring-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("ring.sock");
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).unwrap();
    let mut producer = ChildGuard(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
            .env(PRODUCER_ENV, &socket)
            .spawn()
            .unwrap(),
    );
    let stream = accept_within(&listener, &mut producer.0, Duration::from_secs(60));

    let interop = Interop::with_options(&RendererOptions::from_env().unwrap()).unwrap();
    let mut display = RingDisplay::connect(&interop, stream).unwrap();
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(display.source() as SharedSource));
    let mut shown = Vec::new();
    while shown.len() < FRAMES_TO_SHOW {
        let frame = display
            .wait_frame(Duration::from_secs(60))
            .unwrap()
            .expect("the producer sends a frame within 60 s");
        let img = render_pixels(&mut renderer, &scene, WIDTH as u32, HEIGHT as u32);
        // A torn frame would mix two frames' values; every pixel must be this frame's.
        for (x, y, pixel) in img.enumerate_pixels() {
            assert_eq!(
                pixel.0,
                pattern(x, y, frame),
                "frame {frame}, pixel ({x}, {y})"
            );
        }
        shown.push(frame);
    }
    let stats = display.stats();
    println!("display: frames shown {shown:?}; {stats:?}");
    assert!(
        shown.windows(2).all(|w| w[0] < w[1]),
        "frames in order: {shown:?}"
    );
    assert_eq!(renderer.counters().bytes_uploaded, 0, "no host staging");
    drop(display);
    let status = producer.0.wait().unwrap();
    assert!(status.success(), "producer exited with {status}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The producer process: writes frames as fast as the ring lets it until the display closes
/// the socket.
fn produce_until_the_display_leaves(socket: &str) {
    let stream = UnixStream::connect(socket).unwrap();
    let interop = Interop::with_options(&RendererOptions::from_env().unwrap()).unwrap();
    let layout = Layout::new(Shape::d2(HEIGHT, WIDTH).unwrap(), ElementType::U8, 4).unwrap();
    let mut producer = RingProducer::new(&interop, stream, layout, SLOTS).unwrap();
    assert_eq!(
        producer.pitches(),
        Pitches {
            row: 512,
            plane: 512 * HEIGHT
        }
    );
    let writer = PatternWriter::new(interop.device());
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let slot = match producer.acquire() {
            Ok(slot) => slot,
            Err(InteropError::ChannelClosed) => break,
            Err(e) => panic!("producer: {e}"),
        };
        let frame = producer.stats().frames + 1;
        writer.write(&interop, producer.buffer(&slot), producer.pitches(), frame);
        match producer.present(slot) {
            Ok(presented) => assert_eq!(presented, frame),
            Err(InteropError::ChannelClosed) => break,
            Err(e) => panic!("producer: {e}"),
        }
    }
    println!(
        "producer: {:?}, semaphores: {}",
        producer.stats(),
        producer.uses_semaphore()
    );
}

/// The producer's GPU work: one compute dispatch writing a frame into a slot's buffer.
struct PatternWriter {
    pipeline: wgpu::ComputePipeline,
    params: wgpu::Buffer,
}

impl PatternWriter {
    fn new(device: &wgpu::Device) -> Self {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("ring test pattern"),
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("ring test pattern"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let params = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("ring test params"),
            size: 16,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        PatternWriter { pipeline, params }
    }

    fn write(&self, interop: &Interop, target: &wgpu::Buffer, pitches: Pitches, frame: u64) {
        let (device, queue) = (interop.device(), interop.queue());
        let params = [
            WIDTH as u32,
            HEIGHT as u32,
            (pitches.row / 4) as u32,
            frame as u32,
        ];
        queue.write_buffer(&self.params, 0, bytemuck::cast_slice(&params));
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &self.pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: target.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: self.params.as_entire_binding(),
                },
            ],
        });
        let mut encoder = device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(WIDTH.div_ceil(8) as u32, HEIGHT.div_ceil(8) as u32, 1);
        }
        queue.submit([encoder.finish()]);
    }
}

/// Kills the producer if the test fails before it exits on its own.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn accept_within(listener: &UnixListener, child: &mut Child, timeout: Duration) -> UnixStream {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + timeout;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                return stream;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if let Some(status) = child.try_wait().unwrap() {
                    panic!("the producer exited with {status} before connecting");
                }
                assert!(
                    Instant::now() < deadline,
                    "the producer did not connect within {timeout:?}"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}
