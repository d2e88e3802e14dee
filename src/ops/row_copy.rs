//! Copies of short rows (a few hundred bytes to a few KiB) front to back.
//!
//! glibc's `memcpy` for a row of this size loads the row's first and last
//! vectors before the middle, so when the source is not in cache its first
//! miss is at the row's far end, a line the hardware prefetcher has not
//! asked for. Row after row that costs a quarter of the time: copying
//! 14 336 rows of 896 bytes (a 64 x 224 x 224 float32 tensor into 228-wide
//! rows) measured 0.74-0.77 of one `to_vec` of the whole tensor with
//! `memcpy` per row, 0.96-1.00 with the forward loop below, and 0.59-0.62
//! with `rep movsb` (AMD EPYC, AVX-512, three runs).
//!
//! The loop's stores are aligned to the destination's 64-byte lines: a
//! padded row's copy starts a few bytes into the row (8 bytes for pads of
//! 2 float32), so every unaligned vector store straddled two lines. On a
//! Zen 5 EPYC, in `cargo xtask bench --op pad --op center-crop-pad`, four
//! runs of each build in turns: edge padding 0.60-0.72 of the copy with
//! straddling stores and 1.06-1.12 with aligned ones, constant 1.14-1.35
//! and 1.10-1.19, reflect 1.06-1.32 and 1.03-1.06, wrap 0.96-1.02 and
//! 1.01-1.05, CenterCropPad 1.16-1.35 and 1.24-1.69.

use crate::ops::sgemm::Isa;
use std::mem::MaybeUninit;

/// Copies `src` into `dst` (same length) in address order: with 64-byte
/// vectors on AVX-512 (where it was measured), by `memcpy` elsewhere.
#[inline]
pub(crate) fn copy_row<T: Copy>(src: &[T], dst: &mut [MaybeUninit<T>]) {
    assert_eq!(src.len(), dst.len(), "copy_row: lengths differ");
    #[cfg(target_arch = "x86_64")]
    {
        let bytes = std::mem::size_of_val(src);
        let (s, d) = (src.as_ptr() as *const u8, dst.as_mut_ptr() as *mut u8);
        if Isa::Avx512.supported() {
            // SAFETY: AVX-512F is present; both slices hold `bytes` bytes
            // and do not overlap (`dst` is borrowed mutably).
            unsafe { forward_avx512(s, d, bytes) };
            return;
        }
    }
    dst.write_copy_of_slice(src);
}

/// # Safety
/// AVX-512F; `s` and `d` hold `bytes` bytes each and do not overlap.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn forward_avx512(s: *const u8, d: *mut u8, bytes: usize) {
    use std::arch::x86_64::*;
    if bytes < 64 {
        std::ptr::copy_nonoverlapping(s, d, bytes);
        return;
    }
    // A store that straddles two lines costs two: the first vector goes
    // where it falls, the rest from the destination's next line boundary
    // (rewriting a few bytes of the first), the last ends at the row's end.
    let v = _mm512_loadu_si512(s as *const __m512i);
    _mm512_storeu_si512(d as *mut __m512i, v);
    let mut at = 64 - (d as usize % 64);
    while at + 64 <= bytes {
        let v = _mm512_loadu_si512(s.add(at) as *const __m512i);
        _mm512_store_si512(d.add(at) as *mut __m512i, v);
        at += 64;
    }
    if at < bytes {
        let v = _mm512_loadu_si512(s.add(bytes - 64) as *const __m512i);
        _mm512_storeu_si512(d.add(bytes - 64) as *mut __m512i, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_length_and_offset() {
        // Lengths around the vector widths, from offsets that misalign
        // source and destination.
        let src: Vec<u8> = (0..600u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in [0, 1, 31, 32, 33, 63, 64, 65, 127, 128, 129, 300, 511] {
            for (so, doff) in [(0, 0), (1, 0), (0, 3), (5, 17)] {
                let mut dst = vec![MaybeUninit::new(0u8); len + doff + 1];
                copy_row(&src[so..so + len], &mut dst[doff..doff + len]);
                // SAFETY: every element was initialised above.
                let got: Vec<u8> = dst.iter().map(|v| unsafe { v.assume_init() }).collect();
                assert_eq!(&got[doff..doff + len], &src[so..so + len], "len {len}");
                assert!(got[..doff].iter().all(|&b| b == 0), "wrote before the row");
                assert_eq!(got[doff + len], 0, "wrote past the row, len {len}");
            }
        }
        // Every alignment of the destination, with rows of a vector or more
        // (one straddling store first, aligned ones, one overlapping store
        // last).
        let long: Vec<u8> = (0..1200u32).map(|i| (i * 13 + 5) as u8).collect();
        for len in [64, 65, 100, 127, 128, 129, 191, 192, 200, 896, 1000] {
            for doff in 0..64 {
                let mut dst = vec![MaybeUninit::new(0u8); len + 128];
                copy_row(&long[7..7 + len], &mut dst[doff..doff + len]);
                // SAFETY: every element was initialised above.
                let got: Vec<u8> = dst.iter().map(|v| unsafe { v.assume_init() }).collect();
                assert_eq!(
                    &got[doff..doff + len],
                    &long[7..7 + len],
                    "len {len} at {doff}"
                );
                assert!(got[..doff].iter().all(|&b| b == 0), "wrote before the row");
                assert!(
                    got[doff + len..].iter().all(|&b| b == 0),
                    "wrote past the row"
                );
            }
        }
        let wide: Vec<f64> = (0..37).map(|i| i as f64 * 0.5).collect();
        let mut dst = vec![MaybeUninit::new(0f64); 37];
        copy_row(&wide, &mut dst);
        // SAFETY: initialised.
        let got: Vec<f64> = dst.iter().map(|v| unsafe { v.assume_init() }).collect();
        assert_eq!(got, wide);
    }
}
