//! `exp` of f32 eight lanes at a time with the bits of glibc's `expf` (its x86-64 FMA variant,
//! which `f32::exp` calls on x86-64 Linux, the reference's platform): the same table of 2^(i/32),
//! the same cubic and the same fused steps, in f64. SiLU and softmax keep the scalar path's
//! values while the library call per element (3-4% of an 8-row forward) goes.

use std::arch::x86_64::*;

/// 32 / ln 2.
const INV_LN2_N: u64 = 0x40471547652b82fe;
/// 1.5 * 2^52: added, it rounds to an integer in the low bits.
const SHIFT: u64 = 0x4338000000000000;
/// The cubic of 2^(r/32) - 1 for |r| <= 1/2: r^3, r^2 and r coefficients.
const C: [u64; 3] = [0x3ebc6af84b912394, 0x3f2ebfce50fac4f3, 0x3f962e42ff0c52d6];
/// Bits of 2^(i/32) (correctly rounded), minus `i << 47`: adding `k << 47` for `k = i mod 32`
/// gives 2^(k/32).
const TABLE: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];

/// Below this glibc's `expf` returns +0 (-inf included): 0x1.9fe368p6, log(2^-150).
const ZERO_BELOW: f32 = f32::from_bits(0xc2cff1b4);
/// From this up, and for |x| >= 88, glibc's common path serves: between the two, a result that
/// may underflow (its own branch), which the scalar call gives.
const COMMON_FROM: f32 = f32::from_bits(0xc2ce8ecf);
/// Up to here (excluded) glibc's common path serves positive `x`.
const COMMON_TO: f32 = 88.0;

/// The f64 of `bits` in four lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn f64_of(bits: u64) -> __m256d {
    _mm256_set1_pd(f64::from_bits(bits))
}

/// `exp` of four lanes on the common path (|x| < 88).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp4(x: __m128) -> __m128 {
    let xd = _mm256_cvtps_pd(x);
    let (inv, shift) = (f64_of(INV_LN2_N), f64_of(SHIFT));
    // x * 32 / ln 2 = k + r, k the nearest integer (in kd's low bits), |r| <= 1/2.
    let kd = _mm256_fmadd_pd(inv, xd, shift);
    let ki = _mm256_castpd_si256(kd);
    let kd = _mm256_sub_pd(kd, shift);
    let r = _mm256_fmsub_pd(inv, xd, kd);
    let i = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
    // SAFETY: `i` is in 0..32, an index of TABLE.
    let t = unsafe { _mm256_i64gather_epi64::<8>(TABLE.as_ptr() as *const i64, i) };
    // 2^(k/32): the table's 2^(i/32) with k >> 5 added to its exponent.
    let s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64::<47>(ki)));
    let z = _mm256_fmadd_pd(f64_of(C[0]), r, f64_of(C[1]));
    let r2 = _mm256_mul_pd(r, r);
    let y = _mm256_fmadd_pd(f64_of(C[2]), r, _mm256_set1_pd(1.0));
    let y = _mm256_fmadd_pd(z, r2, y);
    _mm256_cvtpd_ps(_mm256_mul_pd(y, s))
}

/// `exp` of eight lanes on the common path, four at a time.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp4_twice(x: __m256) -> __m256 {
    let lo = exp4(_mm256_castps256_ps128(x));
    let hi = exp4(_mm256_extractf128_ps::<1>(x));
    _mm256_set_m128(hi, lo)
}

/// `exp` of eight lanes on the common path, in eight f64 lanes of a 512-bit register: the
/// table read with two permutes and a blend where [`exp4`] gathers (a gather is many
/// micro-operations; the same table entries, so the same bits).
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
fn exp8_wide(x: __m256) -> __m256 {
    let xd = _mm512_cvtps_pd(x);
    let f64x8 = |bits: u64| _mm512_set1_pd(f64::from_bits(bits));
    let (inv, shift) = (f64x8(INV_LN2_N), f64x8(SHIFT));
    let kd = _mm512_fmadd_pd(inv, xd, shift);
    let ki = _mm512_castpd_si512(kd);
    let kd = _mm512_sub_pd(kd, shift);
    let r = _mm512_fmsub_pd(inv, xd, kd);
    // TABLE[ki mod 32]: entries 0..16 and 16..32 each by a two-register permute (the index's
    // low four bits), the one bit 4 asks for kept.
    // SAFETY: TABLE holds 32 u64: four registers of eight; unaligned loads.
    let t = |at: usize| unsafe { _mm512_loadu_si512(TABLE[at..at + 8].as_ptr() as *const _) };
    let low = _mm512_permutex2var_epi64(t(0), ki, t(8));
    let high = _mm512_permutex2var_epi64(t(16), ki, t(24));
    let upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
    let entry = _mm512_mask_blend_epi64(upper, low, high);
    let s = _mm512_castsi512_pd(_mm512_add_epi64(entry, _mm512_slli_epi64::<47>(ki)));
    let z = _mm512_fmadd_pd(f64x8(C[0]), r, f64x8(C[1]));
    let r2 = _mm512_mul_pd(r, r);
    let y = _mm512_fmadd_pd(f64x8(C[2]), r, _mm512_set1_pd(1.0));
    let y = _mm512_fmadd_pd(z, r2, y);
    _mm512_cvtpd_ps(_mm512_mul_pd(y, s))
}

