//! 1x1 convolutions without padding or striding: one GEMM per image and group.

use super::im2col_gemm::gemm_acc;
use super::*;
use crate::ops::sgemm::Isa;

/// 1x1 kernels, stride 1, no padding: Y[n, g] = B[g] + W[g] x X[n, g]
/// directly, into `y` (uninitialised, every element written once, by the
/// GEMM, which adds each row's bias to its product).
pub(super) fn pointwise<T: Real>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    y: &mut [std::mem::MaybeUninit<T>],
    isa: Isa,
) {
    let s = g.in_size();
    let (cg, mg) = (g.in_channels / g.group, g.out_channels / g.group);
    let jobs = g.batch * g.group;
    let par = if jobs >= threads() { 1 } else { threads() };
    let yp = SendPtr(y.as_mut_ptr() as *mut T);
    let biases = bias_or_zeros(bias, g.out_channels);
    crate::ops::parallel::share(jobs, &|job| {
        let (n, gi) = (job / g.group, job % g.group);
        let xo = (n * g.in_channels + gi * cg) * s;
        let yo = (n * g.out_channels + gi * mg) * s;
        let wo = gi * mg * cg;
        // SAFETY: each job writes its own rows of Y; X and W are only read,
        // and all offsets stay inside the buffers sized from `g`.
        unsafe {
            gemm_acc(
                Some(&biases[gi * mg..(gi + 1) * mg]),
                mg,
                s,
                cg,
                yp.get().add(yo),
                s,
                w.as_ptr().add(wo),
                cg,
                x.as_ptr().add(xo),
                s,
                par,
                isa,
            )
        };
    });
}
