//! The z-paired copy of an 8-bit volume, which the marcher samples on CPU devices.
//!
//! A CPU device (lavapipe) interpolates in software: a trilinear sample of a 3-D texture
//! fetches eight texels one by one, and on the peers' MIP this is nearly all of a frame
//! (docs/measurements.md). The paired copy is a 2-D array texture of two-channel texels,
//! layer `z` holding at `(x, y)` the voxels `(x, y, z)` and `(x, y, z + 1)` (the last layer
//! pairs its voxel with itself). One bilinear sample of layer `floor(z - 1/2)` gives the two
//! planes' values, and one lerp between them the trilinear value: four fetches instead of
//! eight, the same value within one data level (the driver rounds its weights and 8-bit
//! results either way; clamped to the edge alike: a coordinate below the first texel centre
//! or past the last gives the edge plane).
//!
//! It is made when a linear volume is prepared, before the frame's upload, and a whole upload
//! of host data writes it from the host as the volume is staged
//! (`TextureProxy::pairs_from_host`). Other changes (partial uploads, a volume added over a
//! texture another visual uploaded) build it on the device from the data texture: the
//! texture is copied into a buffer a slab of planes at a time (each slab with the plane after
//! it), a compute pass (`shaders/volume_pairs.wgsl`) interleaves each plane with the next into
//! a second buffer, which is copied into the paired texture's layers. While a linear volume
//! uses it, it costs twice the volume's bytes of memory and a pass over them per change
//! (docs/architecture.md, "Sampling", has the figures); copies no linear volume used for
//! [`IDLE_RENDERS`] renders are dropped. GPUs filter a 3-D texture in hardware at the cost of
//! a 2-D one, so they never pair.
//!
//! Like the min/max grid, it belongs to a source's texture, not to a visual.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::proxy::TextureProxy;
use crate::volume_grid::GridUpdate;

const SHADER: &str = include_str!("shaders/volume_pairs.wgsl");

/// The binding of the paired texture in the marcher's group 0.
pub(crate) const PAIRS_BINDING: u32 = 12;

/// The paired texture's format: the voxel and the one after it along z.
const PAIRS_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rg8Unorm;

/// The largest slab of paired planes the build writes into its buffer at a time (one plane
/// whatever its size, up to the device's storage binding limit).
const SLAB_BYTES: u64 = 4 << 20;

/// Invocations per workgroup along x (`@workgroup_size(64)` in the shader).
const WORKGROUP: u32 = 64;

/// What may also be done with the paired texture in tests: read it back.
const TEST_USAGE: wgpu::TextureUsages = if cfg!(test) {
    wgpu::TextureUsages::COPY_SRC
} else {
    wgpu::TextureUsages::empty()
};

/// `Slab` of `shaders/volume_pairs.wgsl`, 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct SlabParams {
    row_words: u32,
    plane_words: u32,
    out_row_words: u32,
    out_plane_words: u32,
    quads_x: u32,
    height: u32,
    planes: u32,
    last: u32,
}

/// One slab of the build: planes `first..first + planes` are paired, reading `planes_in`
/// planes from `first` (one more, except at the volume's end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slab {
    first: u32,
    planes: u32,
    planes_in: u32,
}

/// How a volume of `size` (`[x, y, z]`) is paired: rows padded to the copy alignment, and
/// the slabs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Plan {
    bytes_per_row_in: u32,
    bytes_per_row_out: u32,
    slabs: Vec<Slab>,
    /// Planes per slab (the buffers' sizes follow from it).
    per_slab: u32,
}

