//! `exp` four f32 at a time with the bits of the scalar path's `f32::exp` in WebAssembly:
//! compiler-builtins' `expf` (FreeBSD's: `x = k ln 2 + r` with `ln 2` in two parts, a rational
//! approximation of `exp(r)`, then times `2^k`), the same f32 steps in the same order, its
//! three ranges below |x| = 87.34 chosen per lane. A group with a lane beyond (where `expf`
//! overflows, underflows in steps, or meets a NaN) takes the scalar call, as does the tail.
//! The softmax's and SiLU's exponentials were one library call per value: a tenth of the
//! engine's time in the page behind ~800 tokens.

use core::arch::wasm32::*;

use super::{load4, store4};

// compiler-builtins' constants (6.9314575195e-1, 1.4286067653e-6, 1.4426950216, 1.6666625440e-1,
// -2.7667332906e-3), by their bits.
const LN2_HI: f32 = f32::from_bits(0x3f31_7200);
const LN2_LO: f32 = f32::from_bits(0x35bf_be8e);
const INV_LN2: f32 = f32::from_bits(0x3fb8_aa3b);
const P1: f32 = f32::from_bits(0x3e2a_aa8f);
const P2: f32 = f32::from_bits(0xbb35_5215);

/// `exp` of each lane, or `None` when a lane's |x| >= 87.33655 (or is NaN): `expf`'s special
/// cases, left to the scalar call.
#[inline]
fn exp4(x: v128) -> Option<v128> {
    let hx = v128_and(x, u32x4_splat(0x7fff_ffff));
    if !u32x4_all_true(u32x4_lt(hx, u32x4_splat(0x42ae_ac50))) {
        return None;
    }
    // All ones where x < 0.
    let negative = i32x4_shr(x, 31);
    // k: beyond 1.5 ln 2, x / ln 2 +- 1/2 truncated; from 0.5 ln 2, +-1; below, 0 (then
    // hi = x - 0 = x and lo = 0, as `expf` sets them).
    let half = v128_bitselect(f32x4_splat(-0.5), f32x4_splat(0.5), negative);
    let k_far = i32x4_trunc_sat_f32x4(f32x4_add(f32x4_mul(f32x4_splat(INV_LN2), x), half));
    let k_near = i32x4_add(i32x4_splat(1), i32x4_shl(negative, 1));
    let far = u32x4_gt(hx, u32x4_splat(0x3f85_1592));
    let reduced = u32x4_gt(hx, u32x4_splat(0x3eb1_7218));
    let k = v128_and(v128_bitselect(k_far, k_near, far), reduced);
    let kf = f32x4_convert_i32x4(k);
    let hi = f32x4_sub(x, f32x4_mul(kf, f32x4_splat(LN2_HI)));
    let lo = f32x4_mul(kf, f32x4_splat(LN2_LO));
    let r = f32x4_sub(hi, lo);
    let rr = f32x4_mul(r, r);
    let p = f32x4_add(f32x4_splat(P1), f32x4_mul(rr, f32x4_splat(P2)));
    let c = f32x4_sub(r, f32x4_mul(rr, p));
    let q = f32x4_div(f32x4_mul(r, c), f32x4_sub(f32x4_splat(2.0), c));
    let y = f32x4_add(f32x4_splat(1.0), f32x4_add(f32x4_sub(q, lo), hi));
    // 2^k (|k| <= 126: a normal f32, so `scalbnf` is this one multiply).
    let scaled = f32x4_mul(y, i32x4_shl(i32x4_add(k, i32x4_splat(127)), 23));
    // |x| <= 2^-14: 1 + x.
    let tiny = u32x4_le(hx, u32x4_splat(0x3900_0000));
    Some(v128_bitselect(f32x4_add(f32x4_splat(1.0), x), scaled, tiny))
}

/// See [`crate::kernels::Kernels::exp_minus`].
pub fn exp_minus(x: &mut [f32], max: f32) {
    let m = f32x4_splat(max);
    let mut quads = x.chunks_exact_mut(4);
    for q in &mut quads {
        match exp4(f32x4_sub(load4(q), m)) {
            Some(e) => store4(q, e),
            None => q.iter_mut().for_each(|v| *v = (*v - max).exp()),
        }
    }
    for v in quads.into_remainder() {
        *v = (*v - max).exp();
    }
}

/// See [`crate::kernels::Kernels::silu_mul`]: `g / (1 + exp(-g)) * u`.
pub fn silu_mul(g: &mut [f32], u: &[f32]) {
    let one = f32x4_splat(1.0);
    let mut quads = g.chunks_exact_mut(4).zip(u.chunks_exact(4));
    for (gq, uq) in &mut quads {
        let x = load4(gq);
        match exp4(f32x4_neg(x)) {
            Some(e) => store4(gq, f32x4_mul(f32x4_div(x, f32x4_add(one, e)), load4(uq))),
            None => {
                for (g, &u) in gq.iter_mut().zip(uq) {
                    *g = crate::ops::silu(*g) * u;
                }
            }
        }
    }
    let done = g.len() / 4 * 4;
    for (g, &u) in g[done..].iter_mut().zip(&u[done..]) {
        *g = crate::ops::silu(*g) * u;
    }
}
