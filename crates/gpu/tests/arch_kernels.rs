//! The kernels' architecture steps against plain Rust references on seeded random inputs of odd
//! sizes: per-head Q/K RMS norms and RoPE with frequency factors, a freq scale and an attention
//! factor (`qkv_rope_store.wgsl`); sliding-window attention with its own scale in both shapes,
//! on a causal block and on a tree, head dimension 256 included; the GELU-tanh gated step; logit soft-capping; a post-norm
//! added to the residual; the scaled embedding.

mod common;

use common::{close, ctx};
use pollster::block_on;
use runahead_gguf::{dequantize, GgmlType};
use runahead_gpu::kernels::{attention_chunk, attention_chunks, AttentionShape, Op};
use runahead_gpu::testing::{f32s, run_kernel, run_kernel_step, Input};
use runahead_model::gelu_tanh;
use runahead_model::testing::{random_blocks, TestRng};

fn rms_norm_row(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let ss: f32 = x.iter().map(|v| v * v).sum();
    let scale = 1.0 / (ss / x.len() as f32 + eps).sqrt();
    x.iter().zip(w).map(|(v, g)| v * scale * g).collect()
}

/// Q/K norms per head, then RoPE (NeoX, partial) with per-pair factors, a freq scale and an
/// attention factor: q out and k into the cache, as the reference computes them.
#[test]
fn qk_norm_and_rope_factors() {
    let mut rng = TestRng::new(46);
    let (n_heads, n_kv, hd, rope_dim, cap, base) = (6usize, 2usize, 36usize, 24usize, 9, 3);
    let positions = [3u32, 4, 700, 2];
    let m = positions.len();
    let (dq, dkv) = (n_heads * hd, n_kv * hd);
    let width = dq + 2 * dkv;
    let eps = 1e-6f32;
    let qkv = rng.floats(m * width, 2.0);
    let theta_scale = 10000f32.powf(-2.0 / rope_dim as f32);
    for (qk_norm, factors, freq_scale, mscale, neox) in [
        (true, false, 1.0f32, 1.0f32, true),
        (false, true, 1.0, 1.0, false),
        (true, true, 0.25, 1.19, true),
    ] {
        let (qn, kn) = (rng.floats(hd, 1.0), rng.floats(hd, 1.0));
        let f: Vec<f32> = (0..rope_dim / 2)
            .map(|i| 1.0 + i as f32 * 0.7 + rng.floats(1, 0.2)[0])
            .collect();
        let mut aux = vec![0f32; width];
        aux.extend(&qn);
        aux.extend(&kn);
        aux.extend(&f);
        let p = [
            n_heads as u32,
            n_kv as u32,
            hd as u32,
            rope_dim as u32,
            neox as u32,
            theta_scale.to_bits(),
            0,
            qk_norm as u32,
            eps.to_bits(),
            1,
            freq_scale.to_bits(),
            mscale.to_bits(),
            factors as u32,
        ];
        let inputs = [
            Input::F32(qkv.clone()),
            Input::F32(aux),
            Input::U32(positions.to_vec()),
            Input::F32(vec![f32::NAN; m * dq]),
            Input::U32(vec![0; cap * dkv / 2]),
            Input::U32(vec![0; cap * dkv / 2]),
        ];
        let grid = ((m * width / 2).div_ceil(64) as u32, 1, 1);
        let run = |read| {
            block_on(run_kernel(
                &ctx(),
                Op::QkvRopeStore,
                None,
                &inputs,
                &p,
                (m, base),
                grid,
                read,
            ))
            .unwrap()
        };
        let (got_q, got_k) = (f32s(&run(3)), run(4));
        let got_k: Vec<f32> = bytemuck::pod_collect_to_vec::<u8, u16>(&got_k)
            .into_iter()
            .map(|h| half::f16::from_bits(h).to_f32())
            .collect();

        let mut want_q = Vec::new();
        let mut want_k = Vec::new();
        for (t, row) in qkv.chunks(width).enumerate() {
            for (h, head) in row[..dq + dkv].chunks(hd).enumerate() {
                let mut head = match (qk_norm, h < n_heads) {
                    (true, true) => rms_norm_row(head, &qn, eps),
                    (true, false) => rms_norm_row(head, &kn, eps),
                    (false, _) => head.to_vec(),
                };
                let mut theta = positions[t] as f32;
                for (i, &fi) in f.iter().enumerate() {
                    let ff = if factors { fi } else { 1.0 };
                    let a = freq_scale * (theta / ff);
                    theta *= theta_scale;
                    let (c, s) = (a.cos() * mscale, a.sin() * mscale);
                    let (x, y) = match neox {
                        true => (i, i + rope_dim / 2),
                        false => (2 * i, 2 * i + 1),
                    };
                    let (x0, x1) = (head[x], head[y]);
                    head[x] = x0 * c - x1 * s;
                    head[y] = x0 * s + x1 * c;
                }
                match h < n_heads {
                    true => want_q.extend(head),
                    false => want_k.extend(head),
                }
            }
        }
        let what = format!("qk_norm={qk_norm} factors={factors} freq_scale={freq_scale}");
        close(&got_q, &want_q, 2e-4, &format!("q, {what}"));
        close(
            &got_k[base * dkv..(base + m) * dkv],
            &want_k,
            2e-3,
            &format!("k, {what}"),
        );
    }
}

