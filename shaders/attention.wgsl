// Attention of each block token over the KV cache and the block entries it may see (causal or
// tree mask), first half: one partial result per chunk of a (token, head) pair's slots
// (attention_io.wgsl), merged by attention_combine.wgsl. One invocation per (token, head,
// chunk), no shared memory and no barriers: on CPU-emulated GPUs each load is a loop over the
// SIMD lanes and barriers switch coroutines, so the kernel loads each key and value once per
// head, keeps the query and the value sums in registers (HD, the head dimension, is a pipeline
// constant so their loops unroll), and goes through its chunk's scores three times (scores and
// max; exponentials and sum; weighted values).
//
// Token t sees slots 0..base (the cache before this forward) followed by the block entries
// listed in visible[t] (in block order); every reduction walks a chunk's slots in that order.

// Prepended with attention_io.wgsl (parameters, bindings, HD, slots, chunks, passes 1 and 2).

// Few invocations (m * n_heads * chunks), each with a sequential loop: small workgroups spread
// them over all CPU threads.
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    // Chunks of one pair are neighbours: they read the same KV head.
    let chunks = step_chunks();
    if (gid.x >= step.m * p.n_heads * chunks) {
        return;
    }
    let pr = pair_of(gid.x / chunks);
    let c = gid.x % chunks;
    let first = c * p.chunk;
    if (first >= pr.n_slots) {
        return;
    }
    let end = min(first + p.chunk, pr.n_slots);
    let mx = score_slots(pr, first, end, 1u);
    let sum = exp_slots(pr, mx, first, end, 1u);

    // Values weighted by the exponentials (normalized when the chunks are merged).
    var acc: array<vec4<f32>, HD4>;
    for (var k = first; k < end; k++) {
        let w = scores[pr.sb + k];
        let vb = kv_at(pr, k);
        for (var d = 0u; d < HD / 4u; d++) {
            acc[d] += w * kv4(v_cache[vb + d]);
        }
    }
    let pb = partial_at(pr, c);
    partials[pb] = vec4<f32>(mx, sum, 0.0, 0.0);
    for (var d = 0u; d < HD / 4u; d++) {
        partials[pb + 1u + d] = acc[d];
    }
}
