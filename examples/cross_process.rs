//! Two processes share frames on the GPU: a producer (standing in for a worker that runs a
//! network) renders an animation with a compute shader into a ring of buffers it exports, and
//! passes their file descriptors to a display process over a Unix socket. The display draws
//! the newest finished frame each time it draws; the producer never waits for it.
//!
//! Run with `cargo run --release --example cross_process`: this process is the display and
//! starts a second copy of itself as the producer. It writes a few frames as PNGs and prints
//! where they went, and both ends print their frame counts. Needs a Vulkan driver with
//! `VK_KHR_external_memory_fd` (Mesa's lavapipe has it).

// Sharing memory by file descriptor is Linux-only.
#[cfg(not(target_os = "linux"))]
fn main() {
    println!("this example needs Linux (Vulkan memory shared by file descriptor)");
}

#[cfg(target_os = "linux")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    linux::main()
}

#[cfg(target_os = "linux")]
mod linux {
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::path::PathBuf;
    use std::process::Command;
    use std::time::{Duration, Instant};

    use sluice::interop::ring::{RingDisplay, RingProducer};
    use sluice::interop::{Interop, InteropError};
    use sluice::prelude::*;

    const WIDTH: usize = 320;
    const HEIGHT: usize = 240;
    /// The display holds at most three slots (the one shown, the one whose copy may still run, the
    /// newest not shown yet); two more keep the producer from ever waiting.
    const SLOTS: usize = 5;
    const FRAMES: usize = 90;

    pub fn main() -> Result<(), Box<dyn std::error::Error>> {
        let mut args = std::env::args().skip(1);
        match args.next().as_deref() {
            Some("producer") => produce(&args.next().ok_or("producer needs a socket path")?),
            _ => display(),
        }
    }

    fn display() -> Result<(), Box<dyn std::error::Error>> {
        let out_dir = PathBuf::from(
            std::env::var("SLUICE_OUT").unwrap_or_else(|_| "target/sluice-out".into()),
        );
        std::fs::create_dir_all(&out_dir)?;
        let socket =
            std::env::temp_dir().join(format!("sluice-cross-process-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket)?;
        let mut producer = Command::new(std::env::current_exe()?)
            .arg("producer")
            .arg(&socket)
            .spawn()?;
        let (stream, _) = listener.accept()?;
        std::fs::remove_file(&socket)?;

        let interop = Interop::with_options(&RendererOptions::from_env()?)?;
        println!(
            "display: {} ({})",
            interop.identity().name,
            interop.identity().device_uuid
        );
        let mut ring = RingDisplay::connect(&interop, stream)?;
        let mut renderer = interop.renderer();
        let mut scene = Scene::new();
        scene.add(Image::new(ring.source() as SharedSource));
        let target = renderer.create_target(WIDTH as u32, HEIGHT as u32)?;
        let camera = PanZoomCamera::fit(
            Vec2::ZERO,
            Vec2::new(WIDTH as f32, HEIGHT as f32),
            target.size(),
        );
        let start = Instant::now();
        for drawn in 0..FRAMES {
            let Some(frame) = ring.wait_frame(Duration::from_secs(30))? else {
                return Err("the producer stopped sending frames".into());
            };
            let _ = renderer.render(&scene, &camera, &target)?;
            if drawn % 30 == 0 {
                let path = out_dir.join(format!("cross_process-{frame:05}.png"));
                renderer.read_image(&target)?.save(&path)?;
                println!("display: frame {frame} -> {}", path.display());
            }
            // A display slower than the producer: frames in between are dropped, never torn.
            std::thread::sleep(Duration::from_millis(10));
        }
        renderer.wait_idle()?;
        let stats = ring.stats();
        println!(
            "display: drew {FRAMES} frames in {:.2} s; received {}, dropped {} unseen",
            start.elapsed().as_secs_f64(),
            stats.received,
            stats.dropped
        );
        drop(ring);
        producer.wait()?;
        Ok(())
    }

    fn produce(socket: &str) -> Result<(), Box<dyn std::error::Error>> {
        let stream = UnixStream::connect(socket)?;
        let interop = Interop::with_options(&RendererOptions::from_env()?)?;
        let layout = Layout::new(Shape::d2(HEIGHT, WIDTH)?, ElementType::U8, 4)?;
        let mut ring = RingProducer::new(&interop, stream, layout, SLOTS)?;
        let animation = Animation::new(interop.device());
        let start = Instant::now();
        loop {
            let slot = match ring.acquire() {
                Ok(slot) => slot,
                Err(InteropError::ChannelClosed) => break,
                Err(e) => return Err(e.into()),
            };
            animation.draw(
                &interop,
                ring.buffer(&slot),
                ring.pitches().row,
                start.elapsed().as_secs_f32(),
            );
            match ring.present(slot) {
                Ok(_) => {}
                Err(InteropError::ChannelClosed) => break,
                Err(e) => return Err(e.into()),
            }
        }
        let stats = ring.stats();
        println!(
            "producer: {} frames in {:.2} s, waited for the display {} times (semaphores: {})",
            stats.frames,
            start.elapsed().as_secs_f64(),
            stats.waits,
            ring.uses_semaphore()
        );
        Ok(())
    }

    /// Moving interference rings, written by a compute shader as RGBA8 words.
    struct Animation {
        pipeline: wgpu::ComputePipeline,
        params: wgpu::Buffer,
    }

    const SHADER: &str = r#"
    struct Params { width: u32, height: u32, row_words: u32, time: f32 }
    @group(0) @binding(0) var<storage, read_write> pixels: array<u32>;
    @group(0) @binding(1) var<uniform> params: Params;

    @compute @workgroup_size(8, 8)
    fn main(@builtin(global_invocation_id) id: vec3<u32>) {
        if (id.x >= params.width || id.y >= params.height) { return; }
        let p = vec2<f32>(f32(id.x), f32(id.y)) / f32(params.height);
        let t = params.time;
        let a = vec2<f32>(0.6 + 0.4 * cos(t), 0.5 + 0.3 * sin(1.3 * t));
        let b = vec2<f32>(0.7 + 0.4 * sin(0.7 * t), 0.5 + 0.3 * cos(t));
        let v = 0.5 + 0.25 * (sin(40.0 * distance(p, a)) + sin(40.0 * distance(p, b)));
        let rgb = vec3<f32>(v, 0.5 + 0.5 * sin(6.0 * v + t), 1.0 - v);
        let c = vec3<u32>(clamp(rgb, vec3(0.0), vec3(1.0)) * 255.0);
        pixels[id.y * params.row_words + id.x] = c.x | (c.y << 8u) | (c.z << 16u) | (255u << 24u);
    }
    "#;

    impl Animation {
        fn new(device: &wgpu::Device) -> Self {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("cross_process animation"),
                source: wgpu::ShaderSource::Wgsl(SHADER.into()),
            });
            let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("cross_process animation"),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            });
            let params = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("cross_process params"),
                size: 16,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            Animation { pipeline, params }
        }

        fn draw(&self, interop: &Interop, target: &wgpu::Buffer, row_pitch: usize, time: f32) {
            let (device, queue) = (interop.device(), interop.queue());
            let mut params = [0u8; 16];
            for (i, word) in [
                WIDTH as u32,
                HEIGHT as u32,
                (row_pitch / 4) as u32,
                time.to_bits(),
            ]
            .iter()
            .enumerate()
            {
                params[i * 4..i * 4 + 4].copy_from_slice(&word.to_le_bytes());
            }
            queue.write_buffer(&self.params, 0, &params);
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
}
