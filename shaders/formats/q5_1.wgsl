// Q5_1: 32 elements in 24 bytes { d: f16, m: f16, qh: u32, qs: [u8; 16] }; x = q * d + m.
fn load_unit(row: u32, u: u32) -> array<f32, 32> {
    let b = row + u * 24u;
    let d = f16_at(b);
    let m = f16_at(b + 2u);
    let qh = u32_at(b + 4u);
    var v: array<f32, 32>;
    for (var j = 0u; j < 16u; j++) {
        let q = (u32_at(b + 8u + (j & ~3u)) >> (8u * (j & 3u))) & 0xffu;
        let lo = (q & 15u) | (((qh >> j) & 1u) << 4u);
        let hi = (q >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u);
        v[j] = f32(lo) * d + m;
        v[j + 16u] = f32(hi) * d + m;
    }
    return v;
}
