//! The CPU engine in headless Chromium (wasm32 with `simd128`): the simd128 kernels against the
//! scalar ones bit for bit on every format at odd and real sizes, every f16 the attention
//! kernels convert, and whole generated models against the f32 reference, with the scalar
//! path forced beside the SIMD one. Run with `scripts/wasm.sh test`.

#![cfg(target_arch = "wasm32")]

mod common;

use std::sync::Arc;

use common::kernel_cases::{equals_scalar, extremes};
use half::f16;
use runahead_cpu::kernels::F16Rows;
use runahead_cpu::{CpuEngine, CpuOptions, Isa, Kernels};
use runahead_gguf::GgufFile;
use runahead_model::testing::{TestRng, TinyModel};
use runahead_model::{Batch, CpuModel, LanguageModel};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

fn simd() -> Kernels {
    Kernels::new(Isa::Simd128).expect("scripts/wasm.sh builds wasm32 with simd128")
}

#[wasm_bindgen_test]
fn the_browser_build_uses_simd128() {
    assert_eq!(Kernels::best().isa(), Isa::Simd128);
}

/// scripts/wasm.sh enables relaxed SIMD for this crate alone (a cargo profile override) and
/// says so in `RUNAHEAD_WASM_RELAXED`: the relaxed run must test the relaxed kernels.
#[wasm_bindgen_test]
fn the_relaxed_build_has_relaxed_simd() {
    let asked = option_env!("RUNAHEAD_WASM_RELAXED") == Some("1");
    assert_eq!(runahead_cpu::RELAXED_SIMD, asked);
    assert_eq!(Isa::Simd128.name() == "simd128+relaxed", asked);
}

#[wasm_bindgen_test]
fn simd128_kernels_equal_the_scalar_kernels_bit_for_bit() {
    equals_scalar(simd());
}

#[wasm_bindgen_test]
fn simd128_kernels_handle_extreme_values() {
    extremes(simd());
}

/// `n` random f16 values (magnitudes up to 2).
fn random_f16(rng: &mut TestRng, n: usize) -> Vec<f16> {
    rng.floats(n, 2.0).into_iter().map(f16::from_f32).collect()
}

/// Every f16 bit pattern through the attention kernels: the SIMD conversion must give what
/// `half` gives (NaNs compared as NaNs: WebAssembly leaves their payload to the engine).
#[wasm_bindgen_test]
fn attention_kernels_convert_every_f16_like_the_scalar_path() {
    let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    let rows = F16Rows {
        data: &all,
        stride: 0,
        offset: 0,
        len: all.len(),
    };
    let sum = |k: Kernels| {
        let mut out = vec![0f32; all.len()];
        k.weighted_sum(rows, &[0], &[1.0], &mut out);
        out
    };
    let (got, want) = (sum(simd()), sum(Kernels::scalar()));
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!(
            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            "f16 {i:#06x}: {a} vs {b}"
        );
    }
}

/// Scores and weighted sums of random heads (odd lengths: a tail after the last 8; slot counts
/// around the eight the scores take at once) give the scalar bits.
#[wasm_bindgen_test]
fn attention_kernels_equal_the_scalar_kernels() {
    let mut rng = TestRng::new(17);
    for (len, slots) in [1, 7, 8, 13, 32, 40, 64, 67]
        .into_iter()
        .flat_map(|len| [1, 8, 9, 17].map(|slots| (len, slots)))
    {
        let data = random_f16(&mut rng, slots * len);
        let rows = F16Rows::dense(&data, len);
        let q = rng.floats(len, 1.0);
        let p = rng.floats(slots, 1.0);
        let picked: Vec<usize> = (0..slots).rev().collect();
        let run = |k: Kernels| {
            let mut scores = Vec::new();
            k.scores(&q, rows, &picked, 0.125, &mut scores);
            let mut out = vec![0.5f32; len];
            k.weighted_sum(rows, &picked, &p, &mut out);
            (scores, out)
        };
        let (got, want) = (run(simd()), run(Kernels::scalar()));
        common::assert_bits_eq(
            &got.0,
            &want.0,
            &format!("scores, length {len}, {slots} slots"),
        );
        common::assert_bits_eq(
            &got.1,
            &want.1,
            &format!("weighted sum, length {len}, {slots} slots"),
        );
    }
}

