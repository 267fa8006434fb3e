//! Where a frame's time goes (`cargo bench --bench frames`): the fixed cost of one drawn
//! frame, split into its parts, with GPU timestamps where the adapter has them.
//!
//! The dirty-region and GPU-interop figures of the other benches are bounded below by what a
//! frame costs when it uploads almost nothing. This bench takes that cost apart, on the same
//! device, with bare wgpu steps next to the same steps done by sluice:
//!
//! - bare: an empty submit and wait; a clear of the target; a textured quad (a 4096 x 4096
//!   RGBA8 texture) drawn minified into the 1024 x 1024 target and at 1:1; a 256 x 256 copy
//!   from a buffer into that texture; copy and draw together; and the same 16 times per wait;
//! - sluice: an empty scene; an unchanged 4096 x 4096 image, fitted (nearest and linear) and
//!   at 1:1 (the target invalidated first, so the whole frame is drawn); a 256 x 256 write
//!   with `Renderer::upload`, and with a drawn frame that redraws only what the region covers
//!   (the default) or the whole target; and 16 times per wait;
//! - sluice drawing the lone image both ways (`ImageDraw::Raster` and `ImageDraw::Compute`,
//!   whatever `Auto` chooses on this adapter): fitted nearest and linear, and a 256 x 256
//!   write with a whole and a partial redraw.
//!
//! Every step ends with a wait for the GPU unless it says "16 per wait" (then the time is per
//! frame). "gpu ms" is the GPU time between timestamps written at the start and the end of the
//! step's commands (for sluice steps, in submissions of their own just before and after the
//! frame, so it includes any time the GPU sat idle waiting for sluice's submit).
//! Medians of `SLUICE_BENCH_ITERS` (default 30) after `SLUICE_BENCH_WARMUP` (default 5).
//! Nothing here is judged; the figures explain the judged ones.

use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{env_usize, median, ms, Res};
use sluice::prelude::*;
use sluice::{wgpu, ImageDraw, RendererOptions};

const SIDE: u32 = 4096;
const TARGET_SIDE: u32 = 1024;
const REGION: u32 = 256;
const IN_FLIGHT: usize = 16;

const QUAD_WGSL: &str = r#"
struct Params { uv_scale: vec2<f32>, _pad: vec2<f32> };
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var tex: texture_2d<f32>;
struct Out { @builtin(position) pos: vec4<f32>, @location(0) uv: vec2<f32> };
@vertex fn vs(@builtin(vertex_index) i: u32) -> Out {
    let c = vec2<f32>(f32(i & 1u), f32(i >> 1u));
    var o: Out;
    o.pos = vec4<f32>(c * 2.0 - 1.0, 0.0, 1.0);
    o.uv = c * params.uv_scale;
    return o;
}
@fragment fn fs(in: Out) -> @location(0) vec4<f32> {
    let size = vec2<f32>(textureDimensions(tex));
    return textureLoad(tex, vec2<i32>(in.uv * size), 0);
}
struct Two { @location(0) color: vec4<f32>, @location(1) depth: vec4<f32> };
@fragment fn fs_two(in: Out) -> Two {
    let size = vec2<f32>(textureDimensions(tex));
    return Two(textureLoad(tex, vec2<i32>(in.uv * size), 0), vec4<f32>(in.pos.z, 0.0, 0.0, 1.0));
}
"#;

/// GPU timestamps around a step, when the device has them.
struct Stamps {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
    period_ns: f64,
}

