//! Every WGSL kernel against a plain Rust CPU reference on seeded random inputs of odd sizes
//! (and the real models' sizes), with the failing index in the message.

mod common;

use common::{close, ctx, MATMUL_SHAPES};
use pollster::block_on;
use runahead_gguf::{dequantize, GgmlType};
use runahead_gpu::kernels::{
    attention_chunk, attention_chunks, split_k_index, AttentionShape, MatmulShape, Op,
    SPLIT_K_SPLITS,
};
use runahead_gpu::testing::{f32s, run_kernel, run_kernel_step, u32s, Input};
use runahead_model::testing::{random_blocks, TestRng};

/// Every format the engines decode.
fn formats() -> impl Iterator<Item = GgmlType> {
    GgmlType::all().filter(|t| t.is_supported())
}

/// The matmul in `shape` (every shape runs on any device; the engine picks one per adapter).
#[allow(clippy::too_many_arguments)]
fn matmul_gpu(
    shape: MatmulShape,
    ty: GgmlType,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    m: usize,
    y0: Option<&[f32]>,
) -> Vec<f32> {
    let row_bytes = ty.bytes_for(cols as u64).unwrap() as u32;
    let y = y0.map_or(vec![f32::NAN; m * rows], |y| y.to_vec());
    let p = [
        cols as u32,
        rows as u32,
        row_bytes,
        0,
        rows as u32,
        y0.is_some() as u32,
    ];
    let inputs = [
        Input::Bytes(w.to_vec()),
        Input::F32(x.to_vec()),
        Input::F32(y),
    ];
    let mut ctx = ctx();
    ctx.shape.matmul = shape;
    let grid = shape.grid(rows, cols, m);
    f32s(
        &block_on(run_kernel(
            &ctx,
            Op::Matmul,
            Some(ty),
            &inputs,
            &p,
            (m, 0),
            grid,
            2,
        ))
        .unwrap(),
    )
}

