//! im2col plus GEMM: the general path (any rank, stride, dilation, group).

use super::im2col::{im2col, im2col_rows};
use super::packing::PackedWeights;
use super::*;
use crate::ops::sgemm::{Isa, Onto};

/// `dst[m x n] += lhs[m x k] * rhs[k x n]`, all row-major with the given
/// row strides, on up to `par` threads; with `row_bias` (m values),
/// `dst = row_bias[i] + lhs * rhs` instead, and `dst` may be uninitialised.
/// f32 uses our kernels (`sgemm.rs`) when `isa` has them, splitting columns
/// across threads, and adds each bias to its finished product; otherwise,
/// and for f64, the `gemm` crate, onto `dst` filled with the biases.
///
/// # Safety
/// The operands must hold the rows and columns their sizes and strides
/// describe; `isa` only one the CPU supports.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_acc<T: Real>(
    row_bias: Option<&[T]>,
    m: usize,
    n: usize,
    k: usize,
    dst: *mut T,
    dst_rs: usize,
    lhs: *const T,
    lhs_rs: usize,
    rhs: *const T,
    rhs_rs: usize,
    par: usize,
    isa: Isa,
) {
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && isa != Isa::Portable {
        let (d, l, r) = (SendPtr(dst as *mut f32), lhs as usize, rhs as usize);
        // SAFETY: T is f32 (checked above).
        let row_bias =
            row_bias.map(|b| std::slice::from_raw_parts(b.as_ptr() as *const f32, b.len()));
        let onto = row_bias.map_or(Onto::C, Onto::RowBias);
        let chunks = if par > 1 {
            par.min(n.div_ceil(64)).max(1)
        } else {
            1
        };
        let width = n.div_ceil(chunks).div_ceil(48) * 48;
        crate::ops::parallel::share(chunks, &|i| {
            let j0 = i * width;
            if j0 < n {
                let w = width.min(n - j0);
                // SAFETY: each chunk writes its own columns j0..j0+w of dst.
                crate::ops::sgemm::sgemm_acc(
                    onto,
                    isa,
                    m,
                    w,
                    k,
                    l as *const f32,
                    lhs_rs,
                    (r as *const f32).add(j0),
                    rhs_rs,
                    d.get().add(j0),
                    dst_rs,
                );
            }
        });
        return;
    }
    if let Some(bias) = row_bias {
        for (i, &b) in bias[..m].iter().enumerate() {
            for j in 0..n {
                dst.add(i * dst_rs + j).write(b);
            }
        }
    }
    let parallelism = if par > 1 {
        ::gemm::Parallelism::Rayon(par)
    } else {
        ::gemm::Parallelism::None
    };
    ::gemm::gemm(
        m,
        n,
        k,
        dst,
        1,
        dst_rs as isize,
        true,
        lhs,
        1,
        lhs_rs as isize,
        rhs,
        1,
        rhs_rs as isize,
        T::ONE,
        T::ONE,
        false,
        false,
        false,
        parallelism,
    );
}

/// Column tiles of at most TILE_BYTES of im2col data, as many as keeps every
/// thread busy (a multiple of the thread count when there are few images and
/// groups), of equal width. Returns (tile width, tile count).
pub(super) fn tiles_for(
    g: &Geometry,
    kdim: usize,
    elem: usize,
    tile_bytes: usize,
) -> (usize, usize) {
    let os = g.out_size();
    let max_tile = (tile_bytes / elem / kdim.max(1)).max(MIN_TILE_COLUMNS as usize);
    let mut tiles = os.div_ceil(max_tile);
    let per_image = g.batch * g.group;
    if per_image < threads() {
        let want = threads().div_ceil(per_image);
        tiles = tiles.div_ceil(want) * want;
    }
    let tile = os.div_ceil(tiles).max(1);
    (tile, os.div_ceil(tile))
}

