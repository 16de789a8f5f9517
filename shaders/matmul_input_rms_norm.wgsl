// The matmul's input RMS-normalized as it is read: the layer's norm fused into the product that
// follows it. W (x / sqrt(mean(x^2) + eps) * g) is computed as (W (x * g)) / sqrt(mean(x^2) +
// eps), the sum of squares taken from the activations the product reads anyway, so the norm
// costs no dispatch and no pass over memory. (See matmul_input.wgsl for the interface.)

const NORMED: bool = true;

@group(0) @binding(5) var<storage, read> norm: array<vec4<f32>>; // [k / 4]: the norm's weights

fn x_at(t: u32, b: u32) -> vec4<f32> {
    if (t < step.m) {
        return x[t * (p.k / 4u) + b];
    }
    return vec4<f32>(0.0);
}

fn x_weighted(v: vec4<f32>, b: u32) -> vec4<f32> {
    return v * norm[b];
}

fn finish(acc: f32, ss: f32) -> f32 {
    return acc * (1.0 / sqrt(ss / f32(p.k) + p.norm_eps));
}
