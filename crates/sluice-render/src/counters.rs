//! Counters of what the proxy layer did: the numbers tests and benchmarks read.

/// What a renderer's proxy layer has done since it was created (cumulative fields) and holds
/// now (current fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// Bytes of source data copied to the GPU (after format conversion, without row padding).
    pub bytes_uploaded: u64,
    /// Bytes of data derived from sources on the CPU (mesh normals computed for smooth
    /// shading, wireframe edges) and uploaded.
    pub derived_bytes_uploaded: u64,
    /// Bytes copied GPU-side from device-resident sources (CUDA or Vulkan memory), never
    /// through the host.
    pub device_bytes_copied: u64,
    /// GPU copy commands issued for source data.
    pub copies_issued: u64,
    /// Of the device-resident copies, those done by a compute pass that stores texels
    /// instead of a copy command (see `docs/gpu-interop.md`).
    pub compute_copies: u64,
    /// Of the device-resident copies, those written by the producer's API straight into a
    /// texture the device upload path provided (a CUDA copy into a CUDA array mapped onto a
    /// Vulkan image), with nothing copied on the renderer's queue.
    pub textures_provided: u64,
    /// Of the textures provided, those sampled in place from the source's host pages
    /// (lavapipe: see `docs/gpu-interop.md`), one per hand-over drawn: nothing is copied at all.
    pub textures_in_place: u64,
    /// Frames that found the host pages they sample in place handed back since their
    /// changes were taken (another thread replaced the data meanwhile), and copied what the
    /// source showed then instead.
    pub in_place_fallbacks: u64,
    /// Bytes of GPU memory held by source textures and buffers now.
    pub resident_bytes: u64,
    /// Source textures alive now: one per source shown, however many visuals show it (a
    /// volume split into bricks counts one per brick).
    pub textures_alive: u64,
    /// Attribute and index buffers alive now (one per source and format).
    pub buffers_alive: u64,
    /// Source textures created so far (bricks counted one by one).
    pub textures_created: u64,
    /// Staging buffers created so far (a reused ring keeps this small).
    pub staging_buffers_created: u64,
    /// Bind groups made so far for visuals and colormap tables: a visual's when it is first
    /// drawn and again when one of its textures or buffers is recreated or it needs another
    /// pipeline; a colormap table's once, with the table. A colormap or contrast change makes
    /// none.
    pub bind_groups_created: u64,
    /// Bytes of staging memory held now.
    pub staging_bytes: u64,
    /// Pages of paged sources on the GPU now.
    pub pages_resident: u64,
    /// Bytes those pages hold (slot bytes per page): what the GPU budget bounds.
    pub page_bytes_resident: u64,
    /// The most page bytes resident after any frame so far.
    pub peak_page_bytes: u64,
    /// The renderer's GPU budget for pages ([`crate::RendererOptions::gpu_budget`]).
    pub gpu_budget: u64,
    /// Pages uploaded so far (their bytes count in `bytes_uploaded`).
    pub pages_uploaded: u64,
    /// Pages evicted so far (to make room, or because their data changed).
    pub pages_evicted: u64,
    /// Bytes of page-table entries written so far.
    pub page_table_bytes_written: u64,
    /// Atlas textures shrunk so far, after most of their pages left (see docs/chunked.md).
    pub atlases_shrunk: u64,
    /// Volume min/max grids built so far by the GPU's compute passes (after the volume's
    /// data changed).
    pub volume_grids_built: u64,
    /// Volume min/max grids computed so far on the host while a whole volume was staged, and
    /// written instead of built: on CPU devices (see `docs/architecture.md`, "Sampling").
    pub volume_grids_written: u64,
    /// Volumes drawn without looking their min/max grid up, because no cell of it could be
    /// skipped (every ray takes every sample; known on CPU devices after a whole upload, see
    /// `docs/architecture.md`, "Sampling").
    pub volume_marches_without_grid: u64,
    /// Builds on the device of z-paired copies of 8-bit volumes (CPU devices: after a change
    /// the host did not write the copy for, or for a copy made over data already uploaded;
    /// see
    /// `docs/architecture.md`, "Sampling").
    pub volume_pairs_built: u64,
    /// Z-paired copies written from the host while a whole volume was staged, instead of
    /// built (CPU devices).
    pub volume_pairs_written: u64,
    /// Volume draws whose linear samples came from the data's z-paired copy.
    pub volume_marches_paired: u64,
    /// One-colour mesh draws whose positions were known to hold no NaN, drawn without the
    /// per-vertex NaN test and its discard (CPU devices, which scan f32 buffers as they are
    /// staged; see `docs/volumes-and-meshes.md`).
    pub mesh_draws_without_nan_test: u64,
    /// Mesh draws whose triangles went in an order reordered for vertex reuse (opaque
    /// one-colour meshes on CPU devices, `RendererOptions::mesh_reorder`).
    pub mesh_draws_reordered: u64,
    /// Mesh draws that left out the triangles covering no pixel centre (dense meshes,
    /// `RendererOptions::mesh_cull`; the pixels are the same).
    pub mesh_draws_culled: u64,
    /// Runs of that cull's passes: a culled draw whose positions, indices, transform and
    /// target size are those of the last run draws its result again without them.
    pub mesh_culls_run: u64,
    /// Frames of one dense image drawn by a compute pass instead of the rasterizer
    /// ([`crate::ImageDraw::Compute`]).
    pub image_draws_by_compute: u64,
    /// What the device upload path's pools did (CUDA destinations: host waits, GPU-side
    /// waits, destinations made), as the path reports it; zero without one.
    pub device_pools: DevicePoolCounters,
}

