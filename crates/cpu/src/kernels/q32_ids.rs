//! The 32-element block formats as const generic parameters of the SIMD kernels, so each kernel
//! is compiled for one layout: block size and field offsets are constants once `F` is known, and
//! slices of whole groups need no bounds checks inside.

use crate::formats::Q32Format;

pub const Q4_0: u8 = 0;
pub const Q4_1: u8 = 1;
pub const Q5_0: u8 = 2;
pub const Q5_1: u8 = 3;
pub const Q8_0: u8 = 4;

/// The format of id `f`.
pub const fn format(f: u8) -> Q32Format {
    match f {
        Q4_0 => Q32Format::Q4_0,
        Q4_1 => Q32Format::Q4_1,
        Q5_0 => Q32Format::Q5_0,
        Q5_1 => Q32Format::Q5_1,
        _ => Q32Format::Q8_0,
    }
}

/// Bytes per block of format id `f`.
pub const fn block_bytes(f: u8) -> usize {
    match f {
        Q4_0 => 18,
        Q4_1 => 20,
        Q5_0 => 22,
        Q5_1 => 24,
        _ => 34,
    }
}
