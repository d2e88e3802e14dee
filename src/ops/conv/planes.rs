//! The output of one Conv call: its planes, row-major, starting on a cache
//! line.
//!
//! The kernels write whole 64-byte vectors of an output plane at a time
//! (the channel-lane write-out a vector per plane and 16 positions, the
//! depthwise and GEMM kernels rows of vectors). Where the allocation
//! starts mid-line, as the allocator's large blocks do (16 bytes into a
//! page), every such store straddles two lines. The buffer is therefore
//! allocated a line longer and the planes start at its first line
//! boundary; the tensor made from it views that part of it.

use ndarray::{Array1, ArrayD, IxDyn};
use std::mem::MaybeUninit;

/// Bytes the planes' start is aligned to: a cache line.
const LINE: usize = 64;

/// `len` elements of output in a buffer of their own, starting on a line.
pub struct Planes<T> {
    data: Vec<T>,
    start: usize,
    len: usize,
}

impl<T: super::Real> Planes<T> {
    /// Room for `len` elements, not yet written.
    pub(super) fn uninit(len: usize) -> Self {
        let room = LINE / std::mem::size_of::<T>();
        let data: Vec<T> = Vec::with_capacity(len + room);
        let start = if len == 0 {
            0
        } else {
            data.as_ptr().align_offset(LINE).min(room)
        };
        Planes { data, start, len }
    }

    /// The elements to write, all `len` of them.
    pub(super) fn spare(&mut self) -> &mut [MaybeUninit<T>] {
        &mut self.data.spare_capacity_mut()[self.start..self.start + self.len]
    }

    /// Takes every element of [`Self::spare`] as written.
    ///
    /// # Safety
    /// Every element of [`Self::spare`] has been written.
    pub(super) unsafe fn assume_init(&mut self) {
        let spare = self.data.spare_capacity_mut();
        for v in &mut spare[..self.start] {
            v.write(T::ZERO);
        }
        // SAFETY: the elements before `start` were just written, the rest
        // by the caller (this function's contract).
        unsafe { self.data.set_len(self.start + self.len) };
    }

    /// The planes as an array of `shape` (which holds `len` elements).
    pub(super) fn into_array(self, shape: IxDyn) -> Result<ArrayD<T>, ndarray::ShapeError> {
        let (start, len) = (self.start, self.len);
        let mut planes = Array1::from_vec(self.data);
        planes.slice_collapse(ndarray::s![start..start + len]);
        planes.into_shape_with_order(shape)
    }
}

impl<T> std::ops::Deref for Planes<T> {
    type Target = [T];

    /// The planes written (empty before [`Planes::assume_init`]).
    fn deref(&self) -> &[T] {
        self.data.get(self.start..).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The planes start on a line whatever the allocator gives, hold what
    /// was written, and become an array of exactly those elements.
    #[test]
    fn planes_start_on_a_line_and_become_their_array() {
        for len in [0usize, 1, 15, 16, 17, 1000, 40_000] {
            let mut p = Planes::<f32>::uninit(len);
            for (i, v) in p.spare().iter_mut().enumerate() {
                v.write(i as f32);
            }
            // SAFETY: every element was just written.
            unsafe { p.assume_init() };
            if len > 0 {
                assert_eq!(p.as_ptr() as usize % LINE, 0, "len {len}");
            }
            assert_eq!(p.len(), len);
            assert!(p.iter().enumerate().all(|(i, &v)| v == i as f32));
            let a = p.into_array(IxDyn(&[len])).unwrap();
            assert_eq!(a.shape(), [len]);
            assert!(a.iter().enumerate().all(|(i, &v)| v == i as f32));
            assert_eq!(a.as_slice().map(<[f32]>::len), Some(len));
        }
    }
}