/// What a device upload path's pools of destinations did (see
/// [`crate::DeviceUpload::pool_counters`]). `sluice-interop`'s CUDA pools count for the whole
/// process, since the pools serve every renderer on a device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DevicePoolCounters {
    /// Host time spent waiting for the renderer to finish reading a destination before
    /// reusing it, in nanoseconds.
    pub host_wait_nanos: u64,
    /// Reuses whose wait for the renderer's read was left to the GPU.
    pub gpu_waits: u64,
    /// Destinations (staging buffers, textures) made.
    pub created: u64,
}

impl DevicePoolCounters {
    /// Counters with these values (the struct is `#[non_exhaustive]`: implementations of
    /// [`crate::DeviceUpload`] outside this crate build it here).
    pub fn new(host_wait_nanos: u64, gpu_waits: u64, created: u64) -> Self {
        DevicePoolCounters {
            host_wait_nanos,
            gpu_waits,
            created,
        }
    }

    /// The growth since `earlier`.
    #[must_use]
    pub fn since(&self, earlier: &DevicePoolCounters) -> DevicePoolCounters {
        DevicePoolCounters {
            host_wait_nanos: self.host_wait_nanos - earlier.host_wait_nanos,
            gpu_waits: self.gpu_waits - earlier.gpu_waits,
            created: self.created - earlier.created,
        }
    }
}

impl Counters {
    /// The cumulative fields' growth since `earlier`; current fields as they are now.
    #[must_use]
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            bytes_uploaded: self.bytes_uploaded - earlier.bytes_uploaded,
            derived_bytes_uploaded: self.derived_bytes_uploaded - earlier.derived_bytes_uploaded,
            device_bytes_copied: self.device_bytes_copied - earlier.device_bytes_copied,
            copies_issued: self.copies_issued - earlier.copies_issued,
            compute_copies: self.compute_copies - earlier.compute_copies,
            textures_provided: self.textures_provided - earlier.textures_provided,
            textures_in_place: self.textures_in_place - earlier.textures_in_place,
            in_place_fallbacks: self.in_place_fallbacks - earlier.in_place_fallbacks,
            textures_created: self.textures_created - earlier.textures_created,
            staging_buffers_created: self.staging_buffers_created - earlier.staging_buffers_created,
            bind_groups_created: self.bind_groups_created - earlier.bind_groups_created,
            pages_uploaded: self.pages_uploaded - earlier.pages_uploaded,
            pages_evicted: self.pages_evicted - earlier.pages_evicted,
            page_table_bytes_written: self.page_table_bytes_written
                - earlier.page_table_bytes_written,
            atlases_shrunk: self.atlases_shrunk - earlier.atlases_shrunk,
            volume_grids_built: self.volume_grids_built - earlier.volume_grids_built,
            volume_grids_written: self.volume_grids_written - earlier.volume_grids_written,
            volume_marches_without_grid: self.volume_marches_without_grid
                - earlier.volume_marches_without_grid,
            volume_pairs_built: self.volume_pairs_built - earlier.volume_pairs_built,
            volume_pairs_written: self.volume_pairs_written - earlier.volume_pairs_written,
            volume_marches_paired: self.volume_marches_paired - earlier.volume_marches_paired,
            mesh_draws_without_nan_test: self.mesh_draws_without_nan_test
                - earlier.mesh_draws_without_nan_test,
            mesh_draws_reordered: self.mesh_draws_reordered - earlier.mesh_draws_reordered,
            mesh_draws_culled: self.mesh_draws_culled - earlier.mesh_draws_culled,
            image_draws_by_compute: self.image_draws_by_compute - earlier.image_draws_by_compute,
            mesh_culls_run: self.mesh_culls_run - earlier.mesh_culls_run,
            device_pools: self.device_pools.since(&earlier.device_pools),
            ..*self
        }
    }
}

/// What one frame did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FrameStats {
    /// Bytes of source data uploaded for this frame.
    pub bytes_uploaded: u64,
    /// Copies issued for this frame.
    pub copies_issued: u64,
    /// Visuals drawn (0 when the target already showed this frame).
    pub visuals_drawn: u32,
    /// Pixels of the target redrawn: all of them, those that the frame's changes can affect
    /// (a 2-D scene whose camera and settings stayed as they were redraws only the screen
    /// rectangle of the texels copied since), or 0 when nothing changed.
    pub pixels_drawn: u64,
    /// Whether some uploads were left for later frames (upload budget, or data not ready):
    /// render again to finish them.
    pub uploads_pending: bool,
}
