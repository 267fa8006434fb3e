//! The `.npy` header: magic, version, and the Python-literal dict that describes the array.
//!
//! Format versions 1.0, 2.0 and 3.0 are read (they differ in the header length field and the
//! header's text encoding). Only what sluice can map is accepted: C order, little-endian (or
//! single-byte) elements of a supported type.

use crate::element::ElementType;

const MAGIC: &[u8] = b"\x93NUMPY";

/// What a `.npy` header says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NpyHeader {
    pub element: ElementType,
    pub shape: Vec<usize>,
    /// Where the array data starts in the file.
    pub data_offset: usize,
}

/// Parses the header at the start of `bytes`; the error is a sentence saying what is wrong.
pub(crate) fn parse_header(bytes: &[u8]) -> Result<NpyHeader, String> {
    if bytes.is_empty() {
        return Err("the file is empty (0 bytes); a .npy file starts with a header".into());
    }
    let magic_len = bytes.len().min(MAGIC.len());
    if bytes[..magic_len] != MAGIC[..magic_len] {
        return Err("not a .npy file (no \\x93NUMPY magic)".into());
    }
    if bytes.len() < 10 {
        return Err(format!(
            "truncated header (cut short): the file ends at byte {} inside the 10-byte prefix (magic, version, header length)",
            bytes.len()
        ));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (len_bytes, prefix) = match major {
        1 => (2, 10),
        2 | 3 => (4, 12),
        _ => {
            return Err(format!(
                "unsupported .npy format version {major}.{minor}; 1.0, 2.0 and 3.0 are supported"
            ))
        }
    };
    if bytes.len() < prefix {
        return Err(format!(
            "truncated header (cut short): the file ends at byte {} inside the {prefix}-byte prefix of format {major}.{minor}",
            bytes.len()
        ));
    }
    let header_len = if len_bytes == 2 {
        u16::from_le_bytes([bytes[8], bytes[9]]) as usize
    } else {
        u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize
    };
    let end = prefix
        .checked_add(header_len)
        .ok_or_else(|| "header length overflows".to_string())?;
    if bytes.len() < end {
        return Err(format!(
            "truncated header (cut short): it declares {header_len} bytes of header text from byte {prefix} \
             (up to byte {end}), but the file ends at byte {}",
            bytes.len()
        ));
    }
    let text = std::str::from_utf8(&bytes[prefix..end]).map_err(|e| {
        format!(
            "header text (bytes {prefix}..{end}) is not valid text at byte {}",
            prefix + e.valid_up_to()
        )
    })?;
    let descr = dict_value(text, "descr").ok_or("header has no 'descr'")?;
    let fortran = dict_value(text, "fortran_order").ok_or("header has no 'fortran_order'")?;
    let shape = dict_value(text, "shape").ok_or("header has no 'shape'")?;

    let descr = parse_string(descr).ok_or_else(|| {
        format!("descr {descr} is not a simple type string (structured dtypes are not supported)")
    })?;
    match fortran {
        "False" => {}
        "True" => {
            return Err(
                "array is in Fortran (column-major) order; save it in C order \
                 (numpy.ascontiguousarray) to map it"
                    .into(),
            )
        }
        other => return Err(format!("fortran_order is {other}, expected True or False")),
    }
    Ok(NpyHeader {
        element: parse_descr(&descr)?,
        shape: parse_shape(shape)?,
        data_offset: end,
    })
}

/// The raw text of `key`'s value in a Python dict literal: up to the next top-level comma or
/// closing brace.
fn dict_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let quoted = [format!("'{key}'"), format!("\"{key}\"")];
    let start = quoted
        .iter()
        .find_map(|q| text.find(q.as_str()).map(|i| i + q.len()))?;
    let rest = text[start..].trim_start().strip_prefix(':')?.trim_start();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    for (i, c) in rest.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[') => depth += 1,
            (None, ')' | ']') => depth -= 1,
            (None, ',' | '}') if depth == 0 => return Some(rest[..i].trim()),
            _ => {}
        }
    }
    None
}

fn parse_string(value: &str) -> Option<String> {
    let v = value.trim();
    let inner = v
        .strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .or_else(|| v.strip_prefix('"').and_then(|s| s.strip_suffix('"')))?;
    Some(inner.to_string())
}

