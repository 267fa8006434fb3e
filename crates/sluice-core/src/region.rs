//! Shapes and regions: axis-aligned boxes of samples.
//!
//! Both are stored padded to three axes in numpy (C) order: axis 0 is the slowest (planes of a
//! volume), axis 2 the fastest (columns). A 2-D image of 480 rows and 640 columns has the shape
//! `[1, 480, 640]` with `ndim == 2`; a 1-D vertex array of `n` elements is `[1, 1, n]`.

use std::fmt;

use crate::error::SourceError;

/// The spatial extent of a source: 1 to 3 axes, none of them empty.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    dims: [usize; 3],
    ndim: u8,
}

impl Shape {
    /// A shape from 1 to 3 axis lengths in numpy order (`[rows, cols]`, `[planes, rows, cols]`).
    ///
    /// Fails for no axis, more than three, any axis of length zero, or more samples than
    /// `usize` can count.
    pub fn new(dims: &[usize]) -> Result<Self, SourceError> {
        if dims.is_empty() || dims.len() > 3 {
            return Err(SourceError::UnsupportedDimensions {
                shape: dims.to_vec(),
            });
        }
        if dims.contains(&0) {
            return Err(SourceError::EmptyShape {
                shape: dims.to_vec(),
            });
        }
        if dims
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .is_none()
        {
            return Err(SourceError::TooLarge {
                shape: dims.to_vec(),
                element: None,
                channels: 1,
            });
        }
        let mut padded = [1; 3];
        padded[3 - dims.len()..].copy_from_slice(dims);
        Ok(Shape {
            dims: padded,
            ndim: dims.len() as u8,
        })
    }

    /// A 2-D shape of `height` rows and `width` columns.
    pub fn d2(height: usize, width: usize) -> Result<Self, SourceError> {
        Shape::new(&[height, width])
    }

    /// The number of axes (1, 2 or 3).
    pub fn ndim(&self) -> usize {
        self.ndim as usize
    }

    /// The axis lengths, `ndim` of them, in numpy order.
    pub fn dims(&self) -> &[usize] {
        &self.dims[3 - self.ndim as usize..]
    }

    /// The axis lengths padded to three axes with leading ones: `[depth, height, width]`.
    pub fn padded(&self) -> [usize; 3] {
        self.dims
    }

    /// Number of columns (the fastest axis).
    pub fn width(&self) -> usize {
        self.dims[2]
    }

    /// Number of rows (1 for 1-D shapes).
    pub fn height(&self) -> usize {
        self.dims[1]
    }

    /// Number of planes (1 for 1-D and 2-D shapes).
    pub fn depth(&self) -> usize {
        self.dims[0]
    }

    /// Total number of samples.
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    /// Always false: shapes have no empty axis. Present for API symmetry with `len`.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The region covering the whole shape.
    pub fn full_region(&self) -> Region {
        Region {
            origin: [0; 3],
            size: self.dims,
        }
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.dims())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // numpy's notation: a 1-tuple keeps its comma.
        match self.dims() {
            [n] => write!(f, "({n},)"),
            dims => {
                let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
                write!(f, "({})", dims.join(", "))
            }
        }
    }
}

/// An axis-aligned box of samples: `origin` and `size` per axis, padded to three axes in numpy
/// order like [`Shape`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Region {
    /// First sample on each axis: `[plane, row, column]`.
    pub origin: [usize; 3],
    /// Number of samples on each axis: `[planes, rows, columns]`.
    pub size: [usize; 3],
}

impl Region {
    /// A region of `size` samples starting at `origin`, both in numpy order with 1 to 3 axes
    /// (missing leading axes are padded: origin 0, size 1).
    ///
    /// Fails, naming both, if `origin` and `size` have different lengths, no axis, or more
    /// than three. Whether the region fits a shape is [`Region::check_within`]'s question.
    pub fn new(origin: &[usize], size: &[usize]) -> Result<Self, SourceError> {
        if origin.len() != size.len() || origin.is_empty() || origin.len() > 3 {
            return Err(SourceError::RegionAxes {
                origin: origin.to_vec(),
                size: size.to_vec(),
            });
        }
        let mut o = [0; 3];
        let mut s = [1; 3];
        o[3 - origin.len()..].copy_from_slice(origin);
        s[3 - size.len()..].copy_from_slice(size);
        Ok(Region { origin: o, size: s })
    }

    /// A 2-D region: `rows` rows starting at `row`, `cols` columns starting at `col`.
    pub fn d2(row: usize, col: usize, rows: usize, cols: usize) -> Self {
        Region {
            origin: [0, row, col],
            size: [1, rows, cols],
        }
    }

    /// A 1-D region of `len` elements starting at `start`.
    pub fn d1(start: usize, len: usize) -> Self {
        Region {
            origin: [0, 0, start],
            size: [1, 1, len],
        }
    }

    /// One past the last sample on each axis, saturating at `usize::MAX` (a region that ends
    /// past it lies inside no shape; [`Region::checked_end`] tells them apart).
    pub fn end(&self) -> [usize; 3] {
        [0, 1, 2].map(|a| self.origin[a].saturating_add(self.size[a]))
    }

    /// One past the last sample on each axis, or `None` if that overflows `usize`.
    pub fn checked_end(&self) -> Option<[usize; 3]> {
        Some([
            self.origin[0].checked_add(self.size[0])?,
            self.origin[1].checked_add(self.size[1])?,
            self.origin[2].checked_add(self.size[2])?,
        ])
    }