/// The plan for a volume of `size` under `limits`, `None` where the paired texture or one
/// plane of the build would not fit them.
fn plan(size: [u32; 3], limits: &wgpu::Limits, slab_bytes: u64) -> Option<Plan> {
    let [w, h, d] = size;
    if w == 0 || h == 0 || d == 0 {
        return None;
    }
    if w > limits.max_texture_dimension_2d
        || h > limits.max_texture_dimension_2d
        || d > limits.max_texture_array_layers
        // The build dispatches rows and planes as workgroups.
        || h > limits.max_compute_workgroups_per_dimension
        || d > limits.max_compute_workgroups_per_dimension
    {
        return None;
    }
    let align = wgpu::COPY_BYTES_PER_ROW_ALIGNMENT;
    let bytes_per_row_in = w.checked_next_multiple_of(align)?;
    // Two words per four voxels.
    let bytes_per_row_out = w
        .div_ceil(16)
        .checked_mul(32)?
        .checked_next_multiple_of(align)?;
    let plane_in = u64::from(bytes_per_row_in) * u64::from(h);
    let plane_out = u64::from(bytes_per_row_out) * u64::from(h);
    // The shader indexes words with u32.
    let most = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size)
        .min(u64::from(u32::MAX));
    let per_slab = (slab_bytes / plane_out).clamp(1, u64::from(d)) as u32;
    if plane_out.checked_mul(u64::from(per_slab))? > most
        || plane_in.checked_mul(u64::from(per_slab) + 1)? > most
    {
        return None;
    }
    let slabs = (0..d)
        .step_by(per_slab as usize)
        .map(|first| {
            let planes = per_slab.min(d - first);
            Slab {
                first,
                planes,
                planes_in: (planes + 1).min(d - first),
            }
        })
        .collect();
    Some(Plan {
        bytes_per_row_in,
        bytes_per_row_out,
        slabs,
        per_slab,
    })
}

/// One source texture's paired copy and what builds it.
pub(crate) struct ZPairs {
    /// The proxy generation and content it was made and built for.
    generation: u64,
    content: u64,
    source: wgpu::Texture,
    texture: wgpu::Texture,
    view: wgpu::TextureView,
    input: wgpu::Buffer,
    output: wgpu::Buffer,
    group: wgpu::BindGroup,
    params_stride: u32,
    plan: Plan,
    size: [u32; 3],
    /// Set when the data moved (or the copy is new); the next paired march builds first.
    stale: AtomicBool,
    /// Whether `ensure` reported the pending build (`stale`) as a build.
    reported: bool,
    /// Tells this copy from any other one made (bind groups hold it by this).
    id: u64,
    /// The last render ([`ZPairsSet::begin_render`]) in which a linear volume used it.
    last_used: u64,
}

/// The paired copies of the sources volumes show on a CPU device, keyed by proxy serial.
pub(crate) struct ZPairsSet {
    /// Whether the device is a CPU device (nothing is paired elsewhere).
    enabled: bool,
    pipeline: Option<(wgpu::BindGroupLayout, wgpu::ComputePipeline)>,
    pairs: HashMap<u64, ZPairs>,
    /// Bound in place of a paired texture where there is none.
    absent: wgpu::TextureView,
    /// Renders begun so far.
    renders: u64,
    /// Copies made so far (the next one's id).
    made: u64,
    /// Per proxy serial, the generation whose copy could not be made (over the device's
    /// limits or memory): not tried again until the texture changes.
    refused: HashMap<u64, u64>,
}

/// Renders a copy no linear volume used may stay (its memory and host writes go after).
const IDLE_RENDERS: u64 = 8;

impl ZPairsSet {
    /// Pairs volumes where `enabled` (CPU devices).
    pub fn new(device: &wgpu::Device, enabled: bool) -> Self {
        let absent = device
            .create_texture(&wgpu::TextureDescriptor {
                label: Some("sluice absent volume pairs"),
                size: wgpu::Extent3d {
                    width: 1,
                    height: 1,
                    depth_or_array_layers: 1,
                },
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format: PAIRS_FORMAT,
                usage: wgpu::TextureUsages::TEXTURE_BINDING,
                view_formats: &[],
            })
            .create_view(&wgpu::TextureViewDescriptor {
                dimension: Some(wgpu::TextureViewDimension::D2Array),
                ..Default::default()
            });
        ZPairsSet {
            enabled,
            pipeline: None,
            pairs: HashMap::new(),
            absent,
            renders: 0,
            made: 0,
            refused: HashMap::new(),
        }
    }