/// Sliding-window attention with a scale of its own: the cache's slots are positions
/// 0..base, the block's entries carry their tokens' positions (on a tree, two entries share
/// one); slots out of a query's window weigh nothing, whole chunks of them included.
#[test]
fn sliding_window_attention_in_both_shapes() {
    let mut rng = TestRng::new(47);
    let (n_heads, n_kv) = (4usize, 2usize);
    let scale = 0.31f32;
    // (head dim, base, window, block positions, visible block entries per token)
    type Case = (usize, usize, usize, Vec<u32>, Vec<Vec<u32>>);
    let cases: [Case; 3] = [
        (
            20,
            11,
            5,
            vec![11, 12, 13],
            vec![vec![0], vec![0, 1], vec![0, 1, 2]],
        ),
        // A tree: entries 1 and 2 both at position 141, children of entry 0; Gemma 3's head
        // dimension.
        (
            256,
            140,
            7,
            vec![140, 141, 141],
            vec![vec![0], vec![0, 1], vec![0, 2]],
        ),
        // No window: every slot.
        (20, 70, 0, vec![70, 71], vec![vec![0], vec![0, 1]]),
    ];
    for (hd, base, window, positions, visible) in cases {
        let kv_dim = n_kv * hd;
        let m = positions.len();
        let cap = (base + m + 3) | 1;
        let q = rng.floats(m * n_heads * hd, 1.0);
        let f16 = |xs: Vec<f32>| -> Vec<f32> {
            xs.into_iter()
                .map(|x| half::f16::from_f32(x).to_f32())
                .collect()
        };
        let kc = f16(rng.floats(cap * kv_dim, 1.0));
        let vc = f16(rng.floats(cap * kv_dim, 1.0));
        let pack = |xs: &[f32]| -> Vec<u32> {
            xs.chunks(2)
                .map(|p| {
                    let h = |x: f32| half::f16::from_f32(x).to_bits() as u32;
                    h(p[0]) | (h(p[1]) << 16)
                })
                .collect()
        };
        // The reference: the slots in the window, a plain softmax over them.
        let mut want = vec![0f32; m * n_heads * hd];
        for t in 0..m {
            let pos = positions[t] as usize;
            let seen = |key: usize| window == 0 || pos < key + window;
            let slots: Vec<usize> = (0..base)
                .filter(|&s| seen(s))
                .chain(
                    visible[t]
                        .iter()
                        .filter(|&&j| seen(positions[j as usize] as usize))
                        .map(|&j| base + j as usize),
                )
                .collect();
            for h in 0..n_heads {
                let kvh = h / (n_heads / n_kv);
                let qh = &q[(t * n_heads + h) * hd..][..hd];
                let mut s: Vec<f32> = slots
                    .iter()
                    .map(|&sl| {
                        let k = &kc[sl * kv_dim + kvh * hd..][..hd];
                        qh.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() * scale
                    })
                    .collect();
                let mx = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                s.iter_mut().for_each(|v| *v = (*v - mx).exp());
                let sum: f32 = s.iter().sum();
                let out = &mut want[(t * n_heads + h) * hd..][..hd];
                for (&sl, &w) in slots.iter().zip(&s) {
                    let v = &vc[sl * kv_dim + kvh * hd..][..hd];
                    for (o, x) in out.iter_mut().zip(v) {
                        *o += w / sum * x;
                    }
                }
            }
        }
        let max_rows = m;
        let mut lists = vec![0u32; max_rows * (1 + max_rows)];
        for (t, set) in visible.iter().enumerate() {
            lists[t * (1 + max_rows)] = set.len() as u32;
            lists[t * (1 + max_rows) + 1..][..set.len()].copy_from_slice(set);
        }
        let (chunk, chunks) = (attention_chunk(cap), attention_chunks(cap));
        let p = [
            n_heads as u32,
            n_kv as u32,
            hd as u32,
            cap as u32,
            max_rows as u32,
            scale.to_bits(),
            chunk as u32,
            chunks as u32,
            window as u32,
        ];
        let slots = base + visible.iter().map(Vec::len).max().unwrap_or(0);
        for shape in [AttentionShape::PerHead, AttentionShape::SplitKv] {
            let mut ctx = ctx();
            ctx.shape.attention = shape;
            let inputs = [
                Input::F32(q.clone()),
                Input::U32(pack(&kc)),
                Input::U32(pack(&vc)),
                Input::F32(vec![0.0; max_rows * n_heads * cap]),
                Input::F32(vec![f32::NAN; max_rows * n_heads * chunks * (4 + hd)]),
                Input::U32(lists.clone()),
                Input::U32(positions.clone()),
            ];
            let partials = block_on(run_kernel_step(
                &ctx,
                Op::Attention,
                None,
                &inputs,
                &p,
                [m as u32, base as u32, 0, slots as u32],
                shape.grid(n_heads, m, slots, chunk),
                4,
            ))
            .unwrap();
            let merge = [
                Input::F32(f32s(&partials)),
                Input::F32(vec![f32::NAN; m * n_heads * hd]),
                Input::U32(lists.clone()),
            ];
            let got = f32s(
                &block_on(run_kernel(
                    &ctx,
                    Op::AttentionCombine,
                    None,
                    &merge,
                    &p,
                    (m, base),
                    ((m * n_heads * hd / 4).div_ceil(64) as u32, 1, 1),
                    1,
                ))
                .unwrap(),
            );
            close(
                &got,
                &want,
                2e-5,
                &format!("{shape:?}, head dim {hd}, base {base}, window {window}"),
            );
        }
    }
}

