// The KV cache's storage: f16 values packed two to a u32 word (element 2j in the low half of
// word j, 2j + 1 in the high half), converted on the bits so that no `shader-f16` feature is
// needed and the rounding is the same on every device (pack2x16float's is implementation-
// defined, and unpack2x16float may flush subnormals). Prepended to qkv_rope_store.wgsl and to
// the attention kernels.

// f32 -> f16 bits, rounded to nearest (ties to even); beyond f16's range (and NaN) the signed
// infinity, as the cache has always stored.
fn f16_bits(x: f32) -> u32 {
    let bits = bitcast<u32>(x);
    let sign = (bits >> 16u) & 0x8000u;
    let a = bits & 0x7fffffffu;
    if ((a >> 23u) < 113u) {
        // Below f16's normal range: multiples of 2^-24 (round() ties to even; 1024 is the
        // smallest normal's encoding, so the carry is right).
        return sign | u32(round(abs(x) * 16777216.0));
    }
    if (a >= 0x7f800000u) {
        return sign | 0x7c00u;
    }
    let h = ((a + 0xfffu + ((a >> 13u) & 1u)) >> 13u) - (112u << 10u);
    return sign | min(h, 0x7c00u);
}

// f16 bits -> f32, exact.
fn f16_value(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0u) {
        let v = f32(m) * 5.9604645e-8; // subnormal: m * 2^-24
        return select(v, -v, sign != 0u);
    }
    if (e == 31u) {
        return bitcast<f32>(sign | 0x7f800000u | (m << 13u));
    }
    return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
}

// Four cached values from the two words that hold them.
fn kv4(w: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(
        f16_value(w.x & 0xffffu),
        f16_value(w.x >> 16u),
        f16_value(w.y & 0xffffu),
        f16_value(w.y >> 16u),
    );
}
