// Rotary position embedding in place on [m, n_heads * head_dim]. One invocation per (token,
// head, pair). The angle of pair i at position p is p * theta_scale^i, built by repeated
// multiplication as the CPU reference (and llama.cpp) build it.

struct Params {
    n_heads: u32,
    head_dim: u32,
    rope_dim: u32,
    neox: u32, // 1: pairs (i, i + rope_dim/2); 0: adjacent pairs (2i, 2i + 1)
    theta_scale: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

struct Step {
    m: u32,
    base: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> positions: array<u32>; // [m]
@group(0) @binding(2) var<uniform> p: Params;
@group(0) @binding(3) var<uniform> step: Step;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let pairs = p.rope_dim / 2u;
    let i = gid.x % pairs;
    let head = (gid.x / pairs) % p.n_heads;
    let t = gid.x / (pairs * p.n_heads);
    if (t >= step.m) {
        return;
    }
    var theta = f32(positions[t]);
    for (var k = 0u; k < i; k++) {
        theta *= p.theta_scale;
    }
    // WGSL only bounds cos/sin error on [-pi, pi]: reduce first, subtracting k * 2pi in two
    // parts (6.28125 has 8 significant bits, so k * 6.28125 is exact for every position).
    let k = round(theta * 0.15915494309189535);
    let r = (theta - k * 6.28125) - k * 0.0019353071795864769;
    let c = cos(r);
    let s = sin(r);
    let base = (t * p.n_heads + head) * p.head_dim;
    var a = base + 2u * i;
    var b = a + 1u;
    if (p.neox == 1u) {
        a = base + i;
        b = base + i + pairs;
    }
    let x0 = x[a];
    let x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
}
