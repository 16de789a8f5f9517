//! aarch64 NEON kernels (NEON is part of every aarch64 CPU: no detection needed). Like the
//! AVX2 and simd128 kernels they follow [`super::scalar`]'s order exactly: integer sums are
//! exact, float steps are separate multiplies and adds (never fused), and horizontal sums are
//! the scalar [`super::scalar::hsum8`] of the stored lanes. The kernel tests compare every
//! format bit for bit with the scalar path; `scripts/aarch64.sh test` runs them under
//! qemu-user on an x86-64 machine.
//!
//! The layout is the simd128 kernels' (four-lane registers, two per eight scalar lanes), with
//! NEON's widening multiplies and pairwise adds for the integer sums. f16 is converted with
//! integer operations and one exact multiply, not `fcvtl`, so the conversion is written once
//! for both 128-bit targets and its bits checked against `half` for every pattern.

mod attention;
mod float;
mod kquants;
mod q32;

use core::arch::aarch64::*;

pub use attention::{scores, weighted_sum};
pub use float::float_rows;
pub use kquants::k_rows;
pub use q32::q32_rows;

/// 16 bytes from `b[..16]`.
#[inline]
#[target_feature(enable = "neon")]
fn load16(b: &[u8]) -> uint8x16_t {
    assert!(b.len() >= 16);
    // SAFETY: 16 readable bytes (checked); NEON loads need no alignment.
    unsafe { vld1q_u8(b.as_ptr()) }
}

/// 16 signed bytes from `b[..16]`.
#[inline]
#[target_feature(enable = "neon")]
fn load16_i8(b: &[i8]) -> int8x16_t {
    assert!(b.len() >= 16);
    // SAFETY: as above.
    unsafe { vld1q_s8(b.as_ptr()) }
}

/// Four f32 from `v[..4]`.
#[inline]
#[target_feature(enable = "neon")]
fn load4(v: &[f32]) -> float32x4_t {
    assert!(v.len() >= 4);
    // SAFETY: 16 readable bytes (checked).
    unsafe { vld1q_f32(v.as_ptr()) }
}

/// Four f32 into `out[..4]`.
#[inline]
#[target_feature(enable = "neon")]
fn store4(out: &mut [f32], v: float32x4_t) {
    assert!(out.len() >= 4);
    // SAFETY: 16 writable bytes (checked).
    unsafe { vst1q_f32(out.as_mut_ptr(), v) }
}

/// The eight f32 lanes of `(lo, hi)`, in order.
#[inline]
#[target_feature(enable = "neon")]
fn lanes8(lo: float32x4_t, hi: float32x4_t) -> [f32; 8] {
    let mut out = [0f32; 8];
    store4(&mut out[..4], lo);
    store4(&mut out[4..], hi);
    out
}

/// The four f16 in the low 16 bits of each u32 lane of `h` as f32, exactly as
/// `half::f16::to_f32` converts them (subnormals exact, NaNs quieted, infinities kept).
#[inline]
#[target_feature(enable = "neon")]
fn f16x4_to_f32(h: uint32x4_t) -> float32x4_t {
    let splat = vdupq_n_u32;
    let h = vandq_u32(h, splat(0xffff));
    let sign = vshlq_n_u32::<16>(vandq_u32(h, splat(0x8000)));
    let magnitude = vshlq_n_u32::<13>(vandq_u32(h, splat(0x7fff)));
    // Normal and subnormal halves: the bits shifted into an f32 whose exponent is 112 too
    // small, scaled by 2^112 (exact: Linux leaves subnormals on, FPCR.FZ clear).
    let finite = vmulq_f32(
        vreinterpretq_f32_u32(magnitude),
        vdupq_n_f32(f32::from_bits(0x7780_0000)),
    );
    // Exponent 31: infinity, or NaN with the quiet bit set.
    let mantissa = vandq_u32(magnitude, splat(0x007f_e000));
    let nan_bit = vbicq_u32(splat(0x0040_0000), vceqq_u32(mantissa, splat(0)));
    let special = vorrq_u32(vorrq_u32(splat(0x7f80_0000), mantissa), nan_bit);
    let is_special = vceqq_u32(vandq_u32(h, splat(0x7c00)), splat(0x7c00));
    let value = vbslq_u32(is_special, special, vreinterpretq_u32_f32(finite));
    vreinterpretq_f32_u32(vorrq_u32(sign, value))
}

/// Eight f16 from `v[at..at + 8]` as two f32x4 (elements 0..4, 4..8).
#[inline]
#[target_feature(enable = "neon")]
fn load8_f16(v: &[half::f16], at: usize) -> (float32x4_t, float32x4_t) {
    let eight = &v[at..at + 8];
    // SAFETY: eight readable f16 (16 bytes).
    let bits = unsafe { vld1q_u16(eight.as_ptr() as *const u16) };
    (
        f16x4_to_f32(vmovl_u16(vget_low_u16(bits))),
        f16x4_to_f32(vmovl_high_u16(bits)),
    )
}
