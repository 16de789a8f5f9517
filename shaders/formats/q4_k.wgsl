// Q4_K: 256 elements in 144 bytes { d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128] }.
// Unit u is sub-block c = u % 8 of superblock u / 8; sub-blocks 2p and 2p+1 share 32 bytes of
// qs (low and high nibbles); x = d * sc * q - dmin * m. Superblocks are 4-byte aligned.
// Head: a = first word of the unit's qs, s = c % 2 (nibble), d = d * sc, m = dmin * m.
fn unit_head(row: u32, u: u32) -> Head {
    let b = row + (u / 8u) * 144u;
    let c = u % 8u;
    let sm = k_scale_min(c, b + 4u);
    return Head((b + 16u + (c / 2u) * 32u) >> 2u, 0u, c % 2u, f16_at(b) * sm.x, f16_at(b + 2u) * sm.y);
}

fn quad(h: Head, i: u32) -> vec4<f32> {
    return h.d * vec4<f32>(nibbles4(weights[h.a + i], h.s)) - h.m;
}
