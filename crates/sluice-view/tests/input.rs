//! Input files decode to the samples that were written: PNG (8- and 16-bit, RGB), TIFF
//! (16-bit, multi-page as a volume, 32-bit float), raw files with an offset. No GPU needed.

use sluice_core::{noop_waker, read_element, DataSource, ElementType, ReadRequest, ReadStatus};
use sluice_view::input::{self, OpenOptions};
use sluice_view::ViewError;

/// Every sample of `source` as f64, in C order, channels interleaved.
fn samples(source: &dyn DataSource) -> Vec<f64> {
    let layout = source.layout();
    let region = layout.shape().full_region();
    let mut bytes = vec![0u8; layout.region_bytes(&region)];
    let status = source
        .read(&ReadRequest::new(region, noop_waker()), &mut bytes)
        .unwrap();
    assert_eq!(status, ReadStatus::Ready);
    let size = layout.element().size();
    bytes
        .chunks_exact(size)
        .map(|b| read_element(layout.element(), b))
        .collect()
}

#[test]
fn png_16_bit_gray_and_8_bit_rgb_keep_their_samples() {
    let dir = tempfile::tempdir().unwrap();
    let gray = dir.path().join("g16.png");
    let value = |x: u32, y: u32| (x * 1000 + y * 7) as u16;
    image::ImageBuffer::<image::Luma<u16>, _>::from_fn(9, 5, |x, y| image::Luma([value(x, y)]))
        .save(&gray)
        .unwrap();
    let opened = input::open(gray.to_str().unwrap(), &OpenOptions::default()).unwrap();
    let layout = opened.source.layout();
    assert_eq!(layout.shape().dims(), &[5, 9]);
    assert_eq!(layout.element(), ElementType::U16);
    let want: Vec<f64> = (0..5)
        .flat_map(|y| (0..9).map(move |x| value(x, y) as f64))
        .collect();
    assert_eq!(samples(opened.source.as_ref()), want);

    let rgb = dir.path().join("c.png");
    image::RgbImage::from_fn(4, 3, |x, y| image::Rgb([x as u8, y as u8, 200]))
        .save(&rgb)
        .unwrap();
    let opened = input::open(rgb.to_str().unwrap(), &OpenOptions::default()).unwrap();
    assert_eq!(opened.source.layout().channels(), 3);
    let got = samples(opened.source.as_ref());
    assert_eq!(&got[..6], &[0.0, 0.0, 200.0, 1.0, 0.0, 200.0]);
}

#[test]
fn multi_page_tiff_is_a_volume_of_its_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stack.tif");
    let value = |p: u16, i: u16| p * 10_000 + i;
    {
        let file = std::fs::File::create(&path).unwrap();
        let mut enc = tiff::encoder::TiffEncoder::new(file).unwrap();
        for p in 0..3u16 {
            let page: Vec<u16> = (0..8 * 6).map(|i| value(p, i)).collect();
            enc.write_image::<tiff::encoder::colortype::Gray16>(8, 6, &page)
                .unwrap();
        }
    }
    let opened = input::open(path.to_str().unwrap(), &OpenOptions::default()).unwrap();
    let layout = opened.source.layout();
    assert_eq!(layout.shape().dims(), &[3, 6, 8]);
    assert_eq!(layout.element(), ElementType::U16);
    let want: Vec<f64> = (0..3)
        .flat_map(|p| (0..48).map(move |i| value(p, i) as f64))
        .collect();
    assert_eq!(samples(opened.source.as_ref()), want);
}

#[test]
fn tiff_pages_of_different_sizes_are_refused_with_both_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ragged.tif");
    {
        let file = std::fs::File::create(&path).unwrap();
        let mut enc = tiff::encoder::TiffEncoder::new(file).unwrap();
        enc.write_image::<tiff::encoder::colortype::Gray8>(4, 4, &[0; 16])
            .unwrap();
        enc.write_image::<tiff::encoder::colortype::Gray8>(5, 4, &[0; 20])
            .unwrap();
    }
    let err = input::open(path.to_str().unwrap(), &OpenOptions::default()).unwrap_err();
    assert!(
        matches!(err, ViewError::UnequalPages { page: 1, .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(text.contains("5 x 4") && text.contains("4 x 4"), "{text}");
}

#[test]
fn float_tiff_and_raw_with_offset_keep_their_samples() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.tif");
    let page: Vec<f32> = (0..12).map(|i| i as f32 * 0.25 - 1.0).collect();
    {
        let file = std::fs::File::create(&path).unwrap();
        let mut enc = tiff::encoder::TiffEncoder::new(file).unwrap();
        enc.write_image::<tiff::encoder::colortype::Gray32Float>(4, 3, &page)
            .unwrap();
    }
    let opened = input::open(path.to_str().unwrap(), &OpenOptions::default()).unwrap();
    assert_eq!(opened.source.layout().element(), ElementType::F32);
    let want: Vec<f64> = page.iter().map(|&v| v as f64).collect();
    assert_eq!(samples(opened.source.as_ref()), want);

    let raw = dir.path().join("r.bin");
    let mut bytes = vec![0xAAu8; 16];
    for i in 0..6i16 {
        bytes.extend_from_slice(&(i - 3).to_le_bytes());
    }
    std::fs::write(&raw, bytes).unwrap();
    let options = OpenOptions {
        shape: Some(vec![2, 3]),
        dtype: Some(ElementType::I16),
        offset: 16,
        ..OpenOptions::default()
    };
    let opened = input::open(raw.to_str().unwrap(), &options).unwrap();
    assert_eq!(
        samples(opened.source.as_ref()),
        vec![-3.0, -2.0, -1.0, 0.0, 1.0, 2.0]
    );
}
