// The matmul's input as stored: row t of x is k values. One of the three input files
// (matmul_input*.wgsl) is prepended to each matmul kernel, after matmul_io.wgsl; each defines
// NORMED, x_at, x_weighted and finish.

// Whether the kernel takes each token's sum of squares (an RMS-normalized input).
const NORMED: bool = false;

// Quad b of token t's input (zero past the block: those loads are skipped).
fn x_at(t: u32, b: u32) -> vec4<f32> {
    if (t < step.m) {
        return x[t * (p.k / 4u) + b];
    }
    return vec4<f32>(0.0);
}

// What the product multiplies quad b of the input by.
fn x_weighted(v: vec4<f32>, b: u32) -> vec4<f32> {
    return v;
}

// A (row, token) value from its product and the token's sum of squares.
fn finish(acc: f32, ss: f32) -> f32 {
    return acc;
}