fn parse_descr(descr: &str) -> Result<ElementType, String> {
    let (order, code) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &descr[1..]),
        _ => ('|', descr),
    };
    let element = match code {
        "u1" | "B" => ElementType::U8,
        "i1" | "b" => ElementType::I8,
        "u2" => ElementType::U16,
        "i2" => ElementType::I16,
        "u4" => ElementType::U32,
        "i4" => ElementType::I32,
        "f2" | "e" => ElementType::F16,
        "f4" | "f" => ElementType::F32,
        "f8" | "d" => ElementType::F64,
        _ => {
            return Err(format!(
            "element type {descr} is not supported; supported: u1, i1, u2, i2, u4, i4, f2, f4, f8"
        ))
        }
    };
    let big_endian = order == '>' || (order == '=' && cfg!(target_endian = "big"));
    if big_endian && element.size() > 1 {
        return Err(format!(
            "element type {descr} is big-endian; sluice maps little-endian data only \
             (convert with array.astype('<{code}'))"
        ));
    }
    Ok(element)
}

fn parse_shape(value: &str) -> Result<Vec<usize>, String> {
    let inner = value
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("shape {value} is not a tuple"))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let digits = s.trim_end_matches('L');
            digits.parse::<usize>().map_err(|_| {
                if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                    format!(
                        "shape {value} has an axis of {digits} samples, more than fit in memory on this machine"
                    )
                } else {
                    format!("shape {value} has a non-integer axis {s:?}")
                }
            })
        })
        .collect()
}

/// A complete `.npy` header (format 1.0, padded to 64 bytes) for C-ordered little-endian data.
pub fn npy_header(element: ElementType, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        element.numpy_descr()
    );
    let unpadded = 10 + dict.len() + 1;
    dict.extend(std::iter::repeat_n(
        ' ',
        unpadded.next_multiple_of(64) - unpadded,
    ));
    dict.push('\n');
    let mut out = Vec::with_capacity(10 + dict.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_header(major: u8, dict: &str) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[major, 0]);
        if major == 1 {
            out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&(dict.len() as u32).to_le_bytes());
        }
        out.extend_from_slice(dict.as_bytes());
        out
    }

    #[test]
    fn writes_what_it_reads() {
        let h = npy_header(ElementType::F32, &[3, 4]);
        assert_eq!(h.len() % 64, 0);
        let p = parse_header(&h).unwrap();
        assert_eq!(
            (p.element, p.shape.as_slice(), p.data_offset),
            (ElementType::F32, &[3usize, 4][..], h.len())
        );
        let h1 = npy_header(ElementType::U8, &[7]);
        assert_eq!(parse_header(&h1).unwrap().shape, vec![7]);
    }

    #[test]
    fn reads_versions_two_and_three() {
        for major in [2, 3] {
            let b = with_header(
                major,
                "{'descr': '<u2', 'fortran_order': False, 'shape': (5, 6), }\n",
            );
            let h = parse_header(&b).unwrap();
            assert_eq!(
                (h.element, h.shape, h.data_offset),
                (ElementType::U16, vec![5, 6], b.len())
            );
        }
    }

    #[test]
    fn rejects_fortran_big_endian_and_odd_types() {
        let f = with_header(
            1,
            "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
        );
        assert!(parse_header(&f).unwrap_err().contains("Fortran"));
        let be = with_header(
            1,
            "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }",
        );
        assert!(parse_header(&be).unwrap_err().contains("big-endian"));
        let be1 = with_header(
            1,
            "{'descr': '>u1', 'fortran_order': False, 'shape': (2,), }",
        );
        assert_eq!(parse_header(&be1).unwrap().element, ElementType::U8);
        let c = with_header(
            1,
            "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }",
        );
        assert!(parse_header(&c).unwrap_err().contains("<c8"));
        let s = with_header(
            1,
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
        );
        assert!(parse_header(&s).unwrap_err().contains("structured"));
    }

    #[test]
    fn rejects_broken_headers() {
        assert!(parse_header(b"PK\x03\x04 not npy")
            .unwrap_err()
            .contains("magic"));
        let mut b = with_header(
            1,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
        );
        b.truncate(30);
        assert!(parse_header(&b).unwrap_err().contains("truncated"));
        let no_shape = with_header(1, "{'descr': '<f4', 'fortran_order': False}");
        assert!(parse_header(&no_shape).unwrap_err().contains("'shape'"));
        let bad_shape = with_header(
            1,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }",
        );
        assert!(parse_header(&bad_shape)
            .unwrap_err()
            .contains("non-integer"));
        let v9 = with_header(9, "{}");
        assert!(parse_header(&v9).unwrap_err().contains("version 9"));
    }
}
