//! `CropSource`: a window onto part of another source, itself a source.

use crate::changes::{Changes, Version};
use crate::error::SourceError;
use crate::layout::{ChunkGrid, Layout};
use crate::region::{Region, Shape};
use crate::residency::Residency;
use crate::source::{
    DataSource, HostView, LendOutcome, ReadRequest, ReadStatus, Readable, SharedSource,
};

/// A region of another source, shown as a source of its own: one plane of a volume as an
/// image, one frame of a stack, a tile of a mosaic. Reads and lends go straight through, so
/// only the window's bytes are ever touched; changes outside the window are not reported.
pub struct CropSource {
    inner: SharedSource,
    window: Region,
    layout: Layout,
}

impl CropSource {
    /// The part `window` of `inner` (level 0), keeping `inner`'s number of axes.
    pub fn new(inner: SharedSource, window: Region) -> Result<Self, SourceError> {
        let inner_layout = inner.layout();
        let ndim = inner_layout.shape().ndim();
        Self::build(inner, window, &window.size[3 - ndim..])
    }

    /// Plane `index` (along axis 0) of a 3-D `inner`, as a 2-D source.
    pub fn plane(inner: SharedSource, index: usize) -> Result<Self, SourceError> {
        let shape = inner.layout().shape();
        if shape.ndim() != 3 {
            return Err(SourceError::ShapeMismatch {
                expected: vec![0, shape.height(), shape.width()],
                got: shape.dims().to_vec(),
            });
        }
        let window = Region::new(&[index, 0, 0], &[1, shape.height(), shape.width()])?;
        Self::build(inner, window, &[shape.height(), shape.width()])
    }

    fn build(inner: SharedSource, window: Region, dims: &[usize]) -> Result<Self, SourceError> {
        let inner_layout = inner.layout();
        window.check_within(&inner_layout.shape())?;
        let shape = Shape::new(dims)?;
        let chunk = inner_layout.chunks().chunk_size();
        let chunks = ChunkGrid::new(&chunk[3 - shape.ndim()..])?;
        let layout = Layout::new(shape, inner_layout.element(), inner_layout.channels())?
            .with_chunks(chunks);
        Ok(CropSource {
            inner,
            window,
            layout,
        })
    }

    /// The window in the inner source's coordinates.
    pub fn window(&self) -> Region {
        self.window
    }

    fn to_inner(&self, request: &ReadRequest<'_>) -> Result<Region, SourceError> {
        if request.level != 0 {
            return Err(SourceError::NoSuchLevel {
                level: request.level,
                levels: 1,
            });
        }
        request.region.check_within(&self.layout.shape())?;
        // Inside the window, which lies inside the inner shape: no overflow.
        request
            .region
            .checked_translated(self.window.origin)
            .ok_or(SourceError::OutOfBounds {
                region: request.region,
                shape: self.layout.shape(),
            })
    }
}

impl DataSource for CropSource {
    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn version(&self) -> Version {
        self.inner.version()
    }

    fn changes_since(&self, since: Version) -> Changes {
        match self.inner.changes_since(since) {
            Changes::Regions(regions) => {
                let local: Vec<Region> = regions
                    .iter()
                    .filter_map(|r| r.intersection(&self.window))
                    .map(|r| r.relative_to(&self.window))
                    .collect();
                if local.is_empty() {
                    Changes::None
                } else {
                    Changes::Regions(local)
                }
            }
            other => other,
        }
    }

    fn residency(&self) -> Residency {
        self.inner.residency()
    }

    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        let region = self.to_inner(request)?;
        self.inner.read(
            &ReadRequest {
                region,
                ..request.clone()
            },
            dst,
        )
    }

    fn lend(
        &self,
        request: &ReadRequest<'_>,
        visit: &mut dyn FnMut(HostView<'_>),
    ) -> Result<LendOutcome, SourceError> {
        let region = self.to_inner(request)?;
        self.inner.lend(
            &ReadRequest {
                region,
                ..request.clone()
            },
            &mut |view| {
                visit(HostView {
                    region: request.region,
                    ..view
                })
            },
        )
    }

    fn lend_many(
        &self,
        requests: &[ReadRequest<'_>],
        visit: &mut dyn FnMut(usize, HostView<'_>),
    ) -> Result<LendOutcome, SourceError> {
        let inner: Vec<ReadRequest<'_>> = requests
            .iter()
            .map(|r| {
                Ok(ReadRequest {
                    region: self.to_inner(r)?,
                    ..r.clone()
                })
            })
            .collect::<Result<_, SourceError>>()?;
        self.inner.lend_many(&inner, &mut |i, view| {
            visit(
                i,
                HostView {
                    region: requests[i].region,
                    ..view
                },
            )
        })
    }

    fn readable(&self) -> Readable {
        self.inner.readable()
    }

    fn label(&self) -> String {
        format!("CropSource({} of {})", self.window, self.inner.label())
    }
}
