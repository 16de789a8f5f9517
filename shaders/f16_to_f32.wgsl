// Exact f16 -> f32 from the 16 bits, without unpack2x16float (a capability some backends lack,
// and which may flush subnormals). Prepended to the block-format decoders (formats/common.wgsl)
// and to the KV cache's accessors (kv_f16.wgsl).
fn f16_to_f32(h: u32) -> f32 {
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