#[test]
fn matmul_every_format_odd_sizes_and_batch_invariance() {
    let mut rng = TestRng::new(11);
    for ty in formats() {
        let cols = if ty.block_size() == 256 { 512 } else { 96 };
        let rows = 37;
        let w = random_blocks(ty, rows * cols, 0.5, &mut rng);
        let mut wf = vec![0f32; rows * cols];
        dequantize(ty, &w, &mut wf).unwrap();
        for (m, shape) in [1usize, 3, 13]
            .into_iter()
            .flat_map(|m| MATMUL_SHAPES.map(|shape| (m, shape)))
        {
            let x = rng.floats(m * cols, 1.0);
            let want: Vec<f32> = (0..m)
                .flat_map(|t| {
                    (0..rows)
                        .map(|o| {
                            (0..cols)
                                .map(|k| wf[o * cols + k] * x[t * cols + k])
                                .sum::<f32>()
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            let got = matmul_gpu(shape, ty, &w, rows, cols, &x, m, None);
            close(&got, &want, 1e-4, &format!("matmul {ty} m={m} {shape:?}"));
            // Accumulate mode adds to what y held.
            let y0 = rng.floats(m * rows, 1.0);
            let got_acc = matmul_gpu(shape, ty, &w, rows, cols, &x, m, Some(&y0));
            let want_acc: Vec<f32> = want.iter().zip(&y0).map(|(a, b)| a + b).collect();
            close(
                &got_acc,
                &want_acc,
                1e-4,
                &format!("matmul {ty} accumulate m={m} {shape:?}"),
            );
            // Batch invariance: each row alone gives the same bits as inside the block.
            for t in 0..m {
                let alone = matmul_gpu(
                    shape,
                    ty,
                    &w,
                    rows,
                    cols,
                    &x[t * cols..(t + 1) * cols],
                    1,
                    None,
                );
                assert_eq!(
                    alone[..],
                    got[t * rows..(t + 1) * rows],
                    "matmul {ty} {shape:?}: row {t} of {m} differs from alone"
                );
            }
        }
    }
}

/// The split-K product at every split it takes (8 to 64 invocations a row, chosen by the
/// matrix's size): against the reference, and each row of a block equal to the row alone.
#[test]
fn split_k_matmul_every_split() {
    let mut rng = TestRng::new(19);
    // Rows of 1, 2, 5 and 9 units, then more rows than a split of 16 takes (the invocations'
    // cap): 8, 16, 32, 64 and 8 invocations a row.
    let sizes = [(37, 32), (37, 64), (37, 160), (37, 288), (8_200, 64)];
    let splits: Vec<u32> = sizes
        .iter()
        .map(|&(n, k)| SPLIT_K_SPLITS[split_k_index(n, k)])
        .collect();
    assert_eq!(splits, [8, 16, 32, 64, 8]);
    for ((rows, cols), ty) in sizes.into_iter().zip([
        GgmlType::Q4_1,
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q5_1,
        GgmlType::Q4_1,
    ]) {
        let w = random_blocks(ty, rows * cols, 0.5, &mut rng);
        let mut wf = vec![0f32; rows * cols];
        dequantize(ty, &w, &mut wf).unwrap();
        let m = 9;
        let x = rng.floats(m * cols, 1.0);
        let want: Vec<f32> = (0..m)
            .flat_map(|t| {
                let (x, wf) = (&x, &wf);
                (0..rows).map(move |o| {
                    (0..cols)
                        .map(|k| wf[o * cols + k] * x[t * cols + k])
                        .sum::<f32>()
                })
            })
            .collect();
        let got = matmul_gpu(MatmulShape::SplitK, ty, &w, rows, cols, &x, m, None);
        close(&got, &want, 1e-4, &format!("split-K {ty} {rows}x{cols}"));
        for t in [0, 4, 8] {
            let x_t = &x[t * cols..(t + 1) * cols];
            let alone = matmul_gpu(MatmulShape::SplitK, ty, &w, rows, cols, x_t, 1, None);
            assert_eq!(
                alone[..],
                got[t * rows..(t + 1) * rows],
                "split-K {ty} {rows}x{cols}: row {t} of {m} differs from alone"
            );
        }
    }
}

#[test]
fn matmul_at_real_model_sizes() {
    // SmolLM2's FFN down projection (576 x 1536, Q4_1) and Qwen2.5-Coder-0.5B's (896 x 4864, Q5_0).
    let mut rng = TestRng::new(12);
    for (ty, rows, cols) in [(GgmlType::Q4_1, 576, 1536), (GgmlType::Q5_0, 896, 4864)] {
        let w = random_blocks(ty, rows * cols, 0.1, &mut rng);
        let mut wf = vec![0f32; rows * cols];
        dequantize(ty, &w, &mut wf).unwrap();
        let x = rng.floats(2 * cols, 1.0);
        let want: Vec<f32> = (0..2)
            .flat_map(|t| {
                (0..rows)
                    .map(|o| {
                        (0..cols)
                            .map(|k| wf[o * cols + k] * x[t * cols + k])
                            .sum::<f32>()
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        for shape in [ctx().shape.matmul, MatmulShape::SplitK] {
            close(
                &matmul_gpu(shape, ty, &w, rows, cols, &x, 2, None),
                &want,
                1e-4,
                &format!("matmul {ty} {rows}x{cols} {shape:?}"),
            );
        }
    }
}

#[test]
fn embed_every_format() {
    let mut rng = TestRng::new(13);
    for ty in formats() {
        let k = if ty.block_size() == 256 { 256 } else { 96 };
        let vocab = 29;
        let w = random_blocks(ty, vocab * k, 1.0, &mut rng);
        let mut wf = vec![0f32; vocab * k];
        dequantize(ty, &w, &mut wf).unwrap();
        let tokens = vec![3u32, 28, 0, 3, 17];
        let m = tokens.len();
        let row_bytes = ty.bytes_for(k as u64).unwrap() as u32;
        let inputs = [
            Input::Bytes(w),
            Input::U32(tokens.clone()),
            Input::F32(vec![f32::NAN; m * k]),
        ];
        let grid = ((m * k / 32).div_ceil(64) as u32, 1, 1);
        let got = f32s(
            &block_on(run_kernel(
                &ctx(),
                Op::Embed,
                Some(ty),
                &inputs,
                &[k as u32, 0, vocab as u32, row_bytes],
                (m, 0),
                grid,
                2,
            ))
            .unwrap(),
        );
        let want: Vec<f32> = tokens
            .iter()
            .flat_map(|&t| wf[t as usize * k..(t as usize + 1) * k].to_vec())
            .collect();
        assert_eq!(got, want, "embed {ty}: decoding must be exact");
    }
}

#[test]
fn rms_norm_and_silu_mul() {
    let mut rng = TestRng::new(14);
    let (m, n) = (5usize, 97usize);
    let x = rng.floats(m * n, 3.0);
    let w = rng.floats(n, 1.0);
    let eps = 1e-5f32;
    let got = f32s(
        &block_on(run_kernel(
            &ctx(),
            Op::RmsNorm,
            None,
            &[
                Input::F32(x.clone()),
                Input::F32(w.clone()),
                Input::F32(vec![0.0; m * n]),
            ],
            &[n as u32, eps.to_bits()],
            (m, 0),
            (m as u32, 1, 1),
            2,
        ))
        .unwrap(),
    );
    let want: Vec<f32> = x
        .chunks(n)
        .flat_map(|r| {
            let s = 1.0 / (r.iter().map(|v| v * v).sum::<f32>() / n as f32 + eps).sqrt();
            r.iter()
                .zip(&w)
                .map(move |(v, g)| v * s * g)
                .collect::<Vec<_>>()
        })
        .collect();
    close(&got, &want, 1e-5, "rms_norm");

    // The gate/up product's rows are [gate | up].
    let up = rng.floats(m * n, 2.0);
    let gate_up: Vec<f32> = x
        .chunks(n)
        .zip(up.chunks(n))
        .flat_map(|(g, u)| g.iter().chain(u).copied())
        .collect();
    let grid = ((m * n).div_ceil(64) as u32, 1, 1);
    let got = f32s(
        &block_on(run_kernel(
            &ctx(),
            Op::SiluMul,
            None,
            &[Input::F32(gate_up), Input::F32(vec![f32::NAN; m * n])],
            &[n as u32],
            (m, 0),
            grid,
            1,
        ))
        .unwrap(),
    );
    let want: Vec<f32> = x
        .iter()
        .zip(&up)
        .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
        .collect();
    close(&got, &want, 1e-5, "silu_mul");
}

/// RoPE of one head (`hd` values, the first `rope_dim` turned) at `pos`, as the CPU reference.
fn rope_head(head: &mut [f32], pos: u32, rope_dim: usize, theta_scale: f32, neox: bool) {
    let mut theta = pos as f32;
    for i in 0..rope_dim / 2 {
        let (a, b) = if neox {
            (i, i + rope_dim / 2)
        } else {
            (2 * i, 2 * i + 1)
        };
        let (x0, x1) = (head[a], head[b]);
        head[a] = x0 * theta.cos() - x1 * theta.sin();
        head[b] = x0 * theta.sin() + x1 * theta.cos();
        theta *= theta_scale;
    }
}

/// The q/k/v epilogue: biases, RoPE (normal and NeoX, all of a head or its first part, at long
/// positions), q out, k and v into the f16 cache at slots base.. (rounded like `half`, edge
/// values included), every other slot untouched.
#[test]
fn qkv_bias_rope_and_cache_store() {
    let mut rng = TestRng::new(15);
    let (n_heads, n_kv, hd, cap, base) = (6usize, 2usize, 36usize, 13usize, 4usize);
    let positions = [0u32, 7, 1000, 8191, 9];
    let m = positions.len();
    let (dq, dkv) = (n_heads * hd, n_kv * hd);
    let width = dq + 2 * dkv;
    let mut qkv = rng.floats(m * width, 1.0);
    // Edge values for the f16 store (v of the first token): overflow, subnormals, a tie, -0.
    qkv[dq + dkv..][..6].copy_from_slice(&[
        70000.0,
        -1e-7,
        3.0e-5,
        1.0 + 1.0 / 2048.0,
        65519.0,
        -0.0,
    ]);
    let theta_scale = 100000f32.powf(-2.0 / hd as f32);
    let untouched = 0xbc00_bc00u32; // -1.0, -1.0 as f16
    for (neox, rope_dim, has_bias) in [
        (false, hd, false),
        (true, hd, true),
        (true, 20, true),
        (false, 20, false),
    ] {
        let bias = match has_bias {
            true => rng.floats(width, 1.0),
            false => vec![0.0],
        };
        let p = [
            n_heads as u32,
            n_kv as u32,
            hd as u32,
            rope_dim as u32,
            neox as u32,
            theta_scale.to_bits(),
            has_bias as u32,
        ];
        let inputs = || {
            [
                Input::F32(qkv.clone()),
                Input::F32(bias.clone()),
                Input::U32(positions.to_vec()),
                Input::F32(vec![f32::NAN; m * dq]),
                Input::U32(vec![untouched; cap * dkv / 2]),
                Input::U32(vec![untouched; cap * dkv / 2]),
            ]
        };
        let grid = ((m * width / 2).div_ceil(64) as u32, 1, 1);
        let run = |read| {
            block_on(run_kernel(
                &ctx(),
                Op::QkvRopeStore,
                None,
                &inputs(),
                &p,
                (m, base),
                grid,
                read,
            ))
            .unwrap()
        };
        let (got_q, got_k, got_v) = (f32s(&run(3)), u32s(&run(4)), u32s(&run(5)));

        // The reference: bias, then RoPE on q and k heads.
        let mut want = qkv.clone();
        for (t, row) in want.chunks_mut(width).enumerate() {
            if has_bias {
                row.iter_mut().zip(&bias).for_each(|(x, b)| *x += b);
            }
            for head in row[..dq + dkv].chunks_mut(hd) {
                rope_head(head, positions[t], rope_dim, theta_scale, neox);
            }
        }
        let what = format!("neox={neox} rope_dim={rope_dim} bias={has_bias}");
        let want_q: Vec<f32> = want.chunks(width).flat_map(|r| r[..dq].to_vec()).collect();
        close(&got_q, &want_q, 2e-4, &format!("q, {what}"));
        let unpack = |words: &[u32]| -> Vec<f32> {
            words
                .iter()
                .flat_map(|w| [*w as u16, (*w >> 16) as u16])
                .map(|h| half::f16::from_bits(h).to_f32())
                .collect()
        };
        for (got, start, tol, name) in [(got_k, dq, 2e-3, "k"), (got_v, dq + dkv, 0.0, "v")] {
            let got = unpack(&got);
            for (slot, row) in got.chunks(dkv).enumerate() {
                if !(base..base + m).contains(&slot) {
                    assert!(
                        row.iter().all(|&x| x == -1.0),
                        "{name} slot {slot} touched, {what}"
                    );
                    continue;
                }
                let src = &want[(slot - base) * width + start..][..dkv];
                let rounded: Vec<f32> = src
                    .iter()
                    .map(|&x| half::f16::from_f32(x).to_f32())
                    .collect();
                if tol == 0.0 {
                    // v is stored as it came: exactly half's rounding.
                    for (i, (g, w)) in row.iter().zip(&rounded).enumerate() {
                        assert!(
                            g.to_bits() == w.to_bits(),
                            "{name} slot {slot} index {i}: {g} vs {w}, {what}"
                        );
                    }
                } else {
                    close(row, &rounded, tol, &format!("{name} slot {slot}, {what}"));
                }
            }
        }
    }
}

/// Values rounded to f16, kept as f32.
fn to_f16_values(xs: Vec<f32>) -> Vec<f32> {
    xs.into_iter()
        .map(|x| half::f16::from_f32(x).to_f32())
        .collect()
}

/// f16 values two to a word, the first in the low half (the KV cache's layout).
fn pack_f16(xs: &[f32]) -> Vec<u32> {
    xs.chunks(2)
        .map(|p| {
            let h = |x: f32| half::f16::from_f32(x).to_bits() as u32;
            h(p[0]) | (h(p[1]) << 16)
        })
        .collect()
}

/// One attention case: the cache holds `base` entries before the block, block token `t` sees
/// the block entries `visible[t]`.
struct AttentionCase {
    n_heads: usize,
    n_kv: usize,
    hd: usize,
    cap: usize,
    base: usize,
    q: Vec<f32>,
    kc: Vec<f32>,
    vc: Vec<f32>,
}

impl AttentionCase {
    fn new(
        rng: &mut TestRng,
        n_heads: usize,
        n_kv: usize,
        hd: usize,
        base: usize,
        m: usize,
    ) -> Self {
        // An odd capacity with a few slots to spare past the block.
        let cap = (base + m + 3) | 1;
        AttentionCase {
            n_heads,
            n_kv,
            hd,
            cap,
            base,
            q: rng.floats(m * n_heads * hd, 1.0),
            // The cache holds f16 values: the reference sees exactly what the kernel reads.
            kc: to_f16_values(rng.floats(cap * n_kv * hd, 1.0)),
            vc: to_f16_values(rng.floats(cap * n_kv * hd, 1.0)),
        }
    }

    fn scale(&self) -> f32 {
        1.0 / (self.hd as f32).sqrt()
    }

    /// The kernel in `shape` for the block tokens `rows` (indices into the block), each
    /// seeing `visible[row]`.
    fn gpu(&self, shape: AttentionShape, visible: &[Vec<u32>], rows: &[usize]) -> Vec<f32> {
        let (n_heads, hd) = (self.n_heads, self.hd);
        let max_rows = visible.len();
        let m = rows.len();
        let mut lists = vec![0u32; max_rows * (1 + max_rows)];
        let mut q = Vec::new();
        for (i, &t) in rows.iter().enumerate() {
            let set = &visible[t];
            lists[i * (1 + max_rows)] = set.len() as u32;
            lists[i * (1 + max_rows) + 1..][..set.len()].copy_from_slice(set);
            q.extend_from_slice(&self.q[t * n_heads * hd..(t + 1) * n_heads * hd]);
        }
        let chunk = attention_chunk(self.cap);
        let chunks = attention_chunks(self.cap);
        let partials = max_rows * n_heads * chunks * (4 + hd);
        let inputs = [
            Input::F32(q),
            Input::U32(pack_f16(&self.kc)),
            Input::U32(pack_f16(&self.vc)),
            Input::F32(vec![0.0; max_rows * n_heads * self.cap]),
            // NaN where no chunk writes: a merge that read past a pair's chunks would show.
            Input::F32(vec![f32::NAN; partials]),
            Input::U32(lists.clone()),
            // Block positions: read by the sliding window only (tests/arch_kernels.rs).
            Input::U32(vec![0; m]),
        ];
        let p = [
            n_heads as u32,
            self.n_kv as u32,
            hd as u32,
            self.cap as u32,
            max_rows as u32,
            self.scale().to_bits(),
            chunk as u32,
            chunks as u32,
        ];
        let mut ctx = ctx();
        ctx.shape.attention = shape;
        // The most slots a token of this block sees.
        let slots = self.base + rows.iter().map(|&t| visible[t].len()).max().unwrap_or(0);
        let partials = block_on(run_kernel_step(
            &ctx,
            Op::Attention,
            None,
            &inputs,
            &p,
            [m as u32, self.base as u32, 0, slots as u32],
            shape.grid(n_heads, m, slots, chunk),
            4,
        ))
        .unwrap();
        let merge = [
            Input::F32(f32s(&partials)),
            Input::F32(vec![f32::NAN; m * n_heads * hd]),
            Input::U32(lists),
        ];
        f32s(
            &block_on(run_kernel(
                &ctx,
                Op::AttentionCombine,
                None,
                &merge,
                &p,
                (m, self.base),
                ((m * n_heads * hd / 4).div_ceil(64) as u32, 1, 1),
                1,
            ))
            .unwrap(),
        )
    }

    /// Plain softmax attention over the same slots.
    fn cpu(&self, visible: &[Vec<u32>]) -> Vec<f32> {
        let (n_heads, n_kv, hd, base) = (self.n_heads, self.n_kv, self.hd, self.base);
        let kv_dim = n_kv * hd;
        let m = visible.len();
        let mut want = vec![0f32; m * n_heads * hd];
        for (t, set) in visible.iter().enumerate() {
            let slots: Vec<usize> = (0..base)
                .chain(set.iter().map(|&j| base + j as usize))
                .collect();
            for h in 0..n_heads {
                let kvh = h / (n_heads / n_kv);
                let qh = &self.q[(t * n_heads + h) * hd..][..hd];
                let mut s: Vec<f32> = slots
                    .iter()
                    .map(|&sl| {
                        qh.iter()
                            .zip(&self.kc[sl * kv_dim + kvh * hd..][..hd])
                            .map(|(a, b)| a * b)
                            .sum::<f32>()
                            * self.scale()
                    })
                    .collect();
                let mx = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let sum: f32 = s
                    .iter_mut()
                    .map(|v| {
                        *v = (*v - mx).exp();
                        *v
                    })
                    .sum();
                for d in 0..hd {
                    want[(t * n_heads + h) * hd + d] = slots
                        .iter()
                        .zip(&s)
                        .map(|(&sl, p)| p / sum * self.vc[sl * kv_dim + kvh * hd + d])
                        .sum();
                }
            }
        }
        want
    }
}

/// Block visibility lists: causal, then a random tree (each token hangs off an earlier one or
/// off the cache alone).
fn causal_and_tree(rng: &mut TestRng, m: usize) -> [Vec<Vec<u32>>; 2] {
    let causal = (0..m).map(|t| (0..=t as u32).collect()).collect();
    let mut tree: Vec<Vec<u32>> = Vec::new();
    for t in 0..m {
        let parent = (rng.next_u64() % (t as u64 + 1)) as usize; // t: a root
        let mut set = if parent < t {
            tree[parent].clone()
        } else {
            Vec::new()
        };
        set.push(t as u32);
        tree.push(set);
    }
    [causal, tree]
}

#[test]
fn attention_causal_and_tree_every_shape() {
    let mut rng = TestRng::new(17);
    // Small; SmolLM2's heads behind a long cache; Qwen2.5's head dimension 128; an odd head
    // dimension (5 vec4s, 12 value groups in the split-KV kernel). The slots are split in
    // chunks of 64: one slot alone; a block whose tokens end on either side of a chunk
    // boundary (63 + 1..2, 127 + 1..3); a long cache of 18 chunks, the last one partial.
    for (n_heads, n_kv, hd, base, m) in [
        (4, 2, 16, 5, 3),
        (9, 3, 64, 301, 5),
        (12, 2, 128, 70, 4),
        (3, 1, 20, 131, 6),
        (2, 1, 8, 0, 1),
        (4, 2, 16, 63, 2),
        (6, 3, 36, 127, 3),
        (3, 1, 64, 1100, 3),
    ] {
        let case = AttentionCase::new(&mut rng, n_heads, n_kv, hd, base, m);
        for visible in causal_and_tree(&mut rng, m) {
            let want = case.cpu(&visible);
            let all: Vec<usize> = (0..m).collect();
            for shape in [AttentionShape::PerHead, AttentionShape::SplitKv] {
                let what = format!(
                    "attention {shape:?} heads {n_heads}/{n_kv} hd {hd} base {base} {visible:?}"
                );
                let got = case.gpu(shape, &visible, &all);
                close(&got, &want, 1e-5, &what);
                // Batch invariance: each token alone gives the bits it had inside the block.
                let row = n_heads * hd;
                for t in 0..m {
                    let alone = case.gpu(shape, &visible, &[t]);
                    assert_eq!(
                        alone[..],
                        got[t * row..(t + 1) * row],
                        "{what}: token {t} alone"
                    );
                }
            }
        }
    }
}

/// Rows with ties, NaN, -inf, +inf and both zeros, for the top-k kernel.
fn awkward_rows(rng: &mut TestRng, n: usize, m: usize) -> Vec<f32> {
    let mut logits = rng.floats(m * n, 4.0);
    for r in 0..m {
        let row = &mut logits[r * n..(r + 1) * n];
        // Coarse values make many exact ties.
        if r % 2 == 1 {
            row.iter_mut().for_each(|v| *v = (*v * 2.0).round());
        }
        row[3] = f32::NAN;
        row[n / 2] = f32::NEG_INFINITY;
        row[7] = 0.0;
        row[9] = -0.0;
        if r == 2 {
            row[n - 1] = f32::INFINITY;
        }
    }
    logits
}

#[test]
fn top_k_matches_the_cpu_selection_exactly() {
    let mut rng = TestRng::new(19);
    const ROW_WORDS: usize = 129;
    for (n, m) in [(1001usize, 4usize), (49152, 2), (70, 3)] {
        let logits = awkward_rows(&mut rng, n, m);
        for k in [1usize, 5, 40, 64] {
            let inputs = [
                Input::F32(logits.clone()),
                Input::U32(vec![7; m * ROW_WORDS]),
            ];
            let got = u32s(
                &block_on(run_kernel_step(
                    &ctx(),
                    Op::TopK,
                    None,
                    &inputs,
                    &[n as u32],
                    [m as u32, 0, k as u32, 0],
                    (m as u32, 1, 1),
                    1,
                ))
                .unwrap(),
            );
            for r in 0..m {
                let row = &logits[r * n..(r + 1) * n];
                let out = &got[r * ROW_WORDS..(r + 1) * ROW_WORDS];
                let want = runahead_model::top_k_of(row, k);
                let listed: Vec<(u32, f32)> = out[1..1 + k]
                    .iter()
                    .zip(&out[65..65 + k])
                    .take_while(|(&id, _)| id != u32::MAX)
                    .map(|(&id, &v)| (id, f32::from_bits(v)))
                    .collect();
                let bits = |v: &[(u32, f32)]| -> Vec<(u32, u32)> {
                    v.iter().map(|&(i, x)| (i, x.to_bits())).collect()
                };
                assert_eq!(bits(&listed), bits(&want), "top-{k} of row {r} of {n}");
                let (norm, want_norm) = (f32::from_bits(out[0]), runahead_model::log_sum_exp(row));
                assert!(
                    (norm - want_norm).abs() <= 1e-5 * want_norm.abs().max(1.0),
                    "log-normalizer of row {r} of {n}: gpu {norm} vs cpu {want_norm}"
                );
            }
        }
    }
    // A row of NaN and -inf lists nothing and has a -inf normalizer.
    let row = vec![f32::NAN, f32::NEG_INFINITY, f32::NAN];
    let got = u32s(
        &block_on(run_kernel_step(
            &ctx(),
            Op::TopK,
            None,
            &[Input::F32(row), Input::U32(vec![7; ROW_WORDS])],
            &[3],
            [1, 0, 4, 0],
            (1, 1, 1),
            1,
        ))
        .unwrap(),
    );
    assert_eq!(f32::from_bits(got[0]), f32::NEG_INFINITY);
    assert!(
        got[1..5].iter().all(|&id| id == u32::MAX),
        "{:?}",
        &got[1..5]
    );
}

#[test]
fn argmax_lowest_index_on_ties_and_nan() {
    // Rows longer than a workgroup's first pass (1,024 logits), ending in a partial one.
    let n = 3001usize;
    let mut rng = TestRng::new(18);
    let mut logits = rng.floats(4 * n, 1.0);
    logits[2500] = 5.0; // row 0: single max
    logits[n + 2900] = 7.0; // row 1: tie, lowest index wins, whoever meets which first
    logits[n + 10] = 7.0;
    logits[n + 1290] = 7.0;
    logits[2 * n + 3] = f32::NAN; // row 2: NaN never wins
    logits[2 * n + 2999] = 9.0;
    // Row 3: nothing to pick (NaN and -inf only) is marked, not read as token 0.
    for (i, v) in logits[3 * n..].iter_mut().enumerate() {
        *v = if i % 2 == 0 {
            f32::NAN
        } else {
            f32::NEG_INFINITY
        };
    }
    let got = u32s(
        &block_on(run_kernel(
            &ctx(),
            Op::Argmax,
            None,
            &[Input::F32(logits), Input::U32(vec![0; 4])],
            &[n as u32],
            (4, 0),
            (4, 1, 1),
            1,
        ))
        .unwrap(),
    );
    assert_eq!(got, vec![2500, 10, 2999, u32::MAX]);
}