    /// Starts a render: drops the copies no linear volume used in the last [`IDLE_RENDERS`]
    /// renders (a volume removed or switched to nearest sampling while its source stays).
    pub fn begin_render(&mut self) {
        self.renders += 1;
        let renders = self.renders;
        self.pairs
            .retain(|_, p| p.last_used + IDLE_RENDERS >= renders);
    }

    /// Makes `proxy`'s paired copy if it has none for its current texture (where it is
    /// paired at all, see [`ZPairsSet::ensure`]), before the frame's upload, so that a whole
    /// upload from the host can write it and the device need not build it. Reports nothing:
    /// `ensure` after the upload says what became of it.
    pub fn make_ready(&mut self, device: &wgpu::Device, proxy: &TextureProxy) {
        if let Some((source, false)) = self.lookup(proxy) {
            let source = source.clone();
            self.remake(device, proxy, &source);
        }
        let renders = self.renders;
        if let Some(p) = self.pairs.get_mut(&proxy.serial()) {
            p.last_used = renders;
        }
    }

    /// Whether a linear march over `proxy`'s texture goes through its paired copy, and what
    /// was done to the copy: on CPU devices, for 8-bit data in one texture that can be copied
    /// from, where the copy fits the device's limits, it is made if the texture is new, and
    /// marked for a build before the next march if the data moved since; unless `host` is
    /// the current content (the last upload wrote the copy from the host,
    /// `TextureProxy::take_host_pairs`), which leaves it up to date. `None`: not paired.
    pub fn ensure(
        &mut self,
        device: &wgpu::Device,
        proxy: &TextureProxy,
        host: Option<u64>,
    ) -> Option<GridUpdate> {
        let serial = proxy.serial();
        let Some((source, fresh)) = self.lookup(proxy) else {
            self.pairs.remove(&serial);
            return None;
        };
        if !fresh {
            let source = source.clone();
            self.remake(device, proxy, &source)?;
        }
        let pairs = self.pairs.get_mut(&serial).expect("made");
        pairs.last_used = self.renders;
        let written = pairs.content != proxy.content() && host == Some(proxy.content());
        if written {
            // Up to date whatever was pending.
            pairs.stale.store(false, Ordering::Relaxed);
        } else if pairs.content != proxy.content() {
            pairs.stale.store(true, Ordering::Relaxed);
            pairs.reported = false;
        }
        pairs.content = proxy.content();
        let stale = pairs.stale.load(Ordering::Relaxed);
        // A build pending since the copy was made or the data moved is reported once.
        let report = stale && !std::mem::replace(&mut pairs.reported, true);
        Some(if written {
            GridUpdate::Written
        } else if report {
            GridUpdate::Build
        } else {
            GridUpdate::Unchanged
        })
    }