    /// Number of samples in the region, saturating at `usize::MAX` (exact for any region that
    /// lies inside a shape; [`Region::checked_len`] tells them apart).
    pub fn len(&self) -> usize {
        self.checked_len().unwrap_or(usize::MAX)
    }

    /// Number of samples in the region, or `None` if that overflows `usize`.
    pub fn checked_len(&self) -> Option<usize> {
        if self.is_empty() {
            // 0 samples, however large the other axes (found by the region fuzz target).
            return Some(0);
        }
        self.size[0]
            .checked_mul(self.size[1])?
            .checked_mul(self.size[2])
    }

    /// Whether the region holds no sample.
    pub fn is_empty(&self) -> bool {
        self.size.contains(&0)
    }

    /// Whether the region lies inside `shape`.
    pub fn is_within(&self, shape: &Shape) -> bool {
        let dims = shape.padded();
        (0..3).all(|a| {
            self.origin[a]
                .checked_add(self.size[a])
                .is_some_and(|end| end <= dims[a])
        })
    }

    /// `Ok` if the region lies inside `shape`, else an error naming both.
    pub fn check_within(&self, shape: &Shape) -> Result<(), SourceError> {
        if self.is_within(shape) {
            Ok(())
        } else {
            Err(SourceError::OutOfBounds {
                region: *self,
                shape: *shape,
            })
        }
    }

    /// Whether `other` lies entirely inside `self`.
    pub fn contains(&self, other: &Region) -> bool {
        let (e, oe) = (self.end(), other.end());
        (0..3).all(|a| other.origin[a] >= self.origin[a] && oe[a] <= e[a])
    }

    /// The overlap of two regions, if any sample is in both.
    pub fn intersection(&self, other: &Region) -> Option<Region> {
        let (e, oe) = (self.end(), other.end());
        let mut r = Region::default();
        for a in 0..3 {
            let lo = self.origin[a].max(other.origin[a]);
            let hi = e[a].min(oe[a]);
            if hi <= lo {
                return None;
            }
            r.origin[a] = lo;
            r.size[a] = hi - lo;
        }
        Some(r)
    }

    /// The smallest region holding both.
    pub fn bounding_union(&self, other: &Region) -> Region {
        let (e, oe) = (self.end(), other.end());
        let mut r = Region::default();
        for a in 0..3 {
            r.origin[a] = self.origin[a].min(other.origin[a]);
            r.size[a] = e[a].max(oe[a]) - r.origin[a];
        }
        r
    }

    /// This region expressed relative to `outer`'s origin (`self` must lie inside `outer`;
    /// an origin before `outer`'s is clamped to 0).
    pub fn relative_to(&self, outer: &Region) -> Region {
        Region {
            origin: [0, 1, 2].map(|a| self.origin[a].saturating_sub(outer.origin[a])),
            size: self.size,
        }
    }

    /// This region moved by `offset` samples per axis, or `None` if an origin overflows.
    pub fn checked_translated(&self, offset: [usize; 3]) -> Option<Region> {
        Some(Region {
            origin: [
                self.origin[0].checked_add(offset[0])?,
                self.origin[1].checked_add(offset[1])?,
                self.origin[2].checked_add(offset[2])?,
            ],
            size: self.size,
        })
    }

    /// This region moved by `offset` samples per axis (origins saturate at `usize::MAX`; see
    /// [`Region::checked_translated`]).
    pub fn translated(&self, offset: [usize; 3]) -> Region {
        Region {
            origin: [0, 1, 2].map(|a| self.origin[a].saturating_add(offset[a])),
            size: self.size,
        }
    }
}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Ends in u128: exact even for a region that ends past `usize::MAX`.
        let e = [0, 1, 2].map(|a| self.origin[a] as u128 + self.size[a] as u128);
        write!(
            f,
            "[{}..{}, {}..{}, {}..{}]",
            self.origin[0], e[0], self.origin[1], e[1], self.origin[2], e[2]
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_pads_leading_axes() {
        let s = Shape::new(&[480, 640]).unwrap();
        assert_eq!(s.padded(), [1, 480, 640]);
        assert_eq!(s.dims(), &[480, 640]);
        assert_eq!((s.width(), s.height(), s.depth()), (640, 480, 1));
    }

    #[test]
    fn shape_rejects_empty_and_4d() {
        assert!(matches!(
            Shape::new(&[4, 0]),
            Err(SourceError::EmptyShape { .. })
        ));
        assert!(matches!(
            Shape::new(&[1, 2, 3, 4]),
            Err(SourceError::UnsupportedDimensions { .. })
        ));
        assert!(Shape::new(&[]).is_err());
    }

    #[test]
    fn region_bounds_checks_overflow() {
        let s = Shape::d2(10, 10).unwrap();
        assert!(Region::d2(0, 0, 10, 10).is_within(&s));
        assert!(!Region::d2(5, 5, 6, 1).is_within(&s));
        assert!(!Region::d2(usize::MAX, 0, 2, 1).is_within(&s));
        let err = Region::d2(8, 0, 4, 4).check_within(&s).unwrap_err();
        assert!(err.to_string().contains("[0..1, 8..12, 0..4]"), "{err}");
    }

    #[test]
    fn intersection_and_union() {
        let a = Region::d2(0, 0, 4, 4);
        let b = Region::d2(2, 2, 4, 4);
        assert_eq!(a.intersection(&b), Some(Region::d2(2, 2, 2, 2)));
        assert_eq!(a.bounding_union(&b), Region::d2(0, 0, 6, 6));
        assert_eq!(a.intersection(&Region::d2(4, 0, 1, 1)), None);
        assert!(a.contains(&Region::d2(1, 1, 2, 2)));
    }
}