/// gelu_tanh(gate) * up from [gate | up] rows, against the reference's GELU, large and small
/// gates included.
#[test]
fn gelu_mul_matches_the_reference() {
    let mut rng = TestRng::new(48);
    let (m, n) = (3usize, 131usize);
    let mut gate_up = rng.floats(m * 2 * n, 4.0);
    gate_up[..4].copy_from_slice(&[30.0, -30.0, 0.0, 1e-4]);
    let got = f32s(
        &block_on(run_kernel(
            &ctx(),
            Op::GeluMul,
            None,
            &[
                Input::F32(gate_up.clone()),
                Input::F32(vec![f32::NAN; m * n]),
            ],
            &[n as u32],
            (m, 0),
            ((m * n).div_ceil(64) as u32, 1, 1),
            1,
        ))
        .unwrap(),
    );
    let want: Vec<f32> = gate_up
        .chunks(2 * n)
        .flat_map(|r| {
            (0..n)
                .map(|i| gelu_tanh(r[i]) * r[n + i])
                .collect::<Vec<_>>()
        })
        .collect();
    close(&got, &want, 1e-5, "gelu_mul");
}

/// cap * tanh(x / cap) on every logit of every row, in place.
#[test]
fn softcap_matches_tanh() {
    let mut rng = TestRng::new(49);
    let (m, n, cap) = (3usize, 301usize, 30f32);
    let mut x = rng.floats(m * n, 80.0);
    x[..3].copy_from_slice(&[1e4, -1e4, 0.0]);
    let got = f32s(
        &block_on(run_kernel(
            &ctx(),
            Op::Softcap,
            None,
            &[Input::F32(x.clone())],
            &[n as u32, cap.to_bits()],
            (m, 0),
            (m as u32, 1, 1),
            0,
        ))
        .unwrap(),
    );
    let want: Vec<f32> = x.iter().map(|v| cap * (v / cap).tanh()).collect();
    close(&got, &want, 1e-6, "softcap");
}

