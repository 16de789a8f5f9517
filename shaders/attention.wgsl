// Attention of each block token over the KV cache and the block entries it may see (causal or
// tree mask). One invocation per (token, head), no shared memory and no barriers: on
// CPU-emulated GPUs each load is a loop over the SIMD lanes and barriers switch coroutines, so
// the kernel loads each key and value once per head, keeps the query and the output in
// registers (HD, the head dimension, is a pipeline constant so their loops unroll), and goes
// through the scores three times (scores and max; exponentials and sum; weighted values).
//
// Token t sees slots 0..base (the cache before this forward) followed by the block entries
// listed in visible[t] (in block order). Scores are laid out in that order and every reduction
// walks them in that order, so a token's result is the same whether it arrives alone, in a
// causal block, or on a tree branch: batch-invariant.

// Prepended with attention_io.wgsl (parameters, bindings, HD, slots, passes 1 and 2).

// Few invocations (m * n_heads), each with a long sequential loop: small workgroups spread them
// over all CPU threads.
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= step.m * p.n_heads) {
        return;
    }
    let pr = pair_of(gid.x);
    let mx = score_slots(pr, 0u, 1u);
    let inv = 1.0 / exp_slots(pr, mx, 0u, 1u);

    // Weighted sum of values.
    var acc: array<vec4<f32>, 32>;
    for (var k = 0u; k < pr.n_slots; k++) {
        let w = scores[pr.sb + k] * inv;
        let vb = kv_at(pr, k);
        for (var d = 0u; d < HD / 4u; d++) {
            acc[d] += w * kv4(v_cache[vb + d]);
        }
    }
    for (var d = 0u; d < HD / 4u; d++) {
        out[pr.qb + d] = acc[d];
    }
}