/// Defines, on the target features `$features`, `$exp8` (`exp` of eight lanes, each
/// `f32::exp`'s bits: glibc's common path in the vector by `$common`, +0 far below it
/// (attention's scores far under their maximum), and the scalar call when a lane needs another
/// branch: large `x`, NaN, the underflow band), and SiLU and softmax's exponentials over it
/// (`$silu_mul`, `$exp_minus`). One text for AVX2 and AVX-512, so the two cannot drift apart.
macro_rules! exponentials {
    ($features:literal, $common:ident, $exp8:ident, $silu_mul:ident, $exp_minus:ident) => {
        #[inline]
        #[target_feature(enable = $features)]
        pub fn $exp8(x: __m256) -> __m256 {
            let common = _mm256_and_ps(
                _mm256_cmp_ps::<_CMP_GE_OQ>(x, _mm256_set1_ps(COMMON_FROM)),
                _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(COMMON_TO)),
            );
            let zero = _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(ZERO_BELOW));
            if _mm256_movemask_ps(_mm256_or_ps(common, zero)) != 0xff {
                let mut lanes = [0f32; 8];
                // SAFETY: `lanes` holds eight f32.
                unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), x) };
                for v in &mut lanes {
                    *v = v.exp();
                }
                // SAFETY: as above.
                return unsafe { _mm256_loadu_ps(lanes.as_ptr()) };
            }
            // (Lanes bound for zero compute garbage on the common path, then take +0.)
            _mm256_andnot_ps(zero, $common(x))
        }

        /// `g[i] = silu(g[i]) * u[i]`, silu(x) = x / (1 + exp(-x)): [`crate::ops::silu`]'s
        /// bits.
        ///
        /// # Safety
        /// The CPU must support the features named.
        #[target_feature(enable = $features)]
        pub unsafe fn $silu_mul(g: &mut [f32], u: &[f32]) {
            let n = g.len().min(u.len());
            let whole = n / 8 * 8;
            let (one, sign) = (_mm256_set1_ps(1.0), _mm256_set1_ps(-0.0));
            for (g8, u8) in g[..whole].chunks_exact_mut(8).zip(u.chunks_exact(8)) {
                // SAFETY: eight f32 each; unaligned loads and store.
                unsafe {
                    let x = _mm256_loadu_ps(g8.as_ptr());
                    let e = $exp8(_mm256_xor_ps(x, sign));
                    let silu = _mm256_div_ps(x, _mm256_add_ps(one, e));
                    _mm256_storeu_ps(
                        g8.as_mut_ptr(),
                        _mm256_mul_ps(silu, _mm256_loadu_ps(u8.as_ptr())),
                    );
                }
            }
            for (g, &u) in g[whole..n].iter_mut().zip(&u[whole..n]) {
                *g = crate::ops::silu(*g) * u;
            }
        }

        /// `x[i] = exp(x[i] - max)`, the softmax's exponentials.
        ///
        /// # Safety
        /// The CPU must support the features named.
        #[target_feature(enable = $features)]
        pub unsafe fn $exp_minus(x: &mut [f32], max: f32) {
            let whole = x.len() / 8 * 8;
            let m = _mm256_set1_ps(max);
            for x8 in x[..whole].chunks_exact_mut(8) {
                // SAFETY: eight f32; unaligned load and store.
                unsafe {
                    let d = _mm256_sub_ps(_mm256_loadu_ps(x8.as_ptr()), m);
                    _mm256_storeu_ps(x8.as_mut_ptr(), $exp8(d));
                }
            }
            for v in &mut x[whole..] {
                *v = (*v - max).exp();
            }
        }
    };
}

exponentials!("avx2,fma", exp4_twice, exp8, silu_mul, exp_minus);
exponentials!(
    "avx2,fma,avx512f,avx512vl",
    exp8_wide,
    exp8_avx512,
    silu_mul_avx512,
    exp_minus_avx512
);
