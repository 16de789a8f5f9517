use super::*;
use crate::kernels::Isa;
use crate::layout::*;
use crate::q8::*;

#[test]
fn every_instruction_set_quantizes_to_the_same_bits() {
    let mut x: Vec<f32> = (0..2048)
        .map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 0.013 * (1 + i / 256) as f32)
        .collect();
    // Blocks of zeros (with a negative zero), of exact ties (127 / 2 steps: x.5 after
    // scaling), with a NaN, and with an infinity.
    x[..32].fill(0.0);
    x[3] = -0.0;
    for (i, v) in x[32..64].iter_mut().enumerate() {
        *v = (i as f32 - 15.5) * 2.0;
    }
    x[64] = 127.0;
    x[100] = f32::NAN;
    x[130] = f32::NEG_INFINITY;
    let (mut a, mut b) = (Q8Rows::default(), Vec::new());
    quantize_q8(&x, &mut a);
    quantize_q8k(&x, &mut b);
    let test = "every_instruction_set_quantizes_to_the_same_bits";
    for k in Isa::kernels_for_test(test, &Isa::ALL) {
        let isa = k.isa();
        let (mut a2, mut b2) = (Q8Rows::default(), Vec::new());
        quantize_q8_for(k, &x, &mut a2);
        quantize_q8k_for(k, &x, &mut b2);
        let values = |q: &Q8Rows| -> Vec<[i8; 32]> {
            (0..q.qs.len())
                .map(|b| q.as_slice().block_values(b))
                .collect()
        };
        // (Bits: a block with NaN or an infinity has a NaN scale.)
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            (bits(&a.d), bits(&a.s)),
            (bits(&a2.d), bits(&a2.s)),
            "{isa:?}"
        );
        assert_eq!(values(&a), values(&a2), "{isa:?}");
        let k_bits = |v: &[BlockQ8K]| -> Vec<_> {
            v.iter().map(|b| (b.d.to_bits(), b.qs, b.bsums)).collect()
        };
        assert_eq!(k_bits(&b), k_bits(&b2), "{isa:?}");
    }
}

/// Tile by tile, each group's rows side by side: 11 rows (a whole tile and a tile of 3)
/// of 3 groups.
#[test]
fn values_arranged_by_tile_are_the_rows_own() {
    let (rows, row_blocks) = (11, 3 * GROUP);
    let mut q = Q8Rows {
        layout: Q8Layout::Interleaved,
        ..Q8Rows::default()
    };
    let groups = rows * row_blocks / GROUP;
    q.qs = (0..rows * row_blocks).map(|b| [b as i8; 32]).collect();
    (q.d, q.s) = (vec![1.0; q.qs.len()], vec![0.5; q.qs.len()]);
    q.d8 = (0..groups).map(|g| [g as f32; 8]).collect();
    q.ysum = (0..groups).map(|g| [-(g as i32); 8]).collect();
    q.arrange_tile_values(row_blocks);
    let mut next = 0;
    for t0 in (0..rows).step_by(TILE) {
        for g in 0..3 {
            for t in t0..TILE.min(rows - t0) + t0 {
                let block = t * row_blocks + g * GROUP;
                let group = t * 3 + g;
                let at = next * GROUP..(next + 1) * GROUP;
                assert_eq!(q.tile_qs.as_slice()[at], q.qs[block..block + GROUP]);
                assert_eq!(q.tile_d8.as_slice()[next], q.d8[group]);
                assert_eq!(q.tile_ysum.as_slice()[next], q.ysum[group]);
                next += 1;
            }
        }
    }
    assert_eq!(next, groups);
    let tile = q.as_slice().tile(8, 3, row_blocks);
    assert!(tile.values_by_tile() && tile.tile_d8[0] == q.d8[8 * 3]);
}

