// What both matmul kernels (matmul.wgsl, matmul_split_k.wgsl) share: parameters and
// bindings. Prepended to each, after the block format's decoder and before one of the input
// files (matmul_input*.wgsl).

struct Params {
    k: u32,          // row length (elements), a multiple of 32
    n: u32,          // rows in this weight piece
    row_bytes: u32,  // bytes per weight row
    col0: u32,       // first output column this piece writes
    y_stride: u32,   // output row length
    accumulate: u32, // 1: add to y (residual connection), 0: overwrite
    norm_eps: f32,   // the RMS norm's epsilon (matmul_input_rms_norm.wgsl only)
    _pad1: u32,
}

struct Step {
    m: u32,    // tokens in this forward
    base: u32, // KV cache length before this forward
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> weights: array<u32>;      // [n, row_bytes] raw blocks
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;      // [m, k / 4] (see matmul_input*.wgsl)
@group(0) @binding(2) var<storage, read_write> y: array<f32>;      // [m, y_stride]
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<uniform> step: Step;