impl Stamps {
    fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Option<Self> {
        let needed =
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
        if !device.features().contains(needed) {
            return None;
        }
        Some(Stamps {
            set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("frames bench stamps"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            }),
            resolve: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("frames bench resolve"),
                size: 16,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            read: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("frames bench read"),
                size: 16,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            period_ns: f64::from(queue.get_timestamp_period()),
        })
    }

    fn start(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.write_timestamp(&self.set, 0);
    }

    fn end(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.write_timestamp(&self.set, 1);
        encoder.resolve_query_set(&self.set, 0..2, &self.resolve, 0);
        encoder.copy_buffer_to_buffer(&self.resolve, 0, &self.read, 0, 16);
    }

    /// The last step's GPU time; call after the GPU finished it.
    fn read(&self, device: &wgpu::Device) -> Res<Duration> {
        self.read.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        device.poll(wgpu::PollType::wait_indefinitely())?;
        let ticks: [u64; 2] = {
            let view = self
                .read
                .slice(..)
                .get_mapped_range()
                .map_err(|e| format!("{e:?}"))?;
            bytemuck::pod_read_unaligned(&view[..16])
        };
        self.read.unmap();
        let ns = ticks[1].saturating_sub(ticks[0]) as f64 * self.period_ns;
        Ok(Duration::from_nanos(ns as u64))
    }
}

/// What a step did: wall time, and GPU time when measured.
type Sample = (Duration, Option<Duration>);

struct Bench {
    device: wgpu::Device,
    queue: wgpu::Queue,
    stamps: Option<Stamps>,
    rows: Vec<(String, Duration, Option<Duration>)>,
    warmup: usize,
    iters: usize,
}

impl Bench {
    fn wait(&self) -> Res<()> {
        self.device.poll(wgpu::PollType::wait_indefinitely())?;
        Ok(())
    }

    fn encoder(&self) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default())
    }

    /// Runs `step` warm-up + timed times and records the medians under `label`.
    fn run(
        &mut self,
        label: &str,
        mut step: impl FnMut(&mut Bench, usize) -> Res<Sample>,
    ) -> Res<()> {
        for i in 0..self.warmup {
            step(self, i)?;
        }
        let mut wall = Vec::new();
        let mut gpu = Vec::new();
        for i in 0..self.iters {
            let (w, g) = step(self, self.warmup + i)?;
            wall.push(w);
            gpu.extend(g);
        }
        let gpu = (!gpu.is_empty()).then(|| median(&gpu));
        println!(
            "  {label:<58} {:>9.3} {:>9}",
            ms(median(&wall)),
            gpu.map_or("-".into(), |g| format!("{:.3}", ms(g)))
        );
        self.rows.push((label.into(), median(&wall), gpu));
        Ok(())
    }

    /// Waits for the GPU; the wall time since `t` and the timestamps' GPU time.
    fn finish(&self, t: Instant) -> Res<Sample> {
        self.wait()?;
        let wall = t.elapsed();
        let gpu = self
            .stamps
            .as_ref()
            .map(|s| s.read(&self.device))
            .transpose()?;
        Ok((wall, gpu))
    }

    /// Bare step: `record` into one encoder between timestamps, submit, wait.
    fn bare(&mut self, record: impl Fn(&mut wgpu::CommandEncoder)) -> Res<Sample> {
        let t = Instant::now();
        let mut encoder = self.encoder();
        if let Some(s) = &self.stamps {
            s.start(&mut encoder);
        }
        record(&mut encoder);
        if let Some(s) = &self.stamps {
            s.end(&mut encoder);
        }
        self.queue.submit([encoder.finish()]);
        self.finish(t)
    }

    /// Sluice step: timestamps in submissions of their own around `frame`, then a wait.
    fn around(&mut self, frame: impl FnOnce() -> Res<()>) -> Res<Sample> {
        let t = Instant::now();
        if let Some(s) = &self.stamps {
            let mut e = self.encoder();
            s.start(&mut e);
            self.queue.submit([e.finish()]);
        }
        frame()?;
        if let Some(s) = &self.stamps {
            let mut e = self.encoder();
            s.end(&mut e);
            self.queue.submit([e.finish()]);
        }
        self.finish(t)
    }
}

