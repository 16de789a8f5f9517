// The matmul's input is silu(gate) * up, from the layer's gate/up product (each row [gate | up],
// 2k values): the SiLU-gated FFN's elementwise step fused into the down product, so it costs
// no dispatch and no pass over memory. (See matmul_input.wgsl for the interface.)

const NORMED: bool = false;

fn x_at(t: u32, b: u32) -> vec4<f32> {
    if (t < step.m) {
        let row = t * (p.k / 2u);
        let g = x[row + b];
        return g / (1.0 + exp(-g)) * x[row + p.k / 4u + b];
    }
    return vec4<f32>(0.0);
}

fn x_weighted(v: vec4<f32>, b: u32) -> vec4<f32> {
    return v;
}

fn finish(acc: f32, ss: f32) -> f32 {
    return acc;
}
