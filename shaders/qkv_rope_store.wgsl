// The attention's inputs from the one q/k/v product of a layer, in one dispatch: each row of
// `qkv` is [q | k | v] ((n_heads + 2 n_kv_heads) * head_dim values); its biases are added
// (Qwen2), each head of q and k is RMS-normed (Qwen3, Gemma 3), RoPE turns q and k, q goes to
// `q` and k, v are appended to the layer's f16 cache at entries base..base+m (prepended with
// kv_f16.wgsl). One invocation per pair of adjacent values
// (a cache word); a value whose RoPE partner another invocation holds is computed again from
// the product, with the same operations in the same order as separate bias, RoPE and store
// kernels would apply them, so every value depends only on its own token's row.

struct Params {
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    rope_dim: u32,    // leading values of each head that RoPE turns (even, <= head_dim)
    neox: u32,        // 1: pairs (i, i + rope_dim/2); 0: adjacent pairs (2i, 2i + 1)
    theta_scale: f32,
    has_bias: u32,    // 1: add aux[e] to value e of every row first
    qk_norm: u32,     // 1: RMS-norm each head of q (k) by aux[width..][..head_dim] (the next head_dim)
    eps: f32,
    scaled: u32,      // 1: angles times freq_scale, divided by aux[width + 2 head_dim + pair]
                      // where has_factors; cos and sin times mscale
    freq_scale: f32,
    mscale: f32,
    has_factors: u32,
    ring: u32,        // 0, or a sliding-window layer's ring: entry i goes to slot i % ring
    _pad1: u32,
    _pad2: u32,
}

struct Step {
    m: u32,
    base: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> qkv: array<f32>;              // [m, width]
// [width] biases, [head_dim] q norm, [head_dim] k norm, [rope_dim / 2] RoPE factors (each read
// only where its flag says so).
@group(0) @binding(1) var<storage, read> aux: array<f32>;
@group(0) @binding(2) var<storage, read> positions: array<u32>;        // [m]
@group(0) @binding(3) var<storage, read_write> q: array<f32>;          // [m, n_heads * head_dim]
@group(0) @binding(4) var<storage, read_write> k_cache: array<u32>;    // [slots, kv_dim / 2]
@group(0) @binding(5) var<storage, read_write> v_cache: array<u32>;    // [slots, kv_dim / 2]
@group(0) @binding(6) var<uniform> p: Params;
@group(0) @binding(7) var<uniform> step: Step;

fn width() -> u32 {
    return (p.n_heads + 2u * p.n_kv_heads) * p.head_dim;
}

// Value e of token t's row, bias added.
fn raw(t: u32, e: u32) -> f32 {
    let x = qkv[t * width() + e];
    if (p.has_bias == 1u) {
        return x + aux[e];
    }
    return x;
}

// Value e of token t's row (in the q or k section starting at `start`), biased and, with
// qk_norm, RMS-normed over its head as the reference does: the head's squares summed in order,
// then x * (1 / sqrt(mean + eps)) * w.
fn normed(t: u32, start: u32, e: u32) -> f32 {
    if (p.qk_norm == 0u) {
        return raw(t, e);
    }
    let i = (e - start) % p.head_dim;
    let head = e - i;
    var ss = 0.0;
    for (var j = 0u; j < p.head_dim; j++) {
        let x = raw(t, head + j);
        ss += x * x;
    }
    let scale = 1.0 / sqrt(ss / f32(p.head_dim) + p.eps);
    var w = width() + i;
    if (start > 0u) {
        w += p.head_dim;
    }
    return raw(t, e) * scale * aux[w];
}

// Value e of token t's row (in the q or k section starting at `start`) after RoPE.
fn roped(t: u32, start: u32, e: u32) -> f32 {
    let j = e - start;
    let i = j % p.head_dim;
    if (i >= p.rope_dim) {
        return normed(t, start, e);
    }
    let head = e - i;
    let pairs = p.rope_dim / 2u;
    var pair = i / 2u;
    var a = head + 2u * pair;
    var b = a + 1u;
    var second = (i & 1u) == 1u;
    if (p.neox == 1u) {
        pair = i % pairs;
        a = head + pair;
        b = a + pairs;
        second = i >= pairs;
    }
    // The angle of pair i at position pos is pos * theta_scale^i, built by repeated
    // multiplication as the CPU reference (and llama.cpp) build it.
    var theta = f32(positions[t]);
    for (var k = 0u; k < pair; k++) {
        theta *= p.theta_scale;
    }
    // Llama 3's and LongRoPE's frequency factors, a linear freq scale, as the reference's
    // `freq_scale * (theta / factor)`.
    if (p.scaled == 1u) {
        var factor = 1.0;
        if (p.has_factors == 1u) {
            factor = aux[width() + 2u * p.head_dim + pair];
        }
        theta = p.freq_scale * (theta / factor);
    }
    // WGSL only bounds cos/sin error on [-pi, pi]: reduce first, subtracting k * 2pi in two
    // parts (6.28125 has 8 significant bits, so k * 6.28125 is exact for every position).
    let k = round(theta * 0.15915494309189535);
    let r = (theta - k * 6.28125) - k * 0.0019353071795864769;
    var c = cos(r);
    var s = sin(r);
    if (p.scaled == 1u) {
        c *= p.mscale;
        s *= p.mscale;
    }
    let x0 = normed(t, start, a);
    let x1 = normed(t, start, b);
    if (second) {
        return x0 * s + x1 * c;
    }
    return x0 * c - x1 * s;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let words = width() / 2u;
    let t = gid.x / words;
    if (t >= step.m) {
        return;
    }
    let e = 2u * (gid.x % words);
    let dq = p.n_heads * p.head_dim;
    let dkv = p.n_kv_heads * p.head_dim;
    if (e < dq) {
        q[t * dq + e] = roped(t, 0u, e);
        q[t * dq + e + 1u] = roped(t, 0u, e + 1u);
        return;
    }
    var slot = step.base + t;
    if (p.ring != 0u) {
        slot = slot % p.ring;
    }
    let row = slot * (dkv / 2u);
    if (e < dq + dkv) {
        k_cache[row + (e - dq) / 2u] = f16_bits(roped(t, dq, e)) | (f16_bits(roped(t, dq, e + 1u)) << 16u);
        return;
    }
    v_cache[row + (e - dq - dkv) / 2u] = f16_bits(raw(t, e)) | (f16_bits(raw(t, e + 1u)) << 16u);
}
