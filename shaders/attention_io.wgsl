// What both attention kernels (attention.wgsl, attention_split_kv.wgsl) share (after
// kv_f16.wgsl, the cache's f16 words): parameters, bindings, the head dimension, the slot a
// visible entry lives in, the chunk of slots a work item takes, and the first two passes over
// those slots, which the kernels only stride differently. Prepended to each.
//
// Both kernels split each (token, head) pair's visible slots into chunks of `p.chunk` slots
// (slot k in chunk k / chunk, whatever the block) and write one partial result per chunk: the
// chunk's maximum score, the sum of exp(score - that maximum) and the values weighted by those
// exponentials. attention_combine.wgsl merges a pair's partials in chunk order. A token's
// chunks depend only on how many slots it sees, so its result is the same whether it arrives
// alone, in a causal block, or on a tree branch (batch-invariant).

struct Params {
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,   // = HD
    capacity: u32,   // KV cache slots (stride of the score scratch)
    max_rows: u32,   // stride of `visible`
    scale: f32,      // multiplies q.k: 1 / sqrt(head_dim), or the layer's own
    chunk: u32,      // slots per chunk
    max_chunks: u32, // chunks of a full cache (stride of the partials)
    window: u32,     // 0, or a sliding window: a query at position p sees keys at positions > p - window
    ring: u32,       // 0, or a sliding-window layer's ring: entry i is in slot i % ring
    _pad1: u32,
    _pad2: u32,
}

struct Step {
    m: u32,
    base: u32,
    _pad0: u32,
    slots: u32, // most slots a token of the block sees (base + its longest visibility list)
}

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;              // [m, n_heads * head_dim / 4]
@group(0) @binding(1) var<storage, read> k_cache: array<vec2<u32>>;        // [slots, kv_dim / 4]: 4 f16 each (kv_f16.wgsl)
@group(0) @binding(2) var<storage, read> v_cache: array<vec2<u32>>;        // [slots, kv_dim / 4]
@group(0) @binding(3) var<storage, read_write> scores: array<f32>;         // [max_rows, n_heads, capacity]
@group(0) @binding(4) var<storage, read_write> partials: array<vec4<f32>>; // [max_rows, n_heads, max_chunks, 1 + head_dim / 4]
@group(0) @binding(5) var<storage, read> visible: array<u32>;              // [max_rows, 1 + max_rows]: count, then block indices
@group(0) @binding(6) var<uniform> p: Params;
@group(0) @binding(7) var<uniform> step: Step;
@group(0) @binding(8) var<storage, read> positions: array<u32>;           // [m]: each block token's position

// Head dimension, a multiple of 4, at most 256.
override HD: u32 = 64u;
// HD / 4: the length of the per-invocation query and value arrays (a constant, which an
// override cannot size; kernels.rs sets it per head dimension).
const HD4: u32 = 32u;

// The cache slot of a pair's k-th visible entry. A sliding-window layer's ring holds only the
// entries its window can see: the others, masked, read whatever their slot holds now.
fn slot_of(t: u32, k: u32) -> u32 {
    var entry = k;
    if (k >= step.base) {
        entry = step.base + visible[t * (1u + p.max_rows) + 1u + (k - step.base)];
    }
    if (p.ring != 0u) {
        return entry % p.ring;
    }
    return entry;
}

// One (token, head) pair: work item i is token i / n_heads and query head i % n_heads.
struct Pair {
    t: u32,
    kv_off: u32,  // vec4 offset of its KV head in a cache row
    n_slots: u32, // slots it sees: the cache before this forward, then its visible block entries
    qb: u32,      // vec4 offset of its query row
    sb: u32,      // offset of its scores in the scratch
    pb: u32,      // vec4 offset of its partials
}

fn pair_of(i: u32) -> Pair {
    let head = i % p.n_heads;
    let t = i / p.n_heads;
    let kvh = head / (p.n_heads / p.n_kv_heads);
    return Pair(
        t,
        kvh * (HD / 4u),
        step.base + visible[t * (1u + p.max_rows)],
        (t * p.n_heads + head) * (HD / 4u),
        (t * p.n_heads + head) * p.capacity,
        (t * p.n_heads + head) * p.max_chunks * (1u + HD / 4u),
    );
}

// Whether the pair's k-th visible slot lies in its window. A cached slot's position is its index
// (the cache holds one path of positions 0..base); a block entry's is its token's position.
// Masked slots keep their place in the chunks (a score of zero weight), so the chunking and
// every sum's order are those of the unmasked kernel.
fn in_window(pr: Pair, k: u32) -> bool {
    if (p.window == 0u) {
        return true;
    }
    var key = k;
    if (k >= step.base) {
        key = positions[visible[pr.t * (1u + p.max_rows) + 1u + (k - step.base)]];
    }
    return positions[pr.t] < key + p.window;
}

// Chunks the longest-seeing token of this block has (the host sizes the grid alike).
fn step_chunks() -> u32 {
    return (step.slots + p.chunk - 1u) / p.chunk;
}

// vec4 index of the pair's partial for chunk c: (maximum, sum, 0, 0), then HD / 4 value sums.
fn partial_at(pr: Pair, c: u32) -> u32 {
    return pr.pb + c * (1u + HD / 4u);
}

// vec4 index of the pair's KV head in the cache row of its k-th visible slot.
fn kv_at(pr: Pair, k: u32) -> u32 {
    return slot_of(pr.t, k) * (p.n_kv_heads * (HD / 4u)) + pr.kv_off;
}

// Pass 1 over slots first, first + stride, ... below end: scaled scores into the scratch;
// their maximum. The query stays in registers (HD is a constant, so its loops unroll).
fn score_slots(pr: Pair, first: u32, end: u32, stride: u32) -> f32 {
    var qv: array<vec4<f32>, HD4>;
    for (var d = 0u; d < HD / 4u; d++) {
        qv[d] = q[pr.qb + d];
    }
    var mx = bitcast<f32>(0xff7fffffu); // -f32::MAX (a decimal literal can round out of range)
    for (var k = first; k < end; k += stride) {
        let kb = kv_at(pr, k);
        var s = 0.0;
        for (var d = 0u; d < HD / 4u; d++) {
            s += dot(qv[d], kv4(k_cache[kb + d]));
        }
        s *= p.scale;
        scores[pr.sb + k] = s;
        if (in_window(pr, k)) {
            mx = max(mx, s);
        }
    }
    return mx;
}

// Pass 2 over the same slots: exp(score - mx) in place; their sum.
fn exp_slots(pr: Pair, mx: f32, first: u32, end: u32, stride: u32) -> f32 {
    var sum = 0.0;
    for (var k = first; k < end; k += stride) {
        let e = select(0.0, exp(scores[pr.sb + k] - mx), in_window(pr, k));
        scores[pr.sb + k] = e;
        sum += e;
    }
    return sum;
}