#[test]
fn the_interleaved_layout_is_a_permutation_of_each_group() {
    let mut seen = [false; 32 * GROUP];
    for k in 0..GROUP {
        for e in 0..32 {
            let p = interleaved_position(k, e);
            assert!(!seen[p], "position {p} taken twice");
            seen[p] = true;
            // The lane (4 bytes) holds one half-block sum's elements: lane l and l + 8 of
            // either 64-byte half belong to sum l % 8, the scalar kernel's lane.
            assert_eq!((p % 64) / 4 % 8, 4 * (e / 16) + k, "block {k} element {e}");
        }
    }
}

#[test]
fn q8_blocks_round_to_within_half_a_step() {
    let x: Vec<f32> = (0..64)
        .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.37)
        .collect();
    let mut q = Q8Rows::default();
    quantize_q8(&x, &mut q);
    assert_eq!(q.qs.len(), 4, "two blocks and two of padding");
    assert!(q.qs[2..].iter().all(|b| *b == [0; 32]) && q.d[2..] == [0.0; 2]);
    for (b, (qs, &d)) in q.qs.iter().zip(&q.d).enumerate().take(2) {
        assert!(
            qs.iter().any(|&v| v.abs() == 127),
            "block {b} uses the range"
        );
        for i in 0..32 {
            let err = (d * qs[i] as f32 - x[b * 32 + i]).abs();
            assert!(err <= d * 0.5 + 1e-6, "element {i} of block {b}: {err}");
        }
        let sum: i32 = qs.iter().map(|&v| v as i32).sum();
        assert_eq!(q.s[b], d * sum as f32);
    }
}

#[test]
fn q8k_blocks_carry_run_sums_and_zero_blocks_stay_zero() {
    let mut x: Vec<f32> = (0..512).map(|i| (i as f32 * 0.61).sin()).collect();
    x[256..].fill(0.0);
    let mut q = Vec::new();
    quantize_q8k(&x, &mut q);
    for g in 0..16 {
        let sum: i16 = q[0].qs[16 * g..16 * g + 16].iter().map(|&v| v as i16).sum();
        assert_eq!(q[0].bsums[g], sum, "run {g}");
    }
    assert_eq!(q[1].d, 0.0);
    assert!(q[1].qs.iter().all(|&v| v == 0));
}

#[test]
fn rounding_is_to_nearest_with_ties_to_even() {
    for (v, q) in [
        (0.5, 0),
        (1.5, 2),
        (2.5, 2),
        (-0.5, 0),
        (-1.5, -2),
        (126.5, 126),
        (127.0, 127),
    ] {
        assert_eq!(quantize_value(v, 1.0), q, "{v}");
    }
    assert_eq!(quantize_value(-127.0, 1.0), -127);
    assert_eq!(quantize_value(0.49999997, 1.0), 0);
}

#[test]
fn non_finite_input_gives_a_nan_scale() {
    let mut x = vec![0.5f32; 32];
    x[3] = f32::NAN;
    let mut q = Q8Rows::default();
    quantize_q8(&x, &mut q);
    assert!(q.d[0].is_nan());
    assert!(q.qs[0].iter().all(|&v| v == 0));
}