    /// `proxy`'s texture where it is paired (one copyable 8-bit 3-D texture, on a device that
    /// pairs, whose copy was not refused), and whether its copy exists for it.
    fn lookup<'p>(&self, proxy: &'p TextureProxy) -> Option<(&'p wgpu::Texture, bool)> {
        let source = proxy
            .copy_source()
            .filter(|t| t.format() == wgpu::TextureFormat::R8Unorm)
            .filter(|t| t.dimension() == wgpu::TextureDimension::D3)
            .filter(|_| self.enabled)
            .filter(|_| self.refused.get(&proxy.serial()) != Some(&proxy.generation()))?;
        let fresh = self
            .pairs
            .get(&proxy.serial())
            .is_some_and(|p| p.generation == proxy.generation() && &p.source == source);
        Some((source, fresh))
    }

    /// Makes the copy of `proxy`'s texture `source` afresh (to be built), `None` where it
    /// does not fit the device's limits.
    fn remake(
        &mut self,
        device: &wgpu::Device,
        proxy: &TextureProxy,
        source: &wgpu::Texture,
    ) -> Option<()> {
        self.pairs.remove(&proxy.serial());
        let Some(mut pairs) = self.make(device, source, SLAB_BYTES) else {
            self.refused.insert(proxy.serial(), proxy.generation());
            return None;
        };
        pairs.generation = proxy.generation();
        pairs.content = proxy.content();
        pairs.last_used = self.renders;
        self.made += 1;
        pairs.id = self.made;
        self.pairs.insert(proxy.serial(), pairs);
        Some(())
    }

    /// The paired copy of `source`'s texture and its build's buffers (slabs of at most
    /// `slab_bytes` of pairs), `None` where it would not fit the device's limits or memory.
    fn make(
        &mut self,
        device: &wgpu::Device,
        source: &wgpu::Texture,
        slab_bytes: u64,
    ) -> Option<ZPairs> {
        let e = source.size();
        let size = [e.width, e.height, e.depth_or_array_layers];
        let limits = device.limits();
        let plan = plan(size, &limits, slab_bytes)?;
        let (layout, _) = self.pipeline.get_or_insert_with(|| build_pipeline(device));
        // Twice the volume's bytes: where the device cannot hold them, the volume is marched
        // unpaired instead of failing the frame.
        let scope = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let texture = device.create_texture(&wgpu::TextureDescriptor {
            label: Some("sluice volume pairs"),
            size: e,
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: PAIRS_FORMAT,
            usage: wgpu::TextureUsages::TEXTURE_BINDING
                | wgpu::TextureUsages::COPY_DST
                | TEST_USAGE,
            view_formats: &[],
        });
        let view = texture.create_view(&wgpu::TextureViewDescriptor {
            dimension: Some(wgpu::TextureViewDimension::D2Array),
            ..Default::default()
        });
        let plane_in = u64::from(plan.bytes_per_row_in) * u64::from(size[1]);
        let plane_out = u64::from(plan.bytes_per_row_out) * u64::from(size[1]);
        let input = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sluice volume pairs input"),
            size: plane_in * u64::from((plan.per_slab + 1).min(size[2])),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let output = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sluice volume pairs output"),
            size: plane_out * u64::from(plan.per_slab),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let slab_params: Vec<SlabParams> = plan
            .slabs
            .iter()
            .map(|s| SlabParams {
                row_words: plan.bytes_per_row_in / 4,
                plane_words: (plane_in / 4) as u32,
                out_row_words: plan.bytes_per_row_out / 4,
                out_plane_words: (plane_out / 4) as u32,
                quads_x: size[0].div_ceil(16),
                height: size[1],
                planes: s.planes,
                last: s.planes_in - 1,
            })
            .collect();
        let (params, params_stride) =
            crate::pipeline::dynamic_uniforms(device, "sluice volume pairs slabs", &slab_params);
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sluice volume pairs"),
            layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &params,
                        offset: 0,
                        size: wgpu::BufferSize::new(size_of::<SlabParams>() as u64),
                    }),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: input.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: output.as_entire_binding(),
                },
            ],
        });
        if pollster::block_on(scope.pop()).is_some() {
            return None;
        }
        Some(ZPairs {
            generation: 0,
            content: 0,
            source: source.clone(),
            texture,
            view,
            input,
            output,
            group,
            params_stride,
            plan,
            size,
            stale: AtomicBool::new(true),
            reported: false,
            id: 0,
            last_used: 0,
        })
    }

    /// Drops the copies of proxies that no longer exist.
    pub fn retain(&mut self, live: impl Fn(u64) -> bool) {
        self.pairs.retain(|&serial, _| live(serial));
        self.refused.retain(|&serial, _| live(serial));
    }

    /// The paired texture of `proxy`, where it has one for its current texture that a
    /// linear volume uses (made ready or used in this render or the last), for the host to
    /// write it while staging a whole upload (`TextureProxy::pairs_from_host`). Such a copy
    /// implies one copyable `R8Unorm` 3-D texture of its size.
    pub fn target(&self, proxy: &TextureProxy) -> Option<&wgpu::Texture> {
        let Some((_, true)) = self.lookup(proxy) else {
            return None;
        };
        let p = &self.pairs[&proxy.serial()];
        (p.last_used + 1 >= self.renders).then_some(&p.texture)
    }

    /// The view the marcher binds for `proxy`: its paired copy where it has one for its
    /// current texture, or a 1 x 1 stand-in. The second value is the copy's id (`None`: the
    /// stand-in); a bind group holding another id is out of date.
    pub fn view(&self, proxy: &TextureProxy) -> (&wgpu::TextureView, Option<u64>) {
        match self.lookup(proxy) {
            Some((_, true)) => {
                let p = &self.pairs[&proxy.serial()];
                (&p.view, Some(p.id))
            }
            _ => (&self.absent, None),
        }
    }

    /// Records the build of the paired copy of `serial` if its data changed since it was
    /// last built; returns whether it did.
    pub fn record_build(&self, serial: u64, enc: &mut wgpu::CommandEncoder) -> bool {
        let Some(pairs) = self.pairs.get(&serial) else {
            return false;
        };
        if !pairs.stale.swap(false, Ordering::Relaxed) {
            return false;
        }
        let (_, pipeline) = self.pipeline.as_ref().expect("made with the first copy");
        let [w, h, _] = pairs.size;
        for (i, s) in pairs.plan.slabs.iter().enumerate() {
            enc.copy_texture_to_buffer(
                wgpu::TexelCopyTextureInfo {
                    texture: &pairs.source,
                    mip_level: 0,
                    origin: wgpu::Origin3d {
                        x: 0,
                        y: 0,
                        z: s.first,
                    },
                    aspect: wgpu::TextureAspect::All,
                },
                wgpu::TexelCopyBufferInfo {
                    buffer: &pairs.input,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: 0,
                        bytes_per_row: Some(pairs.plan.bytes_per_row_in),
                        rows_per_image: Some(h),
                    },
                },
                wgpu::Extent3d {
                    width: w,
                    height: h,
                    depth_or_array_layers: s.planes_in,
                },
            );
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("sluice volume pairs"),
                    timestamp_writes: None,
                });
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, &pairs.group, &[i as u32 * pairs.params_stride]);
                pass.dispatch_workgroups(w.div_ceil(16).div_ceil(WORKGROUP), h, s.planes);
            }
            enc.copy_buffer_to_texture(
                wgpu::TexelCopyBufferInfo {
                    buffer: &pairs.output,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: 0,
                        bytes_per_row: Some(pairs.plan.bytes_per_row_out),
                        rows_per_image: Some(h),
                    },
                },
                wgpu::TexelCopyTextureInfo {
                    texture: &pairs.texture,
                    mip_level: 0,
                    origin: wgpu::Origin3d {
                        x: 0,
                        y: 0,
                        z: s.first,
                    },
                    aspect: wgpu::TextureAspect::All,
                },
                wgpu::Extent3d {
                    width: w,
                    height: h,
                    depth_or_array_layers: s.planes,
                },
            );
        }
        true
    }
}