/// im2col in column tiles, each followed by a GEMM into the matching columns of Y.
pub(super) fn im2col_gemm<T: Real>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    y: &mut [T],
    tile_bytes: usize,
    isa: Isa,
) {
    let os = g.out_size();
    let (cg, mg) = (g.in_channels / g.group, g.out_channels / g.group);
    let kdim = cg * g.kernel_size();
    let (tile, tiles) = tiles_for(g, kdim, std::mem::size_of::<T>(), tile_bytes);
    let jobs = g.batch * g.group * tiles;
    let par = if jobs >= threads() { 1 } else { threads() };
    let yp = SendPtr(y.as_mut_ptr());
    thread_local! {
        static COL: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    crate::ops::parallel::share(jobs, &|job| {
        let t = job % tiles;
        let gi = (job / tiles) % g.group;
        let n = job / tiles / g.group;
        let (j0, j1) = (t * tile, ((t + 1) * tile).min(os));
        let width = j1 - j0;
        // Take the thread's buffer out while it is in use: the GEMM below
        // may run rayon work on this thread, which can re-enter this job.
        let mut bytes = COL.with(|cell| std::mem::take(&mut *cell.borrow_mut()));
        let need = kdim * width * std::mem::size_of::<T>() + std::mem::align_of::<T>();
        if bytes.len() < need {
            bytes.resize(need, 0);
        }
        let offset = bytes.as_ptr().align_offset(std::mem::align_of::<T>());
        // SAFETY: the buffer holds `need` bytes from an aligned offset; T is
        // f32 or f64 (plain data), and im2col writes every element before the
        // GEMM reads it.
        let col = unsafe {
            std::slice::from_raw_parts_mut(bytes.as_mut_ptr().add(offset) as *mut T, kdim * width)
        };
        let xo = (n * g.in_channels + gi * cg) * g.in_size();
        im2col(g, &x[xo..xo + cg * g.in_size()], cg, j0, j1, col);
        let yo = (n * g.out_channels + gi * mg) * os + j0;
        // SAFETY: job (n, gi, t) writes rows gi*mg..(gi+1)*mg of image n,
        // columns j0..j1 only: disjoint from every other job.
        unsafe {
            gemm_acc(
                None,
                mg,
                width,
                kdim,
                yp.get().add(yo),
                os,
                w.as_ptr().add(gi * mg * kdim),
                kdim,
                col.as_ptr(),
                width,
                par,
                isa,
            )
        };
        COL.with(|cell| *cell.borrow_mut() = bytes);
    });
}

/// The f32 path where our kernels run (`isa` is not portable): the weights
/// are packed once per call (or come `prepacked`), and im2col writes each
/// row straight into the GEMM's packed B layout, so no separate packing pass
/// reads the whole im2col buffer again.
#[allow(clippy::too_many_arguments)]
pub(super) fn im2col_gemm_packed(
    g: &Geometry,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [std::mem::MaybeUninit<f32>],
    tile_bytes: usize,
    isa: Isa,
    prepacked: Option<&PackedWeights>,
) {
    use crate::ops::sgemm::packed;
    let os = g.out_size();
    let (cg, mg) = (g.in_channels / g.group, g.out_channels / g.group);
    let kdim = cg * g.kernel_size();
    // Tiles are whole GEMM panels, spread evenly: a tile that ends in a
    // nearly empty panel would cost a full panel of work.
    let panel = packed::PANEL;
    let total = os.div_ceil(panel);
    let max_panels = (tile_bytes / std::mem::size_of::<f32>() / kdim.max(1) / panel).max(1);
    let mut tiles = total.div_ceil(max_panels);
    let per_image = g.batch * g.group;
    // Few images and few panels: keep whole tiles and split each GEMM by
    // rows instead, which divides the work evenly.
    let split_rows = per_image < threads() && total < 4 * threads();
    if per_image < threads() && !split_rows {
        let want = threads().div_ceil(per_image);
        tiles = (tiles.div_ceil(want) * want).min(total);
    }
    let bounds = |t: usize| ((t * total / tiles) * panel).min(os);
    let jobs = g.batch * g.group * tiles;
    // Splitting rows, every job uses all threads, one job at a time: a
    // job count that is not a multiple of the threads (C256 14x14 makes 3
    // tiles of its 5 panels) then leaves none idle.
    let par = if jobs >= threads() && !split_rows {
        1
    } else {
        threads()
    };
    let local;
    let packed_w = match prepacked {
        Some(p) => p,
        None => {
            local = PackedWeights::new(g.out_channels, g.group, kdim, w, isa);
            &local
        }
    };
    debug_assert!(packed_w.fits(g.out_channels, g.group, kdim, isa));
    let yp = SendPtr(y.as_mut_ptr() as *mut f32);
    // Each output row lands on its bias (or zero) as the GEMM stores it, so
    // Y is written once, not filled first.
    let biases = bias_or_zeros(bias, g.out_channels);
    thread_local! {
        static PACKED_B: std::cell::RefCell<(Vec<f32>, Vec<f32>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    let run = |job: usize| {
        let t = job % tiles;
        let gi = (job / tiles) % g.group;
        let n = job / tiles / g.group;
        let (j0, j1) = (bounds(t), bounds(t + 1));
        let width = j1 - j0;
        // Taken out while in use: the GEMM may run other jobs on this thread.
        let (mut pb, mut row) = PACKED_B.with(|cell| std::mem::take(&mut *cell.borrow_mut()));
        pb.resize(packed::b_len(width, kdim).max(pb.len()), 0.0);
        row.resize(width.max(row.len()), 0.0);
        let xo = (n * g.in_channels + gi * cg) * g.in_size();
        let xs = &x[xo..xo + cg * g.in_size()];
        if par > 1 && cg > 1 {
            // Few jobs: fill the packed rows in parallel, by input channel.
            let ks = g.kernel_size();
            let chunks = par.min(cg);
            let pbp = SendPtr(pb.as_mut_ptr());
            crate::ops::parallel::share(chunks, &|i| {
                let (c0, c1) = (i * cg / chunks, (i + 1) * cg / chunks);
                let mut buf = vec![0f32; width];
                let part = &xs[c0 * g.in_size()..c1 * g.in_size()];
                im2col_rows(g, part, c1 - c0, j0, j1, &mut buf, &mut |r, values| {
                    // SAFETY: each chunk writes the rows of its own channels.
                    unsafe { packed::put_b_row_raw(pbp.get(), width, kdim, c0 * ks + r, values) }
                });
            });
        } else {
            im2col_rows(g, xs, cg, j0, j1, &mut row, &mut |r, values| {
                packed::put_b_row(&mut pb, width, kdim, r, values);
            });
        }
        let yo = (n * g.out_channels + gi * mg) * os + j0;
        let panels = packed::panels(width);
        let rows = packed::row_panels(mg);
        let (pa, pbr) = (packed_w.group(gi), &pb);
        let chunks = if par > 1 {
            par.min(if split_rows { rows } else { panels })
        } else {
            1
        };
        crate::ops::parallel::share(chunks, &|i| {
            let (cols, rws) = if split_rows {
                (0..panels, i * rows / chunks..(i + 1) * rows / chunks)
            } else {
                (i * panels / chunks..(i + 1) * panels / chunks, 0..rows)
            };
            // SAFETY: the CPU supports `isa` (checked by the caller); job (n,
            // gi, t) writes rows gi*mg.. of image n, columns j0..j1 only, and
            // each chunk its own panels (or row panels) of those.
            unsafe {
                packed::sgemm(
                    Onto::RowBias(&biases[gi * mg..(gi + 1) * mg]),
                    isa,
                    mg,
                    width,
                    kdim,
                    pa,
                    pbr,
                    yp.get().add(yo),
                    os,
                    cols,
                    rws,
                )
            };
        });
        PACKED_B.with(|cell| *cell.borrow_mut() = (pb, row));
    };
    if par > 1 {
        (0..jobs).for_each(run);
    } else {
        crate::ops::parallel::share(jobs, &run);
    }
}