/// The rows widened to f32 once (what attention does on simd128 for every pair of a KV head):
/// the widening is `half`'s, and scores and weighted sums over the widened rows, through slot
/// indices or row after row, give the scalar bits over the f16 rows.
#[wasm_bindgen_test]
fn widened_attention_equals_the_scalar_kernels() {
    use runahead_cpu::kernels::F32Rows;

    let mut rng = TestRng::new(19);
    for (len, slots) in [1, 7, 8, 13, 64, 67]
        .into_iter()
        .flat_map(|len| [1, 8, 9, 17, 64].map(|slots| (len, slots)))
    {
        let data = random_f16(&mut rng, slots * len);
        let rows = F16Rows::dense(&data, len);
        let q = rng.floats(len, 1.0);
        let p = rng.floats(slots, 1.0);
        let picked: Vec<usize> = (0..slots).rev().collect();
        let first: Vec<usize> = (0..slots).collect();
        let (k, scalar) = (simd(), Kernels::scalar());
        let mut wide = Vec::new();
        k.widen(rows, slots, &mut wide);
        let exact: Vec<f32> = data.iter().map(|v| v.to_f32()).collect();
        common::assert_bits_eq(&wide, &exact, &format!("widen, length {len}"));
        let widened = F32Rows::dense(&wide, len);
        for order in [&picked, &first] {
            let (mut got, mut want) = (Vec::new(), Vec::new());
            k.scores_f32(&q, widened, order, 0.125, &mut got);
            scalar.scores(&q, rows, order, 0.125, &mut want);
            let what = format!("length {len}, {slots} slots");
            common::assert_bits_eq(&got, &want, &format!("scores, {what}"));
            let (mut got, mut want) = (vec![0.5f32; len], vec![0.5f32; len]);
            k.weighted_sum_f32(widened, order, &p, &mut got);
            scalar.weighted_sum(rows, order, &p, &mut want);
            common::assert_bits_eq(&got, &want, &format!("weighted sum, {what}"));
        }
        let (mut got, mut want) = (Vec::new(), Vec::new());
        k.scores_f32_dense(&q, &wide, slots, 0.125, &mut got);
        scalar.scores(&q, rows, &first, 0.125, &mut want);
        common::assert_bits_eq(&got, &want, &format!("dense scores, length {len}"));
        let (mut got, mut want) = (vec![0.5f32; len], vec![0.5f32; len]);
        k.weighted_sum_f32_dense(&wide, &p, &mut got);
        scalar.weighted_sum(rows, &first, &p, &mut want);
        common::assert_bits_eq(&got, &want, &format!("dense weighted sum, length {len}"));
    }
}

/// A generated model of each architecture (every block format appears in its tensors) on one
/// thread: the simd128 and scalar engines give the same bits, within tolerance of the f32
/// reference, and a block forward equals token-by-token forwards.
#[wasm_bindgen_test]
async fn generated_models_match_the_reference_on_both_paths() {
    const PROMPT: [u32; 9] = [5, 77, 120, 3, 260, 42, 199, 7, 8];
    for spec in [
        TinyModel::llama(),
        TinyModel::qwen2(),
        TinyModel::llama3(),
        TinyModel::qwen3(),
        TinyModel::phi3(),
        TinyModel::gemma3(),
    ] {
        let file = Arc::new(GgufFile::from_bytes(spec.to_gguf()).unwrap());
        let mut reference = CpuModel::load(&file, None).unwrap();
        let want = reference.forward(&Batch::causal(&PROMPT, 0)).await.unwrap();
        let rms = (want.data.iter().map(|v| v * v).sum::<f32>() / want.data.len() as f32).sqrt();
        let mut outputs = Vec::new();
        for isa in [Isa::Simd128, Isa::Scalar] {
            let options = CpuOptions {
                context: None,
                threads: None,
                isa: Some(isa),
            };
            let mut engine = CpuEngine::load(file.clone(), &options).unwrap();
            assert_eq!(engine.threads(), 1, "one thread in the browser");
            let got = engine.forward(&Batch::causal(&PROMPT, 0)).await.unwrap();
            for (i, (a, b)) in got.data.iter().zip(&want.data).enumerate() {
                assert!((a - b).abs() <= 0.1 * rms, "{isa:?}: logit {i}: {a} vs {b}");
            }
            let mut single = CpuEngine::load(file.clone(), &options).unwrap();
            for (row, &t) in PROMPT.iter().enumerate() {
                let one = single.forward(&Batch::causal(&[t], row)).await.unwrap();
                common::assert_bits_eq(one.row(0), got.row(row), &format!("{isa:?} row {row}"));
            }
            outputs.push(got);
        }
        common::assert_bits_eq(&outputs[0].data, &outputs[1].data, "simd128 vs scalar");
    }
}

/// Every 997th f32 bit pattern (every exponent of both signs) and the edges of `expf`'s ranges
/// through the simd128 exponentials (softmax's `exp(x - max)`, SiLU's `exp(-x)`) against the
/// scalar path's `f32::exp`, bit for bit (NaNs as NaNs).
#[wasm_bindgen_test]
fn simd128_exponentials_equal_the_scalar_path() {
    let edges = [
        0x0000_0000u32,
        0x3900_0000,
        0x3eb1_7218,
        0x3f85_1592,
        0x42ae_ac50,
        0x42b1_7218,
        0x42cf_f1b5,
        0x7f80_0000,
        0x7fc0_0000,
    ];
    let mut bits: Vec<u32> = (0..=u32::MAX).step_by(997).collect();
    for e in edges {
        for b in [e.wrapping_sub(1), e, e + 1] {
            bits.extend([b, b | 0x8000_0000]);
        }
    }
    let xs: Vec<f32> = bits.into_iter().map(f32::from_bits).collect();
    let ones = vec![1f32; xs.len()];
    let run = |k: Kernels, max: f32| {
        let (mut e, mut s) = (xs.clone(), xs.clone());
        k.exp_minus(&mut e, max);
        k.silu_mul(&mut s, &ones);
        (e, s)
    };
    for max in [0.0, 1.5, -3.25] {
        let ((e, s), (e_want, s_want)) = (run(simd(), max), run(Kernels::scalar(), max));
        for (i, x) in xs.iter().enumerate() {
            for (what, got, want) in [("exp", e[i], e_want[i]), ("silu", s[i], s_want[i])] {
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "{what} of {:#x} (max {max}): {got} vs {want}",
                    x.to_bits()
                );
            }
        }
    }
}