fn build_pipeline(device: &wgpu::Device) -> (wgpu::BindGroupLayout, wgpu::ComputePipeline) {
    let storage = crate::pipeline::compute_storage_entry;
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("sluice volume pairs"),
        entries: &[
            wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: true,
                    min_binding_size: wgpu::BufferSize::new(size_of::<SlabParams>() as u64),
                },
                count: None,
            },
            storage(1, true),
            storage(2, false),
        ],
    });
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("sluice volume pairs"),
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    let pipeline =
        crate::pipeline::compute_pipeline(device, "sluice volume pairs", &layout, &module, "pair");
    (layout, pipeline)
}

/// Layout entry of the paired texture in the marcher's group 0.
pub(crate) fn pairs_entry() -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding: PAIRS_BINDING,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Texture {
            sample_type: wgpu::TextureSampleType::Float { filterable: true },
            view_dimension: wgpu::TextureViewDimension::D2Array,
            multisampled: false,
        },
        count: None,
    }
}

/// The marcher's declaration of the paired texture and its sample, for data of `kind` in one
/// texture or bricks: with hardware filtering, one bilinear sample of the layer below the
/// sample and a lerp to the one above; otherwise the ordinary linear sample.
pub(crate) fn marcher_source(filtered: bool) -> String {
    let mut out =
        format!("@group(0) @binding({PAIRS_BINDING}) var data_pairs: texture_2d_array<f32>;\n");
    if filtered {
        out += "// Trilinear from the z-paired copy (`volume_pairs.rs`): clamped to the edge planes as\n\
                // the 3-D sampler clamps.\n\
                fn sample_paired_uvw(uvw: vec3<f32>) -> Sample {\n\
                \x20   let n = f32(params.data_size.z);\n\
                \x20   let z = clamp(uvw.z * n - 0.5, 0.0, n - 1.0);\n\
                \x20   let z0 = floor(z);\n\
                \x20   let ab = textureSampleLevel(data_pairs, data_sampler, uvw.xy, i32(z0), 0.0).xy * VALUE_SCALE;\n\
                \x20   return Sample(vec4<f32>(mix(ab.x, ab.y, z - z0), 0.0, 0.0, VALUE_SCALE), true);\n}\n";
    } else {
        out +=
            "fn sample_paired_uvw(uvw: vec3<f32>) -> Sample { return sample_linear_uvw(uvw); }\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> wgpu::Limits {
        wgpu::Limits {
            max_texture_array_layers: 2048,
            max_texture_dimension_2d: 16384,
            ..wgpu::Limits::default()
        }
    }

    /// Slabs cover every plane once, each reading the plane after it except the last.
    #[test]
    fn slabs_cover_the_planes_with_the_next_one() {
        let p = plan([300, 7, 37], &limits(), 8 * 2 * 1024 * 5).expect("fits");
        // 300 voxels: 75 words, 150 out words = 600 bytes -> 768; in: 300 -> 512.
        assert_eq!((p.bytes_per_row_in, p.bytes_per_row_out), (512, 768));
        // 768 * 7 = 5376 bytes a plane out: 15 planes a slab.
        assert_eq!(p.per_slab, 15);
        let firsts: Vec<_> = p
            .slabs
            .iter()
            .map(|s| (s.first, s.planes, s.planes_in))
            .collect();
        assert_eq!(firsts, vec![(0, 15, 16), (15, 15, 16), (30, 7, 7)]);
    }

    /// A volume over the device's array layers or 2-D side, or empty, is not paired.
    #[test]
    fn volumes_over_the_limits_are_not_paired() {
        let l = limits();
        assert!(plan([16, 16, 2049], &l, SLAB_BYTES).is_none());
        assert!(plan([16385, 1, 1], &l, SLAB_BYTES).is_none());
        assert!(plan([16, 0, 16], &l, SLAB_BYTES).is_none());
        let tight = wgpu::Limits {
            max_storage_buffer_binding_size: 1000,
            ..l
        };
        assert!(plan([256, 256, 4], &tight, SLAB_BYTES).is_none());
        assert!(plan([256, 256, 256], &l, SLAB_BYTES).is_some());
    }

    /// The pair pass is valid WGSL (naga, no GPU needed; `tests/volume.rs` checks what it
    /// builds through the pixels).
    #[test]
    fn the_pair_pass_source_is_valid() {
        crate::pipeline::assert_valid_with_constants(
            SHADER,
            &[],
            &[(wgpu::naga::ShaderStage::Compute, "pair")],
            "volume pairs",
        );
    }

    /// The build on the device, over slabs of one plane, of a few planes and of all, equals
    /// the pairs a CPU makes, texel for texel, for widths that are and are not multiples of
    /// the sixteen voxels an invocation pairs, and one over a workgroup's 1024.
    #[test]
    fn the_build_pairs_each_plane_with_the_next() {
        let renderer = crate::Renderer::new().expect("a device (lavapipe in CI)");
        let (device, queue) = (renderer.device(), renderer.queue());
        let mut set = ZPairsSet::new(device, true);
        for [w, h, d] in [[8u32, 4, 5], [13, 7, 11], [300, 3, 9], [1100, 2, 3]] {
            let voxels: Vec<u8> = (0..w * h * d)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                .collect();
            let extent = wgpu::Extent3d {
                width: w,
                height: h,
                depth_or_array_layers: d,
            };
            let texture = device.create_texture(&wgpu::TextureDescriptor {
                label: None,
                size: extent,
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D3,
                format: wgpu::TextureFormat::R8Unorm,
                usage: wgpu::TextureUsages::TEXTURE_BINDING
                    | wgpu::TextureUsages::COPY_DST
                    | wgpu::TextureUsages::COPY_SRC,
                view_formats: &[],
            });
            queue.write_texture(
                texture.as_image_copy(),
                &voxels,
                wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(w),
                    rows_per_image: Some(h),
                },
                extent,
            );
            let row_out = u64::from(w.div_ceil(4) * 8).next_multiple_of(256) * u64::from(h);
            for slab_bytes in [1, 3 * row_out, u64::MAX / 2] {
                let pairs = set.make(device, &texture, slab_bytes).expect("fits");
                let slabs = pairs.plan.slabs.len();
                set.pairs.insert(1, pairs);
                let mut enc = device.create_command_encoder(&Default::default());
                assert!(set.record_build(1, &mut enc), "a new copy is built");
                queue.submit([enc.finish()]);
                let got = read_pairs(device, queue, &set.pairs[&1].texture);
                let at = |x: u32, y: u32, z: u32| voxels[((z * h + y) * w + x) as usize];
                for z in 0..d {
                    for y in 0..h {
                        for x in 0..w {
                            let i = (((z * h + y) * w + x) * 2) as usize;
                            let want = [at(x, y, z), at(x, y, (z + 1).min(d - 1))];
                            assert_eq!(
                                got[i..i + 2],
                                want,
                                "{w} x {h} x {d} in {slabs} slabs: texel ({x}, {y}) of layer {z}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The paired texture's texels, two bytes each, x fastest.
    fn read_pairs(device: &wgpu::Device, queue: &wgpu::Queue, texture: &wgpu::Texture) -> Vec<u8> {
        let e = texture.size();
        let bytes_per_row = (e.width * 2).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: u64::from(bytes_per_row * e.height * e.depth_or_array_layers),
            usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
            mapped_at_creation: false,
        });
        let mut enc = device.create_command_encoder(&Default::default());
        enc.copy_texture_to_buffer(
            texture.as_image_copy(),
            wgpu::TexelCopyBufferInfo {
                buffer: &buffer,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(bytes_per_row),
                    rows_per_image: Some(e.height),
                },
            },
            e,
        );
        queue.submit([enc.finish()]);
        buffer
            .slice(..)
            .map_async(wgpu::MapMode::Read, |r| r.expect("map"));
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("poll");
        let data = buffer.slice(..).get_mapped_range().expect("mapped");
        data.chunks(bytes_per_row as usize)
            .flat_map(|row| row[..e.width as usize * 2].to_vec())
            .collect()
    }
}
