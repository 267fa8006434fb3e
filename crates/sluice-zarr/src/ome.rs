//! OME-Zarr multiscale metadata (0.4 and 0.5): the axes, and per level the dataset path, the
//! scale and the translation, parsed and validated with `ome_zarr_metadata`.

use serde_json::{Map, Value};

use crate::error::ZarrError;

/// What an axis holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AxisKind {
    /// A spatial axis (`z`, `y`, `x`).
    Space,
    /// Time: one point is shown at a time.
    Time,
    /// Channels: up to four are shown interleaved, or one alone.
    Channel,
    /// Another non-spatial axis (OME-Zarr custom types); it is held at index 0.
    Other,
}

/// One named axis of an array or multiscale group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axis {
    /// The axis name (`t`, `c`, `z`, `y`, `x`, or `dim_N` for unnamed Zarr v2 axes).
    pub name: String,
    /// What the axis holds.
    pub kind: AxisKind,
}

/// One dataset of a multiscale group, before its array is opened.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OmeDataset {
    pub(crate) path: String,
    /// Physical size of one sample per axis (1 where not given).
    pub(crate) scale: Vec<f64>,
    /// Physical position of sample 0 per axis (0 where not given).
    pub(crate) translation: Vec<f64>,
}

/// The first multiscale image of a group.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OmeMultiscale {
    pub(crate) version: &'static str,
    pub(crate) axes: Vec<Axis>,
    pub(crate) datasets: Vec<OmeDataset>,
}

/// Finds and parses OME-Zarr multiscale metadata in a group's attributes: `ome.multiscales`
/// (0.5, Zarr v3) or `multiscales` (0.4, Zarr v2). `Ok(None)` where there is neither.
pub(crate) fn parse(
    url: &str,
    attrs: &Map<String, Value>,
) -> Result<Option<OmeMultiscale>, ZarrError> {
    let invalid = |reason: String| ZarrError::Metadata {
        url: url.to_string(),
        reason,
    };
    if let Some(ome) = attrs.get("ome") {
        let fields: ome_zarr_metadata::v0_5::OmeFields = serde_json::from_value(ome.clone())
            .map_err(|e| invalid(format!("OME-Zarr 0.5 attributes: {e}")))?;
        let Some(image) = fields.multiscales.and_then(|m| m.into_iter().next()) else {
            return Ok(None);
        };
        let axes = image.axes.iter().map(axis).collect();
        let datasets = image
            .datasets
            .iter()
            .map(|d| dataset(url, d))
            .collect::<Result<_, _>>()?;
        return Ok(Some(OmeMultiscale {
            version: "0.5",
            axes,
            datasets,
        }));
    }
    if let Some(multiscales) = attrs.get("multiscales") {
        let mut group = Map::new();
        group.insert("multiscales".to_string(), multiscales.clone());
        let fields: ome_zarr_metadata::v0_4::OmeNgffGroupAttributes =
            serde_json::from_value(Value::Object(group))
                .map_err(|e| invalid(format!("OME-Zarr 0.4 multiscales: {e}")))?;
        let Some(image) = fields.multiscales.and_then(|m| m.into_iter().next()) else {
            return Ok(None);
        };
        let axes = image.axes.iter().map(axis).collect();
        let datasets = image
            .datasets
            .iter()
            .map(|d| dataset(url, d))
            .collect::<Result<_, _>>()?;
        return Ok(Some(OmeMultiscale {
            version: "0.4",
            axes,
            datasets,
        }));
    }
    Ok(None)
}

fn axis(a: &ome_zarr_metadata::v0_4::Axis) -> Axis {
    use ome_zarr_metadata::v0_4::AxisType;
    let kind = match &a.r#type {
        Some(AxisType::Space) => AxisKind::Space,
        Some(AxisType::Time) => AxisKind::Time,
        Some(AxisType::Channel) => AxisKind::Channel,
        Some(_) => AxisKind::Other,
        None => kind_from_name(&a.name),
    };
    Axis {
        name: a.name.clone(),
        kind,
    }
}

/// The kind an axis has by its name alone (Zarr v3 `dimension_names`, OME axes without a type).
pub(crate) fn kind_from_name(name: &str) -> AxisKind {
    match name.to_ascii_lowercase().as_str() {
        "t" | "time" => AxisKind::Time,
        "c" | "ch" | "channel" | "channels" => AxisKind::Channel,
        _ => AxisKind::Space,
    }
}

fn dataset(
    url: &str,
    d: &ome_zarr_metadata::v0_4::MultiscaleImageDataset,
) -> Result<OmeDataset, ZarrError> {
    use ome_zarr_metadata::v0_4::{
        CoordinateTransform, CoordinateTransformScale, CoordinateTransformTranslation,
    };
    let mut scale = Vec::new();
    let mut translation = Vec::new();
    for t in &d.coordinate_transformations {
        match t {
            CoordinateTransform::Scale(CoordinateTransformScale::List { scale: s }) => {
                scale = s.iter().map(|&v| f64::from(v)).collect();
            }
            CoordinateTransform::Translation(CoordinateTransformTranslation::List {
                translation: s,
            }) => translation = s.iter().map(|&v| f64::from(v)).collect(),
            CoordinateTransform::Identity => {}
            _ => {
                return Err(ZarrError::Metadata {
                    url: url.to_string(),
                    reason: format!(
                        "dataset {}: transformations stored in files are not supported",
                        d.path
                    ),
                })
            }
        }
    }
    if let Some(bad) = scale.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
        return Err(ZarrError::Metadata {
            url: url.to_string(),
            reason: format!("dataset {}: scale {bad} is not a positive number", d.path),
        });
    }
    Ok(OmeDataset {
        path: d.path.clone(),
        scale,
        translation,
    })
}
