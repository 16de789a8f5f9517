// The k largest logits of each row (k <= 64), largest first, ties to the lower token id, NaN
// and -inf never listed, and the log of the row's softmax normalizer (log-sum-exp over its
// finite logits): what top-k sampling and a draft model's confidence need, read back instead
// of the whole vocabulary. One workgroup of 64 per row.
//
// 1. Invocation i walks tokens i, i + 64, ... in increasing order and keeps its own sorted list
//    of its k best (a new token only displaces strictly smaller ones, so equal logits stay in
//    id order), and a running max and sum of exponentials.
// 2. The 64 lists are merged k times over: every invocation offers its list's head, a fixed
//    tree picks the best, and the invocation that owns it (token id mod 64) moves its head on.
// The order is a total order on (logit, id), so the result does not depend on the reduction
// tree; the normalizer is reduced in a fixed tree. Rows are independent (batch-invariant).
//
// Output row t, 129 words: [0] the log-sum-exp's bits, [1 + r] the id of rank r (NONE past the
// row's finite logits), [65 + r] its logit's bits.

struct Params {
    n: u32, // vocabulary size
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

struct Step {
    m: u32,
    base: u32,
    k: u32, // entries wanted per row, 1..=64
    _pad0: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;      // [m, n]
@group(0) @binding(1) var<storage, read_write> out: array<u32>;   // [m, 129]
@group(0) @binding(2) var<uniform> p: Params;
@group(0) @binding(3) var<uniform> step: Step;

const K_MAX: u32 = 64u;
const ROW_WORDS: u32 = 129u;
const NONE: u32 = 0xffffffffu;

var<workgroup> cand_key: array<u32, 64>;
var<workgroup> cand_id: array<u32, 64>;
var<workgroup> red_max: array<f32, 64>;
var<workgroup> red_sum: array<f32, 64>;

// A key whose unsigned order is the order of the floats (as Rust's f32::total_cmp).
fn key_of(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

// Whether entry (ka, ia) ranks before (kb, ib): larger logit first, then lower id; NONE last.
fn ahead(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
    if (ia == NONE) {
        return false;
    }
    if (ib == NONE) {
        return true;
    }
    return ka > kb || (ka == kb && ia < ib);
}

// Combines two (max, sum of exp(x - max)) pairs.
fn merge_norm(ma: f32, sa: f32, mb: f32, sb: f32) -> vec2<f32> {
    if (sb == 0.0) {
        return vec2<f32>(ma, sa);
    }
    if (sa == 0.0) {
        return vec2<f32>(mb, sb);
    }
    let m = max(ma, mb);
    return vec2<f32>(m, sa * exp(ma - m) + sb * exp(mb - m));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // Exactly m workgroups.
    let t = wid.x;
    let row = t * p.n;
    let k = min(step.k, K_MAX);

    // 1. This invocation's k best, and its normalizer.
    var lk: array<u32, 64>;
    var li: array<u32, 64>;
    var cnt = 0u;
    var mx = 0.0;
    var sum = 0.0;
    for (var i = lid; i < p.n; i += 64u) {
        let v = logits[row + i];
        let bits = bitcast<u32>(v);
        let nan = (bits & 0x7fffffffu) > 0x7f800000u;
        if (nan || bits == 0xff800000u) {
            continue;
        }
        if ((bits & 0x7fffffffu) < 0x7f800000u) {
            let n = merge_norm(mx, sum, v, 1.0);
            mx = n.x;
            sum = n.y;
        }
        let kv = key_of(v);
        if (cnt < k || ahead(kv, i, lk[cnt - 1u], li[cnt - 1u])) {
            var pos = min(cnt, k - 1u);
            while (pos > 0u && ahead(kv, i, lk[pos - 1u], li[pos - 1u])) {
                lk[pos] = lk[pos - 1u];
                li[pos] = li[pos - 1u];
                pos -= 1u;
            }
            lk[pos] = kv;
            li[pos] = i;
            cnt = min(cnt + 1u, k);
        }
    }

    // The normalizer, in a fixed tree.
    red_max[lid] = mx;
    red_sum[lid] = sum;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if (lid < s) {
            let n = merge_norm(red_max[lid], red_sum[lid], red_max[lid + s], red_sum[lid + s]);
            red_max[lid] = n.x;
            red_sum[lid] = n.y;
        }
        workgroupBarrier();
    }
    let o = t * ROW_WORDS;
    if (lid == 0u) {
        // -inf when the row has no finite logit.
        let norm = red_max[0] + log(max(red_sum[0], 1e-30));
        out[o] = select(0xff800000u, bitcast<u32>(norm), red_sum[0] > 0.0);
    }

    // 2. Merge: k rounds, each picking the best head.
    var head = 0u;
    for (var r = 0u; r < k; r++) {
        let live = head < cnt;
        cand_key[lid] = select(0u, lk[min(head, K_MAX - 1u)], live);
        cand_id[lid] = select(NONE, li[min(head, K_MAX - 1u)], live);
        workgroupBarrier();
        for (var s = 32u; s > 0u; s >>= 1u) {
            if (lid < s && ahead(cand_key[lid + s], cand_id[lid + s], cand_key[lid], cand_id[lid])) {
                cand_key[lid] = cand_key[lid + s];
                cand_id[lid] = cand_id[lid + s];
            }
            workgroupBarrier();
        }
        let win = cand_id[0];
        if (lid == 0u) {
            out[o + 1u + r] = win;
            out[o + 1u + K_MAX + r] = select(0u, bitcast<u32>(logits[row + min(win, p.n - 1u)]), win != NONE);
        }
        if (win != NONE && win % 64u == lid) {
            head += 1u;
        }
        // Everyone has read the winner before the next round overwrites it.
        workgroupBarrier();
    }
}
