//! Arrays that start on a 64-byte boundary: a 32-byte vector load of an element whose size
//! divides 64 then never splits a cache line (a split load costs the AVX2 tile kernel about a
//! tenth of its time, and a `Vec`'s allocation is only as aligned as its element).

use std::marker::PhantomData;

/// Element types an [`Aligned`] may hold: arrays of plain numbers, for which every bit
/// pattern (zeros included) is a value and whose size divides 64.
///
/// # Safety
/// Implementors must have no padding and no invalid bit patterns, and a size dividing 64.
pub unsafe trait Plain: Copy {}

// SAFETY: arrays of integers and floats: any bits are a value; 32 bytes each.
unsafe impl Plain for [i8; 32] {}
// SAFETY: as above.
unsafe impl Plain for [f32; 8] {}
// SAFETY: as above.
unsafe impl Plain for [i32; 8] {}

#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, align(64))]
struct CacheLine([u8; 64]);

/// `len` elements of `T` on whole cache lines, zeros until written.
#[derive(Clone, Debug, PartialEq)]
pub struct Aligned<T> {
    lines: Vec<CacheLine>,
    len: usize,
    element: PhantomData<T>,
}

impl<T> Default for Aligned<T> {
    fn default() -> Self {
        Aligned {
            lines: Vec::new(),
            len: 0,
            element: PhantomData,
        }
    }
}

impl<T: Plain> Aligned<T> {
    /// `len` elements, all bits zero.
    pub fn zeroed(len: usize) -> Self {
        const { assert!(64 % size_of::<T>() == 0) };
        let bytes = len * size_of::<T>();
        Aligned {
            lines: vec![CacheLine([0; 64]); bytes.div_ceil(64)],
            len,
            element: PhantomData,
        }
    }

    /// `len` elements in the same allocation where it is large enough: the first elements keep
    /// their values, the others are whatever the buffer held (every caller writes them all).
    pub fn resize(&mut self, len: usize) {
        let lines = (len * size_of::<T>()).div_ceil(64);
        self.lines.resize(lines, CacheLine([0; 64]));
        self.len = len;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[T] {
        // SAFETY: the lines hold at least `len` elements' bytes, aligned for `T` (64 is a
        // multiple of its alignment, which divides its size), and any bits are a `T` (`Plain`).
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr() as *const T, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as above, borrowed mutably from `self`.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr() as *mut T, self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_start_on_a_cache_line_and_keep_their_values() {
        for len in [0, 1, 3, 17] {
            let mut a = Aligned::<[f32; 8]>::zeroed(len);
            assert_eq!(a.as_slice().as_ptr() as usize % 64, 0);
            for (i, v) in a.as_mut_slice().iter_mut().enumerate() {
                *v = [i as f32; 8];
            }
            let b = a.clone();
            assert_eq!(b.len(), len);
            assert!(b
                .as_slice()
                .iter()
                .enumerate()
                .all(|(i, v)| *v == [i as f32; 8]));
            assert_eq!(b.as_slice().as_ptr() as usize % 64, 0);
        }
    }
}
