//! The kernels' own packing and decoding against the portable layouts of [`crate::packed`] and
//! [`crate::packed_k`].

use super::scalar::decode_k;
use super::Isa;
use crate::formats::{KFormat, Q32Format, WeightFormat};
use crate::{packed, packed_k};

const K_FORMATS: [KFormat; 3] = [KFormat::Q4_K, KFormat::Q5_K, KFormat::Q6_K];

/// Every byte value, in no particular order.
fn bytes(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i * 7919 % 251) as u8 ^ (i / 3) as u8)
        .collect()
}

/// The kernels' packing of the 32-element formats (AVX2's own code) writes the bytes of the
/// portable one.
#[test]
fn every_instruction_set_packs_the_same_bytes() {
    for k in Isa::kernels_for_test("every_instruction_set_packs_the_same_bytes", &Isa::ALL) {
        for f in Q32Format::ALL {
            let row_bytes = 14 * f.block_bytes(); // a span, a group, a pair
            let rows = bytes(5 * row_bytes);
            let Some(packed) = k.pack(WeightFormat::Q32(f), &rows, row_bytes) else {
                continue;
            };
            let mut expected = vec![0u8; rows.len()];
            packed::pack_rows(f, &rows, row_bytes, &mut expected);
            assert_eq!(packed, expected, "{:?} {f:?}", k.isa());
        }
    }
}

/// The kernels' packing of the K-quants (AVX2's own code) writes the bytes of the portable one.
#[test]
fn every_instruction_set_packs_the_same_k_quant_bytes() {
    let test = "every_instruction_set_packs_the_same_k_quant_bytes";
    for k in Isa::kernels_for_test(test, &Isa::ALL) {
        for f in K_FORMATS {
            let row_bytes = 3 * f.block_bytes();
            let rows = bytes(4 * row_bytes);
            let Some(packed) = k.pack(WeightFormat::K(f), &rows, row_bytes) else {
                continue;
            };
            let mut expected = vec![0u8; rows.len()];
            packed_k::pack_rows(f, &rows, &mut expected);
            assert_eq!(packed, expected, "{:?} {f:?}", k.isa());
        }
    }
}

/// The K-quants' file-order values are what the reference decoder reads.
#[test]
fn file_order_values_are_the_decoders() {
    for f in K_FORMATS {
        for b in bytes(4 * f.block_bytes()).chunks_exact(f.block_bytes()) {
            let k = decode_k(f, b);
            for e in 0..256 {
                let signed =
                    packed_k::gguf_value(f, b, e) as i8 - if f == KFormat::Q6_K { 32 } else { 0 };
                assert_eq!(signed, k.q[e], "{f:?} element {e}");
            }
        }
    }
}
