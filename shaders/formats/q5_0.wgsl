// Q5_0: 32 elements in 22 bytes { d: f16, qh: u32, qs: [u8; 16] }; bit j of qh is the fifth
// bit of element j; x = (q - 16) * d.
fn load_unit(row: u32, u: u32) -> array<f32, 32> {
    let b = row + u * 22u;
    let d = f16_at(b);
    let qh = u32_at(b + 2u);
    var v: array<f32, 32>;
    for (var j = 0u; j < 16u; j++) {
        let q = (u32_at(b + 6u + (j & ~3u)) >> (8u * (j & 3u))) & 0xffu;
        let lo = (q & 15u) | (((qh >> j) & 1u) << 4u);
        let hi = (q >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u);
        v[j] = (f32(lo) - 16.0) * d;
        v[j + 16u] = (f32(hi) - 16.0) * d;
    }
    return v;
}