fn main() -> Res<()> {
    let iters = env_usize("SLUICE_BENCH_ITERS", 30)?.max(1);
    let warmup = env_usize("SLUICE_BENCH_WARMUP", 5)?;
    let options = RendererOptions::from_env()?;
    let adapter = options.choose_adapter()?;
    let wanted = wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
    let features = adapter.features() & wanted;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("frames bench"),
        required_features: features,
        required_limits: adapter.limits(),
        ..Default::default()
    }))?;
    let info = adapter.get_info();
    println!("sluice frames bench: where a frame's time goes");
    println!(
        "adapter: {} ({:?}), driver: {} {}; timestamps: {}",
        info.name,
        info.backend,
        info.driver,
        info.driver_info,
        if features == wanted { "yes" } else { "no" }
    );
    println!("{warmup} warm-up + {iters} timed iterations, medians\n");
    println!("  {:<58} {:>9} {:>9}", "step", "wall ms", "gpu ms");
    let stamps = Stamps::new(&device, &queue);
    let mut renderer = Renderer::from_device(adapter, device.clone(), queue.clone(), &options);
    let mut b = Bench {
        device: device.clone(),
        queue: queue.clone(),
        stamps,
        rows: Vec::new(),
        warmup,
        iters,
    };

    // ---- bare wgpu ------------------------------------------------------------------------
    let target = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("bare target"),
        size: wgpu::Extent3d {
            width: TARGET_SIDE,
            height: TARGET_SIDE,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba8Unorm,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let target_view = target.create_view(&Default::default());
    let texture = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("bare data"),
        size: wgpu::Extent3d {
            width: SIDE,
            height: SIDE,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba8Unorm,
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    });
    let texture_view = texture.create_view(&Default::default());
    let region_bytes = (REGION * REGION * 4) as usize;
    let upload = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("bare region"),
        size: region_bytes as u64,
        usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    queue.write_buffer(&upload, 0, &vec![7u8; region_bytes]);
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("bare quad"),
        source: wgpu::ShaderSource::Wgsl(QUAD_WGSL.into()),
    });
    // The quad's pipeline, with or without depth, into `targets`, through fragment entry `fs`.
    let quad = |label: &str,
                fs: &str,
                depth: Option<wgpu::DepthStencilState>,
                targets: &[Option<wgpu::ColorTargetState>]| {
        device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some(label),
            layout: None,
            vertex: wgpu::VertexState {
                module: &module,
                entry_point: Some("vs"),
                compilation_options: Default::default(),
                buffers: &[],
            },
            primitive: wgpu::PrimitiveState {
                topology: wgpu::PrimitiveTopology::TriangleStrip,
                ..Default::default()
            },
            depth_stencil: depth,
            multisample: Default::default(),
            fragment: Some(wgpu::FragmentState {
                module: &module,
                entry_point: Some(fs),
                compilation_options: Default::default(),
                targets,
            }),
            multiview_mask: None,
            cache: None,
        })
    };
    let pipeline = quad(
        "bare quad",
        "fs",
        None,
        &[Some(wgpu::TextureFormat::Rgba8Unorm.into())],
    );
    // The structure of sluice's opaque pass: blended colour, a second colour target for the
    // depth, and a depth attachment; same trivial shader otherwise.
    let like_sluice = quad(
        "bare quad, sluice's pass structure",
        "fs_two",
        Some(wgpu::DepthStencilState {
            format: wgpu::TextureFormat::Depth32Float,
            depth_write_enabled: Some(true),
            depth_compare: Some(wgpu::CompareFunction::LessEqual),
            stencil: Default::default(),
            bias: Default::default(),
        }),
        &[
            Some(wgpu::ColorTargetState {
                format: wgpu::TextureFormat::Rgba8Unorm,
                blend: Some(wgpu::BlendState::ALPHA_BLENDING),
                write_mask: wgpu::ColorWrites::ALL,
            }),
            Some(wgpu::TextureFormat::Rgba8Unorm.into()),
        ],
    );
    let extra = |format: wgpu::TextureFormat| {
        device
            .create_texture(&wgpu::TextureDescriptor {
                label: Some("bare extra attachment"),
                size: wgpu::Extent3d {
                    width: TARGET_SIDE,
                    height: TARGET_SIDE,
                    depth_or_array_layers: 1,
                },
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format,
                usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
                view_formats: &[],
            })
            .create_view(&Default::default())
    };
    let depth_color_view = extra(wgpu::TextureFormat::Rgba8Unorm);
    let depth_view = extra(wgpu::TextureFormat::Depth32Float);
    let group = |pipeline: &wgpu::RenderPipeline, scale: f32| {
        let params = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("bare params"),
            size: 16,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        queue.write_buffer(&params, 0, bytemuck::cast_slice(&[scale, scale, 0.0, 0.0]));
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("bare quad"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: params.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: wgpu::BindingResource::TextureView(&texture_view),
                },
            ],
        })
    };
    let fitted = group(&pipeline, 1.0);
    let fitted_like_sluice = group(&like_sluice, 1.0);
    let one_to_one = group(&pipeline, TARGET_SIDE as f32 / SIDE as f32);
    let clear = |e: &mut wgpu::CommandEncoder| {
        black_pass(e, &target_view);
    };
    let draw = |e: &mut wgpu::CommandEncoder, g: &wgpu::BindGroup| {
        let mut pass = black_pass(e, &target_view);
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, g, &[]);
        pass.draw(0..4, 0..1);
    };
    let draw_like_sluice = |e: &mut wgpu::CommandEncoder, g: &wgpu::BindGroup| {
        let attachment = |view| {
            Some(wgpu::RenderPassColorAttachment {
                view,
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                    store: wgpu::StoreOp::Store,
                },
            })
        };
        let mut pass = e.begin_render_pass(&wgpu::RenderPassDescriptor {
            color_attachments: &[attachment(&target_view), attachment(&depth_color_view)],
            depth_stencil_attachment: Some(wgpu::RenderPassDepthStencilAttachment {
                view: &depth_view,
                depth_ops: Some(wgpu::Operations {
                    load: wgpu::LoadOp::Clear(1.0),
                    store: wgpu::StoreOp::Store,
                }),
                stencil_ops: None,
            }),
            ..Default::default()
        });
        pass.set_pipeline(&like_sluice);
        pass.set_bind_group(0, g, &[]);
        pass.draw(0..4, 0..1);
    };
    let copy = |e: &mut wgpu::CommandEncoder, n: usize| {
        let slots = (SIDE / REGION) as usize;
        let (y, x) = (
            (n * 7 % slots) as u32 * REGION,
            (n * 13 % slots) as u32 * REGION,
        );
        e.copy_buffer_to_texture(
            wgpu::TexelCopyBufferInfo {
                buffer: &upload,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(REGION * 4),
                    rows_per_image: None,
                },
            },
            wgpu::TexelCopyTextureInfo {
                texture: &texture,
                mip_level: 0,
                origin: wgpu::Origin3d { x, y, z: 0 },
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::Extent3d {
                width: REGION,
                height: REGION,
                depth_or_array_layers: 1,
            },
        );
    };
    b.run("bare: empty submit + wait", |b, _| b.bare(|_| {}))?;
    b.run("bare: clear 1024^2 target", |b, _| b.bare(clear))?;
    b.run("bare: draw 4096^2 texture fitted into 1024^2", |b, _| {
        b.bare(|e| draw(e, &fitted))
    })?;
    b.run(
        "bare: draw 4096^2 texture at 1:1 (1024^2 window)",
        |b, _| b.bare(|e| draw(e, &one_to_one)),
    )?;
    b.run(
        "bare: same, blended + depth colour + depth (sluice's pass)",
        |b, _| b.bare(|e| draw_like_sluice(e, &fitted_like_sluice)),
    )?;
    b.run("bare: copy 256^2 buffer -> texture", |b, i| {
        b.bare(|e| copy(e, i))
    })?;
    b.run("bare: copy 256^2 + draw fitted", |b, i| {
        b.bare(|e| {
            copy(e, i);
            draw(e, &fitted);
        })
    })?;
    b.run("bare: copy 256^2 + draw fitted, 16 per wait", |b, i| {
        let t = Instant::now();
        for j in 0..IN_FLIGHT {
            let mut e = b.encoder();
            copy(&mut e, i * IN_FLIGHT + j);
            draw(&mut e, &fitted);
            b.queue.submit([e.finish()]);
        }
        b.wait()?;
        Ok((t.elapsed() / IN_FLIGHT as u32, None))
    })?;
    b.run(
        "bare: write_texture 256^2 + draw fitted, 16 per wait",
        |b, i| {
            let region = vec![(i % 251) as u8; region_bytes];
            let t = Instant::now();
            for j in 0..IN_FLIGHT {
                let slots = (SIDE / REGION) as usize;
                let n = i * IN_FLIGHT + j;
                let (y, x) = (
                    (n * 7 % slots) as u32 * REGION,
                    (n * 13 % slots) as u32 * REGION,
                );
                b.queue.write_texture(
                    wgpu::TexelCopyTextureInfo {
                        texture: &texture,
                        mip_level: 0,
                        origin: wgpu::Origin3d { x, y, z: 0 },
                        aspect: wgpu::TextureAspect::All,
                    },
                    &region,
                    wgpu::TexelCopyBufferLayout {
                        offset: 0,
                        bytes_per_row: Some(REGION * 4),
                        rows_per_image: None,
                    },
                    wgpu::Extent3d {
                        width: REGION,
                        height: REGION,
                        depth_or_array_layers: 1,
                    },
                );
                let mut e = b.encoder();
                draw(&mut e, &fitted);
                b.queue.submit([e.finish()]);
            }
            b.wait()?;
            Ok((t.elapsed() / IN_FLIGHT as u32, None))
        },
    )?;

    // ---- a GPU-resident 4K frame into a texture: copy command against a compute pass -------
    // (the last step of the CUDA path: CUDA writes a buffer the renderer shares, which then
    // lands in the texture the image samples).
    let (fw, fh) = (3840u32, 2160u32);
    let frame_bytes = u64::from(fw * fh * 4);
    let frame_buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("bare 4K frame"),
        size: frame_bytes,
        usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let frame_texture = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("bare 4K texture"),
        size: wgpu::Extent3d {
            width: fw,
            height: fh,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba8Unorm,
        usage: wgpu::TextureUsages::TEXTURE_BINDING
            | wgpu::TextureUsages::COPY_DST
            | wgpu::TextureUsages::STORAGE_BINDING,
        view_formats: &[],
    });
    let unpack_module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("bare unpack"),
        source: wgpu::ShaderSource::Wgsl(
            r#"
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var dst: texture_storage_2d<rgba8unorm, write>;
@compute @workgroup_size(16, 16)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let size = textureDimensions(dst);
    if (id.x >= size.x || id.y >= size.y) { return; }
    textureStore(dst, id.xy, unpack4x8unorm(src[id.y * size.x + id.x]));
}
"#
            .into(),
        ),
    });
    let unpack = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("bare unpack"),
        layout: None,
        module: &unpack_module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let frame_view = frame_texture.create_view(&Default::default());
    let unpack_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("bare unpack"),
        layout: &unpack.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: frame_buffer.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: wgpu::BindingResource::TextureView(&frame_view),
            },
        ],
    });
    b.run(
        "bare: copy 3840x2160 RGBA8 GPU buffer -> texture",
        |b, _| {
            b.bare(|e| {
                e.copy_buffer_to_texture(
                    wgpu::TexelCopyBufferInfo {
                        buffer: &frame_buffer,
                        layout: wgpu::TexelCopyBufferLayout {
                            offset: 0,
                            bytes_per_row: Some(fw * 4),
                            rows_per_image: None,
                        },
                    },
                    frame_texture.as_image_copy(),
                    wgpu::Extent3d {
                        width: fw,
                        height: fh,
                        depth_or_array_layers: 1,
                    },
                )
            })
        },
    )?;
    b.run("bare: same by a compute pass (textureStore)", |b, _| {
        b.bare(|e| {
            let mut pass = e.begin_compute_pass(&Default::default());
            pass.set_pipeline(&unpack);
            pass.set_bind_group(0, &unpack_group, &[]);
            pass.dispatch_workgroups(fw.div_ceil(16), fh.div_ceil(16), 1);
        })
    })?;

    // ---- sluice ---------------------------------------------------------------------------
    let side = SIDE as usize;
    let source = Arc::new(ArraySource::with_channels(Array3::<u8>::zeros((
        side, side, 4,
    )))?);
    let target = renderer.create_target(TARGET_SIDE, TARGET_SIDE)?;
    let fit = PanZoomCamera::fit(Vec2::ZERO, Vec2::splat(SIDE as f32), target.size());
    let window = PanZoomCamera::fit(
        Vec2::splat(1024.0),
        Vec2::splat(1024.0 + TARGET_SIDE as f32),
        target.size(),
    );
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    let mut linear_scene = Scene::new();
    linear_scene.add(Image::new(source.clone()).with_interpolation(Interpolation::Linear));
    let empty = Scene::new();
    let scalar = Arc::new(ArraySource::new(Array2::<u8>::from_shape_fn(
        (side, side),
        |(r, c)| (r ^ c) as u8,
    ))?);
    let mut scalar_scene = Scene::new();
    scalar_scene.add(Image::new(scalar).with_colormap(Colormap::Viridis));
    renderer.render(&scalar_scene, &fit, &target)?;
    renderer.render(&scene, &fit, &target)?;
    renderer.render(&linear_scene, &fit, &target)?;
    renderer.wait_idle()?;
    let region = Array3::<u8>::from_elem((REGION as usize, REGION as usize, 4), 9);
    let place = |n: usize| {
        let slots = side / REGION as usize;
        [
            (n * 7 % slots) * REGION as usize,
            (n * 13 % slots) * REGION as usize,
        ]
    };

    // Whole frames of unchanged scenes (the target invalidated, so everything is drawn).
    let whole_frames: [(&str, &Scene, &PanZoomCamera); 5] = [
        ("sluice: render empty scene", &empty, &fit),
        (
            "sluice: render unchanged image, fitted, nearest",
            &scene,
            &fit,
        ),
        (
            "sluice: render unchanged image, fitted, linear",
            &linear_scene,
            &fit,
        ),
        (
            "sluice: render unchanged u8 scalar image, viridis, fitted",
            &scalar_scene,
            &fit,
        ),
        (
            "sluice: render unchanged image, 1:1, nearest",
            &scene,
            &window,
        ),
    ];
    for (label, scene, camera) in whole_frames {
        b.run(label, |b, _| {
            b.around(|| {
                target.invalidate();
                renderer.render(scene, camera, &target)?;
                Ok(())
            })
        })?;
    }
    b.run("sluice: write 256^2 + upload", |b, i| {
        b.around(|| {
            source.write(&place(i), region.view())?;
            renderer.upload(&scene)?;
            Ok(())
        })
    })?;
    b.run(
        "sluice: write 256^2 + render fitted (partial redraw)",
        |b, i| {
            b.around(|| {
                source.write(&place(i), region.view())?;
                renderer.render(&scene, &fit, &target)?;
                Ok(())
            })
        },
    )?;
    b.run(
        "sluice: write 256^2 + render fitted, whole target",
        |b, i| {
            b.around(|| {
                source.write(&place(i), region.view())?;
                target.invalidate();
                renderer.render(&scene, &fit, &target)?;
                Ok(())
            })
        },
    )?;
    let mut cpu = Vec::new();
    b.run(
        "sluice: write 256^2 + render fitted, 16 per wait",
        |b, i| {
            let t = Instant::now();
            for j in 0..IN_FLIGHT {
                let c = Instant::now();
                source.write(&place(i * IN_FLIGHT + j), region.view())?;
                renderer.render(&scene, &fit, &target)?;
                cpu.push(c.elapsed());
            }
            b.wait()?;
            Ok((t.elapsed() / IN_FLIGHT as u32, None))
        },
    )?;
    println!(
        "    (CPU time of write + render call, median: {:.3} ms)",
        ms(median(&cpu))
    );
    b.run("sluice: write 256^2 + upload, 16 per wait", |b, i| {
        let t = Instant::now();
        for j in 0..IN_FLIGHT {
            source.write(&place(i * IN_FLIGHT + j), region.view())?;
            renderer.upload(&scene)?;
        }
        b.wait()?;
        Ok((t.elapsed() / IN_FLIGHT as u32, None))
    })?;
    b.run("sluice: render unchanged fitted, 16 per wait", |b, _| {
        let t = Instant::now();
        for _ in 0..IN_FLIGHT {
            target.invalidate();
            renderer.render(&scene, &fit, &target)?;
        }
        b.wait()?;
        Ok((t.elapsed() / IN_FLIGHT as u32, None))
    })?;

    // The two ways of drawing a lone image (`ImageDraw`), each on a renderer of its own on
    // this device, whatever `Auto` chose above.
    println!(
        "    (the renderer above draws lone images by {:?})",
        renderer.image_draw()
    );
    for draw in [ImageDraw::Raster, ImageDraw::Compute] {
        let mut chosen = options.clone();
        chosen.image_draw = draw;
        let adapter = options.choose_adapter()?;
        let mut r = Renderer::from_device(adapter, device.clone(), queue.clone(), &chosen);
        let target = r.create_target(TARGET_SIDE, TARGET_SIDE)?;
        r.render(&scene, &fit, &target)?;
        r.render(&linear_scene, &fit, &target)?;
        r.wait_idle()?;
        let name = format!("{draw:?}").to_lowercase();
        for (what, scene) in [("nearest", &scene), ("linear", &linear_scene)] {
            b.run(
                &format!("sluice, {name}: render unchanged fitted, {what}"),
                |b, _| {
                    b.around(|| {
                        target.invalidate();
                        r.render(scene, &fit, &target)?;
                        Ok(())
                    })
                },
            )?;
        }
        b.run(
            &format!("sluice, {name}: write 256^2 + render fitted, whole"),
            |b, i| {
                b.around(|| {
                    source.write(&place(i), region.view())?;
                    target.invalidate();
                    r.render(&scene, &fit, &target)?;
                    Ok(())
                })
            },
        )?;
        b.run(
            &format!("sluice, {name}: write 256^2 + render fitted, partial"),
            |b, i| {
                b.around(|| {
                    source.write(&place(i), region.view())?;
                    r.render(&scene, &fit, &target)?;
                    Ok(())
                })
            },
        )?;
    }
    Ok(())
}

/// A render pass clearing `view` to black.
fn black_pass<'a>(
    e: &'a mut wgpu::CommandEncoder,
    view: &wgpu::TextureView,
) -> wgpu::RenderPass<'a> {
    e.begin_render_pass(&wgpu::RenderPassDescriptor {
        color_attachments: &[Some(wgpu::RenderPassColorAttachment {
            view,
            depth_slice: None,
            resolve_target: None,
            ops: wgpu::Operations {
                load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                store: wgpu::StoreOp::Store,
            },
        })],
        ..Default::default()
    })
}
