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

// Four cached values from the two words that hold them.
fn kv4(w: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(
        f16_to_f32(w.x & 0xffffu),
        f16_to_f32(w.x >> 16u),
        f16_to_f32(w.y & 0xffffu),
        f16_to_f32(w.y >> 16u),
    );
}
