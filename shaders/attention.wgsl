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

// Prepended with attention_io.wgsl (parameters, bindings, HD, slot_of).

// Few invocations (m * n_heads), each with a long sequential loop: small workgroups spread them
// over all CPU threads.
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let head = gid.x % p.n_heads;
    let t = gid.x / p.n_heads;
    if (t >= step.m) {
        return;
    }
    let hd4 = HD / 4u;
    let kv4 = p.n_kv_heads * hd4;
    let kvh = head / (p.n_heads / p.n_kv_heads);
    let n_slots = step.base + visible[t * (1u + p.max_rows)];
    let qb = (t * p.n_heads + head) * hd4;
    let sb = (t * p.n_heads + head) * p.capacity;

    var qv: array<vec4<f32>, 32>;
    for (var d = 0u; d < hd4; d++) {
        qv[d] = q[qb + d];
    }

    // Scores and their maximum.
    var mx = bitcast<f32>(0xff7fffffu); // -f32::MAX (a decimal literal can round out of range)
    for (var k = 0u; k < n_slots; k++) {
        let kb = slot_of(t, k) * kv4 + kvh * hd4;
        var s = 0.0;
        for (var d = 0u; d < hd4; d++) {
            s += dot(qv[d], k_cache[kb + d]);
        }
        s *= p.scale;
        scores[sb + k] = s;
        mx = max(mx, s);
    }

    // Exponentials and their sum.
    var sum = 0.0;
    for (var k = 0u; k < n_slots; k++) {
        let e = exp(scores[sb + k] - mx);
        scores[sb + k] = e;
        sum += e;
    }
    let inv = 1.0 / sum;

    // Weighted sum of values.
    var acc: array<vec4<f32>, 32>;
    for (var k = 0u; k < n_slots; k++) {
        let w = scores[sb + k] * inv;
        let vb = slot_of(t, k) * kv4 + kvh * hd4;
        for (var d = 0u; d < hd4; d++) {
            acc[d] += w * v_cache[vb + d];
        }
    }
    for (var d = 0u; d < hd4; d++) {
        out[qb + d] = acc[d];
    }
}