/// A post-norm added to the residual: y += rms_norm(x) * w.
#[test]
fn rms_norm_accumulates_into_the_residual() {
    let mut rng = TestRng::new(50);
    let (m, n, eps) = (4usize, 97usize, 1e-6f32);
    let (x, w, y) = (
        rng.floats(m * n, 3.0),
        rng.floats(n, 1.0),
        rng.floats(m * n, 5.0),
    );
    let got = f32s(
        &block_on(run_kernel(
            &ctx(),
            Op::RmsNorm,
            None,
            &[
                Input::F32(x.clone()),
                Input::F32(w.clone()),
                Input::F32(y.clone()),
            ],
            &[n as u32, eps.to_bits(), 1],
            (m, 0),
            (m as u32, 1, 1),
            2,
        ))
        .unwrap(),
    );
    let want: Vec<f32> = x
        .chunks(n)
        .zip(y.chunks(n))
        .flat_map(|(xr, yr)| {
            let normed = rms_norm_row(xr, &w, eps);
            yr.iter()
                .zip(normed)
                .map(|(a, b)| a + b)
                .collect::<Vec<_>>()
        })
        .collect();
    close(&got, &want, 1e-5, "rms_norm accumulate");
}

/// The embedding rows times a scale (Gemma's sqrt(n_embd)): the decoded value times the scale.
#[test]
fn embedding_scale() {
    let mut rng = TestRng::new(51);
    let ty = GgmlType::Q8_0;
    let (k, vocab, scale) = (96usize, 29usize, 25.3f32);
    let w = random_blocks(ty, vocab * k, 1.0, &mut rng);
    let mut wf = vec![0f32; vocab * k];
    dequantize(ty, &w, &mut wf).unwrap();
    let tokens = vec![3u32, 28, 0];
    let m = tokens.len();
    let row_bytes = ty.bytes_for(k as u64).unwrap() as u32;
    let got = f32s(
        &block_on(run_kernel(
            &ctx(),
            Op::Embed,
            Some(ty),
            &[
                Input::Bytes(w),
                Input::U32(tokens.clone()),
                Input::F32(vec![f32::NAN; m * k]),
            ],
            &[k as u32, 0, vocab as u32, row_bytes, 1, scale.to_bits()],
            (m, 0),
            ((m * k / 32).div_ceil(64) as u32, 1, 1),
            2,
        ))
        .unwrap(),
    );
    let want: Vec<f32> = tokens
        .iter()
        .flat_map(|&t| wf[t as usize * k..(t as usize + 1) * k].to_vec())
        .map(|v| v * scale)
        .collect();
    assert_eq!(got, want, "embedding scale must be exact");
}
