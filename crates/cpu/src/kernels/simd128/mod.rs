//! wasm32 SIMD (`simd128`) kernels, compiled where the build enables the feature
//! (`scripts/wasm.sh` does for every wasm32 build). Like the AVX2 kernels they follow
//! [`super::scalar`]'s order exactly: integer sums are exact, float steps are separate
//! multiplies and adds (wasm SIMD has no fused multiply-add), and horizontal sums are the
//! scalar [`super::scalar::hsum8`] of the stored lanes. The browser tests
//! (`crates/cpu/tests/browser.rs`) compare every format bit for bit with the scalar path.
//!
//! WebAssembly has no runtime feature detection: a module is validated whole, so a build with
//! `simd128` runs only where the engine supports it (every current browser).

mod attention;
mod exp;
mod float;
mod kquants;
mod q32;

use core::arch::wasm32::*;

pub use attention::{scores, weighted_sum, widen};
pub use exp::{exp_minus, silu_mul};
pub use float::float_rows;
pub use kquants::k_rows;
pub use q32::q32_rows;

/// 16 bytes from `b[..16]`.
#[inline]
fn load16(b: &[u8]) -> v128 {
    assert!(b.len() >= 16);
    // SAFETY: 16 readable bytes (checked); wasm loads need no alignment.
    unsafe { v128_load(b.as_ptr() as *const v128) }
}

/// 16 signed bytes from `b[..16]`.
#[inline]
fn load16_i8(b: &[i8]) -> v128 {
    assert!(b.len() >= 16);
    // SAFETY: as above.
    unsafe { v128_load(b.as_ptr() as *const v128) }
}

/// Four f32 from `v[..4]`.
#[inline]
fn load4(v: &[f32]) -> v128 {
    assert!(v.len() >= 4);
    // SAFETY: 16 readable bytes (checked).
    unsafe { v128_load(v.as_ptr() as *const v128) }
}

/// Four i32 from `v[..4]`.
#[inline]
fn load4_i32(v: &[i32]) -> v128 {
    assert!(v.len() >= 4);
    // SAFETY: 16 readable bytes (checked).
    unsafe { v128_load(v.as_ptr() as *const v128) }
}

/// Four f32 into `out[..4]`.
#[inline]
fn store4(out: &mut [f32], v: v128) {
    assert!(out.len() >= 4);
    // SAFETY: 16 writable bytes (checked).
    unsafe { v128_store(out.as_mut_ptr() as *mut v128, v) }
}

/// The eight f32 lanes of `(lo, hi)`, in order.
#[inline]
fn lanes8(lo: v128, hi: v128) -> [f32; 8] {
    let mut out = [0f32; 8];
    store4(&mut out[..4], lo);
    store4(&mut out[4..], hi);
    out
}

/// The four f16 in the low 16 bits of each u32 lane of `h` as f32, exactly as
/// `half::f16::to_f32` converts them (subnormals exact, NaNs quieted, infinities kept).
#[inline]
fn f16x4_to_f32(h: v128) -> v128 {
    let h = v128_and(h, u32x4_splat(0xffff));
    let sign = i32x4_shl(v128_and(h, u32x4_splat(0x8000)), 16);
    let magnitude = i32x4_shl(v128_and(h, u32x4_splat(0x7fff)), 13);
    // Normal and subnormal halves: the bits shifted into an f32 whose exponent is 112 too
    // small, scaled by 2^112 (exact: wasm never flushes subnormals).
    let finite = f32x4_mul(magnitude, f32x4_splat(f32::from_bits(0x7780_0000)));
    let is_special = i32x4_eq(v128_and(h, u32x4_splat(0x7c00)), u32x4_splat(0x7c00));
    if !v128_any_true(is_special) {
        // (A model's scales and a cache's values: the special lanes' six steps skipped, where
        // they were a fifth of a 4-bit group's decoding for one row.)
        return v128_or(sign, finite);
    }
    // Exponent 31: infinity, or NaN with the quiet bit set.
    let mantissa = v128_and(magnitude, u32x4_splat(0x007f_e000));
    let nan_bit = v128_andnot(u32x4_splat(0x0040_0000), i32x4_eq(mantissa, u32x4_splat(0)));
    let special = v128_or(v128_or(u32x4_splat(0x7f80_0000), mantissa), nan_bit);
    v128_or(sign, v128_bitselect(special, finite, is_special))
}

/// Eight f16 from `v[at..at + 8]` as two f32x4 (elements 0..4, 4..8).
#[inline]
fn load8_f16(v: &[half::f16], at: usize) -> (v128, v128) {
    let eight = &v[at..at + 8];
    // SAFETY: eight readable f16 (16 bytes).
    let bits = unsafe { v128_load(eight.as_ptr() as *const v128) };
    (
        f16x4_to_f32(u32x4_extend_low_u16x8(bits)),
        f16x4_to_f32(u32x4_extend_high_u16x8(bits)),
    )
}

/// `[sum a, sum b, sum c, sum d]` of four i32x4 (exact integers: any order).
#[inline]
fn reduce4(a: v128, b: v128, c: v128, d: v128) -> v128 {
    let ab = i32x4_add(
        i32x4_shuffle::<0, 4, 1, 5>(a, b),
        i32x4_shuffle::<2, 6, 3, 7>(a, b),
    );
    let cd = i32x4_add(
        i32x4_shuffle::<0, 4, 1, 5>(c, d),
        i32x4_shuffle::<2, 6, 3, 7>(c, d),
    );
    i32x4_add(
        i32x4_shuffle::<0, 1, 4, 5>(ab, cd),
        i32x4_shuffle::<2, 3, 6, 7>(ab, cd),
    )
}