/// A tail of two blocks after the spans, arranged by tile two rows to a register: every value
/// of each row's two blocks at [`paired_tail_position`] of its pair's place (an odd last row
/// beside zeros), the scales in lanes `4 * side + k`, the half-block sums in `4 * side + 2h + k`,
/// the second row's place zeros; the spans arranged as before. 11 rows: a whole tile and a
/// tile of 3.
#[test]
fn a_tail_of_two_blocks_is_arranged_two_rows_to_a_register() {
    let (rows, spans) = (11, 1);
    let row_blocks = SPAN * spans + GROUP;
    let groups = row_blocks / GROUP;
    let mut q = Q8Rows {
        layout: Q8Layout::Interleaved,
        spans,
        row_blocks,
        paired_tail: true,
        ..Q8Rows::default()
    };
    let value = |t: usize, b: usize, i: usize| ((t * 131 + b * 37 + i * 7) % 251) as i8;
    q.qs = (0..rows * row_blocks)
        .map(|b| std::array::from_fn(|i| value(b / row_blocks, b % row_blocks, i)))
        .collect();
    (q.d, q.s) = (vec![1.0; q.qs.len()], vec![0.5; q.qs.len()]);
    q.d8 = (0..rows * groups)
        .map(|g| std::array::from_fn(|l| (g * 8 + l) as f32))
        .collect();
    q.ysum = (0..rows * groups)
        .map(|g| std::array::from_fn(|l| -((g * 8 + l) as i32)))
        .collect();
    q.arrange_tile_values(row_blocks);
    let (qs, d8, ysum) = (
        q.tile_qs.as_slice(),
        q.tile_d8.as_slice(),
        q.tile_ysum.as_slice(),
    );
    for t0 in (0..rows).step_by(TILE) {
        let tile = TILE.min(rows - t0);
        let first = t0 * groups; // the tile's first group row
        for g in 0..spans * 2 {
            for t in 0..tile {
                let (at, from) = (first + g * tile + t, (t0 + t) * row_blocks + g * GROUP);
                let base = (first + g * tile) * GROUP; // the group's registers, in pairs
                for c in 0..GROUP {
                    assert_eq!(qs[base + tile_chunk(tile, t, c)], q.qs[from + c]);
                }
                assert_eq!(d8[at], q.d8[(t0 + t) * groups + g]);
            }
        }
        let tail = first + spans * 2 * tile; // the tail's group rows
        for t in 0..tile {
            let (place, side, row) = (tail + t / 2 * 2, t % 2, t0 + t);
            let pair = qs[place * GROUP..][..GROUP].as_flattened();
            let own = q.qs[row * row_blocks + SPAN * spans..][..GROUP].as_flattened();
            for k in 0..2 {
                for e in 0..32 {
                    let want = own[interleaved_position(k, e)];
                    assert_eq!(
                        pair[paired_tail_position(side, k, e)],
                        want,
                        "{row} {k} {e}"
                    );
                }
                let group = row * groups + groups - 1;
                assert_eq!(d8[place][4 * side + k], q.d8[group][k]);
                for h in 0..2 {
                    assert_eq!(ysum[place][4 * side + 2 * h + k], q.ysum[group][4 * h + k]);
                }
            }
            // Lanes 2 and 3 of a side scale nothing.
            assert_eq!(d8[place][4 * side + 2..4 * side + 4], [0.0; 2]);
            if side == 1 || t + 1 == tile {
                let other = tail + t / 2 * 2 + 1;
                if other < tail + tile {
                    assert!(qs[other * GROUP..][..GROUP].iter().all(|r| *r == [0; 32]));
                    assert_eq!((d8[other], ysum[other]), ([0.0; 8], [0; 8]));
                }
            }
            if side == 0 && t + 1 == tile {
                // An odd last row: the other side's lanes are zeros.
                assert!((0..32).all(|e| pair[paired_tail_position(1, 0, e)] == 0));
                assert!(d8[place][4..] == [0.0; 4] && ysum[place][4..] == [0; 4]);
            }
        }
    }
}

/// A span's group arranged by tile: every row's registers in a place of their own, a pair's
/// same register side by side starting at an even place (one aligned 64-byte load), an odd
/// tile's last row after the pairs in order.
#[test]
fn a_span_group_holds_its_rows_in_pairs() {
    for tile in 1..=TILE {
        let mut seen = vec![false; tile * GROUP];
        for t in 0..tile {
            for c in 0..GROUP {
                let at = tile_chunk(tile, t, c);
                assert!(!seen[at], "tile {tile}: row {t} register {c} twice");
                seen[at] = true;
                if t % 2 == 0 && t + 1 < tile {
                    assert!(at.is_multiple_of(2) && tile_chunk(tile, t + 1, c) == at + 1);
                }
            }
        }
        assert!(seen.iter().all(|&s| s), "tile {tile}");
        if !tile.is_multiple_of(2) {
            let last = tile - 1;
            assert!((0..GROUP).all(|c| tile_chunk(tile, last, c) == last * GROUP + c));
        }
    }
}
