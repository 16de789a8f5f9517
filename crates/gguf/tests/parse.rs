//! Header parsing: a round trip through the writer, and every kind of malformed file.

use std::mem::size_of;

use runahead_gguf::{
    Array, GgmlType, Gguf, GgufError, GgufFile, GgufWriter, Value, MAX_ARRAY_DEPTH,
};

fn sample() -> GgufWriter {
    let mut w = GgufWriter::new();
    w.meta_str("general.architecture", "llama")
        .meta_u32("llama.block_count", 2)
        .meta_f32("llama.rope.freq_base", 10000.0)
        .meta("flag", Value::Bool(true))
        .meta("i8", Value::I8(-3))
        .meta("u16", Value::U16(65535))
        .meta("i16", Value::I16(-300))
        .meta("i32", Value::I32(-70000))
        .meta("u64", Value::U64(1 << 40))
        .meta("i64", Value::I64(-(1 << 40)))
        .meta("f64", Value::F64(0.1))
        .meta("u8", Value::U8(200))
        .meta("nums", Value::Array(Array::I32(vec![1, -2])))
        .meta_strings("names", &["a", "béta", ""]);
    w.tensor_f32("a", &[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    w.tensor("b", &[32], GgmlType::Q8_0, vec![0u8; 34]);
    w
}

#[test]
fn round_trip() {
    let bytes = sample().to_bytes();
    let file = GgufFile::from_bytes(bytes).unwrap();
    let h = &file.header;
    assert_eq!(h.version, 3);
    let m = &h.metadata;
    assert_eq!(m.str("general.architecture").unwrap(), "llama");
    assert_eq!(m.u64("llama.block_count").unwrap(), 2);
    assert_eq!(m.f64("llama.rope.freq_base").unwrap(), 10000.0);
    assert_eq!(m.get("flag"), Some(&Value::Bool(true)));
    assert_eq!(m.get("i64"), Some(&Value::I64(-(1 << 40))));
    assert_eq!(m.get("f64"), Some(&Value::F64(0.1)));
    let names: Vec<&str> = m.strings("names").unwrap().iter().collect();
    assert_eq!(names, ["a", "béta", ""]);
    assert_eq!(m.get("nums"), Some(&Value::Array(Array::I32(vec![1, -2]))));
    assert_eq!(m.len(), 14);
    assert_eq!(h.tensors.len(), 2);
    assert_eq!(h.tensors[1].offset % h.alignment, 0);
    assert_eq!(
        file.tensor_f32("a").unwrap(),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    assert_eq!(file.tensor_f32("b").unwrap(), vec![0.0; 32]);
    assert_eq!(file.tensor_info("a").unwrap().n_rows(), 2);
    assert!(matches!(
        file.tensor_f32("zzz"),
        Err(GgufError::MissingTensor(_))
    ));
    // Typed accessors refuse the wrong type.
    assert!(matches!(
        m.u64("general.architecture"),
        Err(GgufError::WrongValueType { .. })
    ));
    assert!(matches!(
        m.str("missing"),
        Err(GgufError::MissingKey { .. })
    ));
}

#[test]
fn version_2_is_accepted() {
    let mut bytes = sample().to_bytes();
    bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(Gguf::parse(&bytes).unwrap().version, 2);
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let bytes = sample().to_bytes();
    for len in 0..bytes.len() {
        let r = Gguf::parse(&bytes[..len]);
        // Cutting only trailing padding of the last tensor can still be valid.
        if let Ok(g) = r {
            let end = g.data_offset + g.tensors.iter().map(|t| t.offset + t.size).max().unwrap();
            assert!(end <= len as u64, "accepted a file cut at {len}");
        }
    }
    assert!(matches!(
        Gguf::parse(&bytes[..10]),
        Err(GgufError::Truncated { .. })
    ));
}

#[test]
fn bad_magic_and_version() {
    let mut bytes = sample().to_bytes();
    bytes[0] = b'X';
    assert!(matches!(Gguf::parse(&bytes), Err(GgufError::BadMagic(_))));
    let mut bytes = sample().to_bytes();
    bytes[4..8].copy_from_slice(&1u32.to_le_bytes());
    assert_eq!(
        Gguf::parse(&bytes).unwrap_err(),
        GgufError::UnsupportedVersion(1)
    );
    assert!(matches!(Gguf::parse(b""), Err(GgufError::Truncated { .. })));
}

/// Header of a file with one metadata entry whose bytes follow.
fn one_kv(key: &str, ty: u32, value: &[u8]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend((key.len() as u64).to_le_bytes());
    b.extend(key.as_bytes());
    b.extend(ty.to_le_bytes());
    b.extend(value);
    b
}

#[test]
fn huge_counts_do_not_allocate() {
    // A string claiming u64::MAX bytes.
    let b = one_kv("k", 8, &u64::MAX.to_le_bytes());
    assert!(matches!(Gguf::parse(&b), Err(GgufError::Truncated { .. })));
    // An array of 2^60 u32.
    let mut v = 4u32.to_le_bytes().to_vec();
    v.extend((1u64 << 60).to_le_bytes());
    assert!(matches!(
        Gguf::parse(&one_kv("k", 9, &v)),
        Err(GgufError::Truncated { .. })
    ));
    // A header claiming 2^62 tensors and metadata entries.
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend((1u64 << 62).to_le_bytes());
    b.extend((1u64 << 62).to_le_bytes());
    assert!(matches!(Gguf::parse(&b), Err(GgufError::Truncated { .. })));
}

#[test]
fn unknown_value_type_and_bad_utf8() {
    let b = one_kv("k", 99, &[0; 8]);
    assert!(matches!(
        Gguf::parse(&b),
        Err(GgufError::UnknownValueType { ty: 99, .. })
    ));
    let mut v = 2u64.to_le_bytes().to_vec();
    v.extend([0xff, 0xfe]);
    assert!(matches!(
        Gguf::parse(&one_kv("k", 8, &v)),
        Err(GgufError::InvalidUtf8 { .. })
    ));
}

#[test]
fn duplicate_key() {
    let mut w = GgufWriter::new();
    w.meta_u32("a", 1).meta_u32("a", 2);
    assert_eq!(
        Gguf::parse(&w.to_bytes()).unwrap_err(),
        GgufError::DuplicateKey("a".into())
    );
}

/// Replaces the first occurrence of `from` (a u32 or u64 field in the tensor table) with `to`.
fn patch(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
    bytes[at..at + to.len()].copy_from_slice(to);
}

fn single_tensor(name: &str, shape: &[u64], ty: GgmlType, len: usize) -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.tensor(name, shape, ty, vec![0u8; len]);
    w.to_bytes()
}

#[test]
fn tensor_table_errors() {
    // Unknown type id: Q4_1 (3) patched to 77.
    let mut b = single_tensor("t", &[32], GgmlType::Q4_1, 20);
    let ty_at = 24 + 8 + 1 + 4 + 8; // header, name len, name, n_dims, dim
    b[ty_at..ty_at + 4].copy_from_slice(&77u32.to_le_bytes());
    assert!(matches!(
        Gguf::parse(&b),
        Err(GgufError::UnknownTensorType { id: 77, .. })
    ));

    // Row length not a multiple of the block size.
    let b = single_tensor("t", &[33], GgmlType::Q4_0, 18);
    assert!(matches!(Gguf::parse(&b), Err(GgufError::BadShape { .. })));

    // Element count overflow.
    let b = single_tensor("t", &[1 << 40, 1 << 40], GgmlType::F32, 4);
    assert!(matches!(Gguf::parse(&b), Err(GgufError::BadShape { .. })));

    // Data past the end of the file: declare 64 elements but store 32 bytes.
    let mut b = single_tensor("t", &[8], GgmlType::F32, 32);
    patch(&mut b, &8u64.to_le_bytes(), &64u64.to_le_bytes());
    assert!(matches!(
        Gguf::parse(&b),
        Err(GgufError::TensorOutOfBounds { .. })
    ));

    // Too many dimensions.
    let mut b = single_tensor("t", &[8], GgmlType::F32, 32);
    patch(&mut b, &[1, 0, 0, 0, 8, 0], &[5, 0, 0, 0, 8, 0]);
    assert!(matches!(
        Gguf::parse(&b),
        Err(GgufError::TooManyDims { n_dims: 5, .. })
    ));

    // Misaligned offset.
    let mut w = GgufWriter::new();
    w.tensor_f32("a", &[8], &[0.0; 8])
        .tensor_f32("b", &[8], &[0.0; 8]);
    let mut b = w.to_bytes();
    patch(&mut b, &32u64.to_le_bytes(), &4u64.to_le_bytes());
    assert!(matches!(
        Gguf::parse(&b),
        Err(GgufError::MisalignedTensor { .. })
    ));

    // Duplicate names.
    let mut w = GgufWriter::new();
    w.tensor_f32("a", &[1], &[0.0])
        .tensor_f32("a", &[1], &[0.0]);
    assert!(matches!(
        Gguf::parse(&w.to_bytes()),
        Err(GgufError::DuplicateTensor(_))
    ));
}

#[test]
fn bad_alignment() {
    let mut w = GgufWriter::new();
    w.meta_u32("general.alignment", 3);
    assert_eq!(
        Gguf::parse(&w.to_bytes()).unwrap_err(),
        GgufError::BadAlignment(3)
    );
}

#[test]
fn missing_file_is_an_io_error() {
    let err = GgufFile::open("/nonexistent/model.gguf").err().unwrap();
    assert!(matches!(err, GgufError::Io(_)));
    assert!(err.to_string().contains("/nonexistent/model.gguf"));
}

/// A value of `depth` nested one-element array headers around a u8: 12 bytes a level.
fn nested_arrays(depth: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(depth * 12 + 1);
    for level in 0..depth {
        let inner = if level + 1 == depth { 0u32 } else { 9 }; // u8 innermost, else array
        v.extend(inner.to_le_bytes());
        v.extend(1u64.to_le_bytes());
    }
    v.push(7);
    one_kv("k", 9, &v)
}

#[test]
fn deeply_nested_arrays_are_an_error_not_a_stack_overflow() {
    // 100,000 levels in 1.2 MB: without a limit the recursive parser overflows the stack.
    let err = Gguf::parse(&nested_arrays(100_000)).unwrap_err();
    assert!(
        matches!(err, GgufError::ArraysTooDeep { ref key, limit: 4 } if key == "k"),
        "{err}"
    );
    // The limit itself is accepted.
    assert_eq!(MAX_ARRAY_DEPTH, 4);
    let g = Gguf::parse(&nested_arrays(MAX_ARRAY_DEPTH as usize)).unwrap();
    assert_eq!(g.metadata.len(), 1);
    assert!(matches!(
        Gguf::parse(&nested_arrays(MAX_ARRAY_DEPTH as usize + 1)),
        Err(GgufError::ArraysTooDeep { .. })
    ));
}

/// A file whose one array holds `count` u8 values: one byte each in the file and in memory.
fn u8_array(count: usize) -> Vec<u8> {
    let mut v = 0u32.to_le_bytes().to_vec();
    v.extend((count as u64).to_le_bytes());
    v.resize(v.len() + count, 1);
    one_kv("k", 9, &v)
}

/// A file whose one array holds `count` empty arrays of u8: 12 bytes each in the file (type and
/// count), an `Array` each once parsed, the most a file byte can become.
fn empty_arrays(count: usize) -> Vec<u8> {
    let mut v = 9u32.to_le_bytes().to_vec();
    v.extend((count as u64).to_le_bytes());
    for _ in 0..count {
        v.extend(0u32.to_le_bytes());
        v.extend(0u64.to_le_bytes());
    }
    one_kv("k", 9, &v)
}

#[test]
fn metadata_memory_is_bounded_by_the_budget() {
    let refused = |bytes: &[u8], budget: u64| match Gguf::parse_with_budget(bytes, budget) {
        Err(GgufError::HeaderTooLarge {
            what,
            needed,
            limit,
        }) => what == "k" && limit == budget && needed > limit,
        _ => false,
    };
    // Refused before the array is allocated, whatever its element type.
    assert!(refused(&u8_array(2 << 20), 1 << 20));
    let per_array = size_of::<runahead_gguf::Array>();
    let count = (1 << 20) / per_array + 1;
    assert!(refused(&empty_arrays(count), 1 << 20));
    // A tenth of that parses.
    assert!(Gguf::parse_with_budget(&empty_arrays(count / 10), 1 << 20).is_ok());
    // Parsed, a file byte takes at most a few bytes: the default budget is never reached by a
    // header much smaller than it.
    assert!(per_array <= 5 * 12, "{per_array} bytes an array");
}

#[test]
fn every_allocation_of_the_header_is_charged_to_the_budget() {
    let bytes = sample().to_bytes();
    let used = Gguf::parse(&bytes).unwrap().memory;
    assert!(used > 0);
    assert_eq!(Gguf::parse_with_budget(&bytes, used).unwrap().memory, used);
    // One byte less fails somewhere, whichever allocation comes last.
    assert!(matches!(
        Gguf::parse_with_budget(&bytes, used - 1),
        Err(GgufError::HeaderTooLarge { .. })
    ));
    // Long strings, nested arrays and tensor tables are each charged.
    let mut w = GgufWriter::new();
    w.meta_str("s", &"x".repeat(10_000));
    assert!(matches!(
        Gguf::parse_with_budget(&w.to_bytes(), 5_000),
        Err(GgufError::HeaderTooLarge { ref what, .. }) if what == "s"
    ));
    let inner = Array::U8(vec![0; 1000]);
    let mut w = GgufWriter::new();
    w.meta("a", Value::Array(Array::Array(vec![inner; 10])));
    assert!(matches!(
        Gguf::parse_with_budget(&w.to_bytes(), 10_000),
        Err(GgufError::HeaderTooLarge { ref what, .. }) if what == "a"
    ));
    let mut w = GgufWriter::new();
    for i in 0..100 {
        w.tensor_f32(&format!("t{i}"), &[1], &[0.0]);
    }
    assert!(matches!(
        Gguf::parse_with_budget(&w.to_bytes(), 1_000),
        Err(GgufError::HeaderTooLarge { ref what, .. }) if what == "the tensor table"
    ));
}

#[test]
fn empty_tensor_past_the_end_of_a_short_file_reads_as_empty() {
    // Header of 57 bytes, one tensor of zero elements: its data "starts" at the aligned
    // offset 64, past the end of the unpadded file.
    let mut b = single_tensor("t", &[0], GgmlType::F32, 0);
    b.truncate(57);
    let file = GgufFile::from_bytes(b).unwrap();
    assert_eq!(file.header.data_offset, 64);
    let info = file.tensor_info("t").unwrap();
    assert!(file.tensor_bytes(info).is_empty());
    assert_eq!(file.tensor_f32("t").unwrap(), Vec::<f32>::new());
}

/// Loaders look up every tensor a config reads (`runahead_model::check_tensors`, then the
/// engines), so lookups go through an index: a linear search made a 50 MB file of a million
/// empty tensors and a 1024-layer config cost 10^10 string comparisons. Found reviewing what
/// the fuzz target gguf_load drives (its 64 KB inputs hold at most ~2,700 tensors). Looking up
/// each of 200,000 tensors must take well under the minute a linear search takes.
#[test]
fn tensor_lookup_is_indexed() {
    const N: usize = 200_000;
    let mut w = GgufWriter::new();
    for i in 0..N {
        w.tensor(
            &format!("blk.{i}.attn_q.weight"),
            &[0],
            GgmlType::F32,
            Vec::new(),
        );
    }
    let header = Gguf::parse(&w.to_bytes()).unwrap();
    let start = std::time::Instant::now();
    for i in (0..N).rev() {
        let name = format!("blk.{i}.attn_q.weight");
        assert_eq!(header.tensor(&name).map(|t| &t.name), Some(&name));
        assert!(
            start.elapsed().as_secs() < 5,
            "{} of {N} lookups took {:?}",
            N - i,
            start.elapsed()
        );
    }
    assert!(header.tensor("blk.0.missing").is_none());
}

#[test]
fn a_header_parses_from_a_prefix_of_the_file() {
    let bytes = sample().to_bytes();
    let whole = Gguf::parse(&bytes).unwrap();
    let header = whole.data_offset as usize;
    let len = bytes.len() as u64;
    // The header ends with the tensor table; the data section starts at the next multiple of
    // the alignment.
    let end = (0..=header)
        .find(|&cut| Gguf::parse_prefix(&bytes[..cut], len).is_ok())
        .unwrap();
    assert!(
        end as u64 + whole.alignment > header as u64,
        "{end} {header}"
    );
    // Every shorter prefix asks for more than it has, never for more than the header: growing
    // a prefix to what it asks for reaches the header in finite steps.
    for cut in 0..end {
        let err = Gguf::parse_prefix(&bytes[..cut], len).unwrap_err();
        let needed = err.bytes_needed().unwrap_or_else(|| panic!("{cut}: {err}"));
        assert!(
            needed > cut as u64 && needed <= end as u64,
            "{cut}: {needed}"
        );
    }
    // The header alone describes the file as the whole file does.
    let prefix = Gguf::parse_prefix(&bytes[..end], len).unwrap();
    assert_eq!(prefix.tensors, whole.tensors);
    assert_eq!(prefix.data_offset, whole.data_offset);
    assert_eq!(prefix.metadata.len(), whole.metadata.len());
    assert!(Gguf::parse_prefix(&bytes[..header], u64::MAX).is_ok());
    // A file too short for its tensors is refused from its header alone.
    let last = whole
        .tensors
        .iter()
        .map(|t| t.offset + t.size)
        .max()
        .unwrap();
    assert!(Gguf::parse_prefix(&bytes[..header], header as u64 + last).is_ok());
    assert!(matches!(
        Gguf::parse_prefix(&bytes[..header], header as u64 + last - 1),
        Err(GgufError::TensorOutOfBounds { .. })
    ));
    assert_eq!(GgufError::BadMagic(*b"GGUX").bytes_needed(), None);
}

#[test]
fn a_header_parsed_from_a_prefix_takes_the_whole_file_without_a_second_parse() {
    let bytes = sample().to_bytes();
    let header = Gguf::parse_prefix(&bytes, u64::MAX).unwrap();
    let file = GgufFile::from_parsed(header.clone(), bytes.clone()).unwrap();
    let whole = GgufFile::from_bytes(bytes.clone()).unwrap();
    for t in &whole.header.tensors {
        assert_eq!(file.tensor_bytes(t), whole.tensor_bytes(t), "{}", t.name);
    }
    // Parsed without knowing the size, the header is checked against the bytes that came.
    let end = header
        .tensors
        .iter()
        .map(|t| t.offset + t.size)
        .max()
        .unwrap();
    let short = bytes[..(header.data_offset + end) as usize - 1].to_vec();
    assert!(matches!(
        GgufFile::from_parsed(header, short),
        Err(GgufError::TensorOutOfBounds { .. })
    ));
}
