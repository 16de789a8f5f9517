//! Kernel cases shared by the native tests and the browser tests: shapes, and the
//! comparisons of an instruction set's kernels with the scalar ones.

use runahead_cpu::formats::WeightFormat;
use runahead_cpu::layout::Layout;
use runahead_cpu::matmul::Matrix;
use runahead_cpu::Kernels;

use super::{assert_bits_eq, product, random_input, random_matrix};

/// Odd shapes for every format: the smallest whole rows, a tail tile, several super-blocks.
pub fn shapes(format: WeightFormat) -> Vec<(usize, usize)> {
    let unit = format.block_size().max(32);
    let unit = if unit == 256 { 256 } else { 32 };
    vec![
        (1, unit),
        (3, unit * 3),
        (7, unit * 2),
        (13, 768.max(unit * 3)),
        // Rows long enough that a tile of several rows walks them in chunks, ending in a pair
        // of blocks and in three blocks left in the file's order.
        (3, unit * 58),
        (5, unit * 59),
        // A span of eight blocks and every count of blocks after it that a group and its
        // half-block sums serve: one, a group and one, a group and a pair, a group and three;
        // and rows chunked whose last chunk ends in a group and one.
        (4, unit * 9),
        (5, unit * 13),
        (3, unit * 14),
        (2, unit * 15),
        (2, unit * 61),
        // Whole groups of sixteen rows (AVX-512's rows side by side), after a span, a group
        // and a pair, and long.
        (16, unit * 3),
        (32, unit * 13),
        (16, unit * 61),
    ]
}

/// Shapes of the real models' matrices (SmolLM2-135M: 576 wide, FFN 1536, KV 192, vocab
/// 49152; Qwen2.5-Coder-0.5B: 896 wide, FFN 4864, KV 128, vocab 151936) a format can hold
/// (K-quants need rows of whole 256s), each with the input rows to try.
pub fn real_shapes(format: WeightFormat) -> Vec<(usize, usize, &'static [usize])> {
    use runahead_gguf::GgmlType::*;
    let ty = format.ggml_type();
    let mut shapes: Vec<(usize, usize, &[usize])> = vec![
        (576, 576, &[1, 8, 9]),
        (192, 576, &[2]),
        (1536, 576, &[3]),
        (576, 1536, &[1, 16]),
        (896, 896, &[1, 7]),
        (128, 896, &[4]),
        (4864, 896, &[1]),
        (896, 4864, &[1, 10]),
    ];
    if matches!(ty, Q8_0 | Q4_1) {
        shapes.push((49152, 576, &[1, 9]));
    }
    if ty == Q8_0 {
        shapes.push((151936, 896, &[1]));
    }
    shapes.retain(|&(_, cols, _)| cols.is_multiple_of(format.block_size()));
    shapes
}

/// `k`'s product of `w` and `x` equals the scalar kernels' bits, with `w` in the file's order
/// and, where `k` multiplies another ([`Kernels::packs`]), in that one.
fn assert_equals_scalar(k: Kernels, w: Matrix, x: &[f32], what: &str) {
    let scalar = product(Kernels::scalar(), 1, w, x);
    assert_bits_eq(&product(k, 1, w, x), &scalar, what);
    let layout = k.layout_for(w.format, w.rows);
    if layout == Layout::Lanes16 {
        let mut lanes = vec![0u8; w.bytes.len()];
        assert!(k.pack_as(
            layout,
            w.format,
            w.bytes,
            w.bytes.len() / w.rows,
            &mut lanes
        ));
        let w = w.rearranged(&lanes, layout);
        assert_bits_eq(&product(k, 1, w, x), &scalar, &format!("{what}, lanes16"));
        // Threads split the groups, never a group.
        assert_bits_eq(
            &product(k, 3, w, x),
            &scalar,
            &format!("{what}, lanes16, 3 threads"),
        );
        let unpacked = product(Kernels::scalar(), 1, w, x);
        assert_bits_eq(
            &unpacked,
            &scalar,
            &format!("{what}, lanes16, scalar kernels"),
        );
    }
    if let Some(packed) = k.pack(w.format, w.bytes, w.bytes.len() / w.rows) {
        let w = w.rearranged(&packed, Layout::Packed);
        assert_bits_eq(&product(k, 1, w, x), &scalar, &format!("{what}, packed"));
        // Kernels that read the file's order unpack a packed matrix first.
        let unpacked = product(Kernels::scalar(), 1, w, x);
        assert_bits_eq(
            &unpacked,
            &scalar,
            &format!("{what}, packed, scalar kernels"),
        );
    }
}

/// `k`'s products equal the scalar kernels' bits on every format, for tiles of 1..=8 rows and
/// their combinations, at odd sizes and the real models' sizes.
pub fn equals_scalar(k: Kernels) {
    for format in WeightFormat::all() {
        let odd = shapes(format)
            .into_iter()
            .map(|(r, c)| (r, c, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 17][..]));
        for (s, (rows, cols, ns)) in odd.chain(real_shapes(format)).enumerate() {
            let bytes = random_matrix(format, rows, cols, 100 + s as u64);
            let w = Matrix::new("w", format, rows, cols, &bytes).unwrap();
            for &n in ns {
                let x = random_input(n, cols, (s * 31 + n) as u64);
                let what = format!("{:?} {format:?} {rows}x{cols}, {n} rows", k.isa());
                assert_equals_scalar(k, w, &x, &what);
            }
        }
    }
}

/// Products stay exact when activations hit the extremes (-127..127 against weights of
/// -128 and 255-style bytes), where a SIMD pair sum could saturate.
pub fn extremes(k: Kernels) {
    use runahead_gguf::GgmlType::*;
    for format in WeightFormat::all() {
        let cols = format.block_size().max(32) * if format.block_size() == 256 { 1 } else { 8 };
        let rows = 4;
        // Every byte but the f16 scale fields 0xff or 0x80: saturated nibbles and fifth bits,
        // Q8_0's -128, 6-bit scales of 63, Q6_K scales of -128.
        let mut bytes = random_matrix(format, rows, cols, 1);
        let f16_fields: &[usize] = match format.ggml_type() {
            Q4_0 | Q5_0 | Q8_0 => &[0],
            Q4_1 | Q5_1 | Q4_K | Q5_K => &[0, 2],
            Q6_K => &[208],
            _ => &[],
        };
        if !matches!(format, WeightFormat::Float(_)) {
            for block in bytes.chunks_exact_mut(format.block_bytes()) {
                for (i, b) in block.iter_mut().enumerate() {
                    if !f16_fields.iter().any(|&f| i == f || i == f + 1) {
                        *b = if i % 3 == 0 { 0x80 } else { 0xff };
                    }
                }
            }
        }
        let w = Matrix::new("w", format, rows, cols, &bytes).unwrap();
        let x: Vec<f32> = (0..3 * cols)
            .map(|i| if i % 5 < 3 { 1.0 } else { -1.0 })
            .collect();
        assert_equals_scalar(k, w, &x, &format!("{:?} {format:?} extremes", k.isa()));
    }
}
