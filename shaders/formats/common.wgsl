// Every format defines `unit_head(row, u) -> Head`, what unit u (32 consecutive weights) of
// the row starting at byte `row` needs from its block (scales, addresses), and
// `quad(h, i) -> vec4<f32>`, weights 4i..4i+4 of the unit (i < 8). Decoding a quad at a time
// keeps few values live: an array of all 32 weights, or one indexed at run time, spills to
// memory on CPU-emulated GPUs. Field meanings are the format's own.
struct Head {
    a: u32,
    b: u32,
    s: u32,
    d: f32,
    m: f32,
}

// Byte-level access to a weight tensor stored as raw GGUF blocks in `weights: array<u32>`
// (declared by the kernel that includes this file). GGUF blocks are not 4-byte aligned
// (Q4_0 blocks are 18 bytes), so fields are read by byte offset. Little-endian throughout.

fn byte_at(b: u32) -> u32 {
    return (weights[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu;
}

// An f16 at a 2-byte-aligned offset.
fn f16_at(b: u32) -> f32 {
    let word = weights[b >> 2u];
    return f16_to_f32(select(word & 0xffffu, word >> 16u, (b & 2u) != 0u));
}

// Four bytes at any offset: one load when aligned, two otherwise (pieces are padded to whole
// words, so the second word exists whenever the bytes do).
fn u32_at(b: u32) -> u32 {
    let i = b >> 2u;
    let s = (b & 3u) * 8u;
    if (s == 0u) {
        return weights[i];
    }
    return (weights[i] >> s) | (weights[i + 1u] << (32u - s));
}

fn i8_at(b: u32) -> f32 {
    let q = byte_at(b);
    return f32(select(i32(q), i32(q) - 256, q > 127u));
}

// The 6-bit scale and min of sub-block j (0..8) of a Q4_K/Q5_K superblock whose 12 packed
// scale bytes start at byte s.
fn k_scale_min(j: u32, s: u32) -> vec2<f32> {
    if (j < 4u) {
        return vec2<f32>(f32(byte_at(s + j) & 63u), f32(byte_at(s + j + 4u) & 63u));
    }
    let sc = (byte_at(s + j + 4u) & 15u) | ((byte_at(s + j - 4u) >> 6u) << 4u);
    let m = (byte_at(s + j + 4u) >> 4u) | ((byte_at(s + j) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(m));
}

// The low (hi = 0) or high (hi = 1) nibbles of a word's four bytes.
fn nibbles4(w: u32, hi: u32) -> vec4<u32> {
    return (bytes4(w) >> vec4<u32>(4u * hi)) & vec4<u32>(15u);
}

// The four bytes of a word, lowest first.
fn bytes4(w: u32) -> vec4<u32> {
    return (vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u);
}

// Bits s..s+4 of a word, one per lane.
fn bits4(w: u32, s: u32) -> vec4<u32> {
    return (vec4<u32>(w >> s) >> vec4<u32>(0u, 1u, 2u, 3u)) & vec4<u32>(1u);
}
