use super::*;
use crate::error_bound::Arithmetic;
use crate::test_rng::Rng;

/// The obvious direct convolution in f64: the oracle for the fast paths.
fn reference(g: &Geometry, x: &[f64], w: &[f64], bias: Option<&[f64]>) -> Vec<f64> {
    reference_with(g, x, w, bias, |acc, x, w| acc + x * w)
}

/// The obvious direct convolution, each output its bias and then
/// `add(acc, x, w)` for every (input channel, tap) pair that reads inside
/// the input, channel by channel and each channel's taps in row-major
/// order.
fn reference_with<T: Copy + Default>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    add: impl Fn(T, T, T) -> T,
) -> Vec<T> {
    let rank = g.in_spatial.len();
    let (cg, mg) = (g.in_channels / g.group, g.out_channels / g.group);
    let os: usize = g.out_spatial.iter().product();
    let ks: usize = g.kernel.iter().product();
    let is: usize = g.in_spatial.iter().product();
    let mut y = vec![T::default(); g.batch * g.out_channels * os];
    for n in 0..g.batch {
        for m in 0..g.out_channels {
            let gi = m / mg;
            for o in 0..os {
                let mut acc = bias.map_or(T::default(), |b| b[m]);
                let mut oi = vec![0; rank];
                let mut r = o;
                for a in (0..rank).rev() {
                    oi[a] = r % g.out_spatial[a];
                    r /= g.out_spatial[a];
                }
                for c in 0..cg {
                    for k in 0..ks {
                        let mut ki = vec![0; rank];
                        let mut r = k;
                        for a in (0..rank).rev() {
                            ki[a] = r % g.kernel[a];
                            r /= g.kernel[a];
                        }
                        let mut off = 0;
                        let mut inside = true;
                        for a in 0..rank {
                            let p = (oi[a] * g.strides[a] + ki[a] * g.dilations[a]) as i64
                                - g.pads_begin[a] as i64;
                            if p < 0 || p >= g.in_spatial[a] as i64 {
                                inside = false;
                            }
                            off = off * g.in_spatial[a] + p.max(0) as usize;
                        }
                        if inside {
                            let xv = x[(n * g.in_channels + gi * cg + c) * is + off];
                            let wv = w[(m * cg + c) * ks + k];
                            acc = add(acc, xv, wv);
                        }
                    }
                }
                y[(n * g.out_channels + m) * os + o] = acc;
            }
        }
    }
    y
}

/// A random valid geometry: any rank 1-3, group, depthwise, 1x1,
/// stride, dilation, padding and `auto_pad`; None when the draw is
/// invalid (the rejection tests cover those).
fn random_geometry(r: &mut Rng) -> Option<Geometry> {
    let rank = 1 + r.below(3) as usize;
    let group = [1, 1, 2, 3][r.below(4) as usize];
    let depthwise = r.below(4) == 0;
    let cg = if depthwise {
        1
    } else {
        1 + r.below(3) as usize
    };
    let mg = 1 + r.below(3) as usize;
    let pointwise = r.below(5) == 0;
    let mut x_shape = vec![1 + r.below(2) as usize, cg * group];
    let mut w_shape = vec![mg * group, cg];
    let mut attrs = ConvAttrs {
        group: group as i64,
        ..Default::default()
    };
    let mut strides = vec![];
    let mut dil = vec![];
    let mut pads = vec![0i64; 2 * rank];
    for a in 0..rank {
        x_shape.push(1 + r.below(7) as usize);
        w_shape.push(if pointwise {
            1
        } else {
            1 + r.below(3) as usize
        });
        strides.push(if pointwise { 1 } else { 1 + r.below(3) as i64 });
        dil.push(1 + r.below(2) as i64);
        if !pointwise {
            pads[a] = r.below(3) as i64;
            pads[a + rank] = r.below(3) as i64;
        }
    }
    attrs.strides = Some(strides);
    attrs.dilations = Some(dil);
    attrs.auto_pad = [
        AutoPad::NotSet,
        AutoPad::SameUpper,
        AutoPad::SameLower,
        AutoPad::Valid,
    ][r.below(4) as usize];
    if attrs.auto_pad == AutoPad::NotSet {
        attrs.pads = Some(pads);
    }
    let m = w_shape[0];
    geometry(&attrs, &x_shape, &w_shape, Some(&[m])).ok()
}

/// A random depthwise 2-D geometry (see `check_path`) and whether to add a
/// bias; None when the draw is invalid.
fn random_depthwise(r: &mut Rng) -> Option<(Geometry, bool)> {
    let group = 2 + r.below(4) as usize;
    let mg = 1 + r.below(4) as usize;
    let (h, w) = (1 + r.below(20) as usize, 1 + r.below(40) as usize);
    let (kh, kw) = (1 + r.below(5) as usize, 1 + r.below(5) as usize);
    let strides = if r.below(4) == 0 {
        vec![1 + r.below(2) as i64, 1 + r.below(2) as i64]
    } else {
        vec![1, 1]
    };
    let attrs = ConvAttrs {
        group: group as i64,
        strides: Some(strides),
        dilations: Some(vec![1 + r.below(3) as i64, 1 + r.below(3) as i64]),
        pads: Some((0..4).map(|_| r.below(4) as i64).collect()),
        ..Default::default()
    };
    let x_shape = [1 + r.below(2) as usize, group, h, w];
    let w_shape = [mg * group, 1, kh, kw];
    let with_bias = r.below(2) == 0;
    let g = geometry(&attrs, &x_shape, &w_shape, Some(&[mg * group])).ok()?;
    Some((g, with_bias))
}

/// X, W and B for `g`, exact in f32 so that both precisions and the
/// reference see the same values.
fn random_inputs(g: &Geometry, r: &mut Rng) -> [Vec<f64>; 3] {
    let lens = [
        g.batch * g.in_channels * g.in_size(),
        g.out_channels * g.in_channels / g.group * g.kernel_size(),
        g.out_channels,
    ];
    lens.map(|n| {
        (0..n)
            .map(|_| r.signed_unit() as f32 as f64)
            .collect::<Vec<f64>>()
    })
}

/// True when `a` and `b` hold the same f32 values bit for bit (a NaN's
/// payload and a zero's sign included).
fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Runs `g` on the kernels of `path` in f32 and in f64 and checks every
/// output against the direct f64 reference, within the bound of the
/// strict verdict policy (`error_bound.rs`):
/// `2 * (g_n * (sum |w*x| + |b|) + n * eta * (1 + g_n))` with `n = K + 1` and
/// `g_n = (1 + u)^n - 1` (`error_bound::growth`).
/// That bound holds for any summation order, blocked or fused, so every
/// path must meet it, and it follows from the reduction length where a
/// picked tolerance would be too loose for short sums and too tight
/// for long ones.
fn check_against_reference(
    what: &str,
    g: &Geometry,
    [x, w, b]: &[Vec<f64>; 3],
    scratch: usize,
    path: KernelPath,
    with_bias: bool,
) {
    let b = Some(b.as_slice()).filter(|_| with_bias);
    let want = reference(g, x, w, b);
    let abs = |v: &[f64]| v.iter().map(|a| a.abs()).collect::<Vec<_>>();
    // All terms non-negative: the reference sums their magnitudes.
    let magnitude = reference(g, &abs(x), &abs(w), b.map(abs).as_deref());
    let n = g.in_channels / g.group * g.kernel_size() + 1;
    let narrow = |v: &[f64]| v.iter().map(|&a| a as f32).collect::<Vec<_>>();
    let (x32, w32, b32) = (narrow(x), narrow(w), b.map(narrow));
    let got32 = conv_on(
        g,
        &x32,
        &w32,
        b32.as_deref(),
        scratch,
        path,
        Packs::default(),
    );
    let got64 = conv_on(g, x, w, b, scratch, path, Packs::default());
    // Weights packed ahead of the call change where they come from, not
    // the arithmetic: the same bits.
    let kdim = g.in_channels / g.group * g.kernel_size();
    let prepacked = PackedWeights::new(g.out_channels, g.group, kdim, &w32, path.isa());
    let (direct, lanes) = (
        DirectWeights::new(g.out_channels, g.group, kdim, &w32),
        LaneWeights::in_spans(
            g.out_channels,
            g.group,
            kdim,
            &w32,
            direct_lanes::span(path.isa()),
        ),
    );
    // Twice with one plan cache: the second call takes the first's plan.
    let plans = direct_lanes::PlanCache::default();
    for call in ["first", "second"] {
        let again = conv_on(
            g,
            &x32,
            &w32,
            b32.as_deref(),
            scratch,
            path,
            Packs {
                gemm: Some(&prepacked),
                direct: Some(&direct),
                lanes: Some(&lanes),
                plans: Some(&plans),
            },
        );
        assert!(
            same_bits(&got32, &again),
            "{what}, {path:?}: prepacked weights changed the result ({call} call, {g:?})"
        );
    }
    let (f32_sum, f64_sum) = (
        Arithmetic::of(DataType::Float).unwrap(),
        Arithmetic::of(DataType::Double).unwrap(),
    );
    for i in 0..want.len() {
        for (precision, got, bound) in [
            ("f32", got32[i] as f64, f32_sum.bound(n, magnitude[i])),
            ("f64", got64[i], f64_sum.bound(n, magnitude[i])),
        ] {
            assert!(
                (got - want[i]).abs() <= bound,
                "{what}, {path:?}, {precision} at {i}: {got} vs {}, bound {bound} ({g:?})",
                want[i]
            );
        }
    }
}

/// Every kernel of one path: random geometries (so depthwise, 1x1 and
/// im2col of any rank), then shapes chosen for the GEMM kernels' edges:
/// reductions longer than one block of `sgemm::KC`, rows and columns
/// off the 8 x 48 panels, many tiles under a small scratch, and both
/// more and fewer jobs than threads.
fn check_path(path: KernelPath) {
    let mut r = Rng::new(0x9E3779B97F4A7C15);
    let mut checked = 0;
    for case in 0..300 {
        let Some(g) = random_geometry(&mut r) else {
            continue;
        };
        let inputs = random_inputs(&g, &mut r);
        check_against_reference(&format!("case {case}"), &g, &inputs, TILE_BYTES, path, true);
        checked += 1;
    }
    assert!(checked > 200, "only {checked} random geometries were valid");

    // Depthwise, which the draws above reach only a few times: mostly unit
    // strides (the register-blocked kernels), rows of any width (not just
    // multiples of the vector), heights spanning several row blocks,
    // asymmetric padding, dilation, kernels wider than the input, several
    // outputs per group, with and without bias.
    let mut unit = 0;
    for case in 0..200 {
        let Some((g, with_bias)) = random_depthwise(&mut r) else {
            continue;
        };
        assert!(g.is_depthwise_2d());
        unit += usize::from(g.strides == [1, 1]);
        let inputs = random_inputs(&g, &mut r);
        let what = format!("depthwise case {case}");
        check_against_reference(&what, &g, &inputs, TILE_BYTES, path, with_bias);
    }
    assert!(
        unit > 100,
        "only {unit} depthwise geometries had unit strides"
    );

    let pads = |p: i64, rank: usize| Some(vec![p; 2 * rank]);
    // (what, attributes, X shape, W shape, scratch bytes)
    type Shape<'a> = (&'a str, ConvAttrs, &'a [usize], &'a [usize], usize);
    let targeted: [Shape; 11] = [
        (
            "72 output channels (a whole block of 64 and a part), K = 288",
            ConvAttrs {
                pads: pads(1, 2),
                ..Default::default()
            },
            &[1, 32, 9, 11],
            &[72, 32, 3, 3],
            TILE_BYTES,
        ),
        (
            "3x3, 13 rows, 323 columns",
            ConvAttrs {
                pads: pads(1, 2),
                ..Default::default()
            },
            &[1, 5, 17, 19],
            &[13, 5, 3, 3],
            TILE_BYTES,
        ),
        (
            "the same in 4 KiB tiles",
            ConvAttrs {
                pads: pads(1, 2),
                ..Default::default()
            },
            &[1, 5, 17, 19],
            &[13, 5, 3, 3],
            4096,
        ),
        (
            "K = 360, three images",
            ConvAttrs::default(),
            &[3, 40, 12, 12],
            &[9, 40, 3, 3],
            TILE_BYTES,
        ),
        (
            "1-D, K = 900, stride 2",
            ConvAttrs {
                strides: Some(vec![2]),
                ..Default::default()
            },
            &[1, 300, 20],
            &[10, 300, 3],
            TILE_BYTES,
        ),
        (
            "1x1, two images",
            ConvAttrs::default(),
            &[2, 37, 15, 15],
            &[20, 37, 1, 1],
            TILE_BYTES,
        ),
        (
            "1x1, K = 300",
            ConvAttrs::default(),
            &[1, 300, 7, 9],
            &[17, 300, 1, 1],
            TILE_BYTES,
        ),
        (
            "grouped, strided, dilated",
            ConvAttrs {
                group: 3,
                strides: Some(vec![2, 2]),
                dilations: Some(vec![2, 2]),
                pads: pads(2, 2),
                ..Default::default()
            },
            &[1, 12, 16, 16],
            &[15, 4, 3, 3],
            TILE_BYTES,
        ),
        (
            "depthwise, unit strides",
            ConvAttrs {
                group: 6,
                pads: pads(1, 2),
                ..Default::default()
            },
            &[2, 6, 13, 35],
            &[12, 1, 3, 3],
            TILE_BYTES,
        ),
        (
            "depthwise, stride 2",
            ConvAttrs {
                group: 6,
                strides: Some(vec![2, 2]),
                pads: pads(1, 2),
                ..Default::default()
            },
            &[2, 6, 13, 35],
            &[12, 1, 3, 3],
            TILE_BYTES,
        ),
        (
            "3-D",
            ConvAttrs {
                pads: pads(1, 3),
                ..Default::default()
            },
            &[1, 3, 5, 6, 7],
            &[4, 3, 2, 3, 2],
            TILE_BYTES,
        ),
    ];
    for (what, attrs, x, w, scratch) in targeted {
        let g = geometry(&attrs, x, w, Some(&[w[0]])).unwrap();
        let inputs = random_inputs(&g, &mut r);
        check_against_reference(what, &g, &inputs, scratch, path, true);
    }
}

#[test]
fn portable_kernels_meet_the_rounding_bound() {
    check_path(KernelPath::Portable);
}

/// Ignored where the building CPU lacks AVX-512F (`build.rs`), which
/// the summary counts; `KernelPath::Avx512` fails it on such a CPU
/// when it runs anyway.
#[test]
#[cfg_attr(no_avx512, ignore = "this CPU has no AVX-512F")]
fn avx512_kernels_meet_the_rounding_bound() {
    check_path(KernelPath::Avx512);
}

/// Ignored, likewise, where the building CPU lacks AVX2 or FMA.
#[test]
#[cfg_attr(no_avx2, ignore = "this CPU has no AVX2 with FMA")]
fn avx2_kernels_meet_the_rounding_bound() {
    check_path(KernelPath::Avx2);
}

/// The direct kernels on every geometry they can run, likewise.
#[test]
#[cfg_attr(no_avx2, ignore = "this CPU has no AVX2 with FMA")]
fn direct_avx2_kernel_meets_the_rounding_bound() {
    check_path(KernelPath::DirectAvx2);
}

#[test]
#[cfg_attr(no_avx512, ignore = "this CPU has no AVX-512F")]
fn direct_avx512_kernel_meets_the_rounding_bound() {
    check_path(KernelPath::DirectAvx512);
}

#[test]
#[cfg_attr(no_avx512, ignore = "this CPU has no AVX-512F")]
fn channel_lane_kernel_meets_the_rounding_bound() {
    check_path(KernelPath::LanesAvx512);
}

#[test]
#[cfg_attr(no_avx2, ignore = "this CPU has no AVX2 with FMA")]
fn channel_lane_avx2_kernel_meets_the_rounding_bound() {
    check_path(KernelPath::LanesAvx2);
}

/// The AVX2 channel-lane write-out fills the planes in passes whose size
/// follows the planes' offsets within 4 KiB; outputs whose planes take
/// passes of 8, 16, 32 and 64 (32x32, 16x16, 8x16, 14x14 and 112x112
/// outputs), blocks of 64 channels and a short one, and two groups and
/// two images, so that passes start inside a block and planes at odd
/// places, are all met within the rounding bound.
#[test]
#[cfg_attr(no_avx2, ignore = "this CPU has no AVX2 with FMA")]
fn avx2_lane_write_out_covers_every_pass_size() {
    use super::direct_lanes::planes_per_pass;
    assert_eq!(
        [
            (32, 32),
            (16, 16),
            (8, 16),
            (14, 14),
            (112, 112),
            (64, 64),
            (56, 56)
        ]
        .map(|(h, w)| planes_per_pass(h * w)),
        [8, 16, 32, 64, 16, 8, 64]
    );
    let mut r = Rng::new(41);
    for (h, w, m, group) in [
        (32, 32, 72, 1),
        (16, 16, 136, 2),
        (8, 16, 64, 1),
        (14, 14, 72, 1),
        (112, 112, 64, 1),
    ] {
        let attrs = ConvAttrs {
            pads: Some(vec![1; 4]),
            group: group as i64,
            ..Default::default()
        };
        let g = geometry(&attrs, &[2, 2 * group, h, w], &[m, 2, 3, 3], Some(&[m])).unwrap();
        let inputs = random_inputs(&g, &mut r);
        let name = format!("{h}x{w}, M {m}, group {group}");
        check_against_reference(&name, &g, &inputs, TILE_BYTES, KernelPath::LanesAvx2, true);
    }
}

/// Depthwise taps that fall in the padding are skipped, not multiplied by
/// zero: an infinite weight leaves the outputs it never reaches finite.
/// (The AVX-512 row kernel multiplies padding zeros, as its contract says.)
#[test]
fn depthwise_padding_taps_are_skipped() {
    let attrs = ConvAttrs {
        group: 2,
        pads: Some(vec![1, 2, 0, 1]),
        ..Default::default()
    };
    let g = geometry(&attrs, &[1, 2, 9, 21], &[2, 1, 3, 3], None).unwrap();
    assert!(g.is_depthwise_2d());
    let x: Vec<f32> = (0..2 * 9 * 21).map(|i| 1.0 + (i % 5) as f32).collect();
    let mut w = vec![0.5f32; 18];
    // Top left tap of the first plane, and bottom right of the second.
    w[0] = f32::INFINITY;
    w[17] = f32::NEG_INFINITY;
    let wide = |v: &[f32]| v.iter().map(|&a| a as f64).collect::<Vec<_>>();
    let want = reference(&g, &wide(&x), &wide(&w), None);
    assert!(want.iter().any(|v| v.is_finite()) && want.iter().any(|v| v.is_infinite()));
    let mut paths = vec![KernelPath::Portable];
    if Isa::Avx2.supported() {
        paths.push(KernelPath::Avx2);
    }
    for path in paths {
        let got = conv_on(&g, &x, &w, None, TILE_BYTES, path, Packs::default());
        for (i, (&a, &b)) in got.iter().zip(&want).enumerate() {
            let same = if b.is_finite() {
                (a as f64 - b).abs() <= 1e-4 * b.abs().max(1.0)
            } else {
                a as f64 == b
            };
            assert!(same, "{path:?} at {i}: {a} vs {b}");
        }
    }
}

/// A Conv with no input channels is valid ONNX and its output is the bias
/// (onnx's reference agrees); the lane kernel once wrote uninitialised sums
/// for it and the im2col path panicked on its empty packed weights. Every
/// path the machine can run, with output channels filling a lane block and
/// not, 1x1 and 3x3, with and without bias.
#[test]
fn no_input_channels_give_the_bias() {
    let mut paths = vec![KernelPath::Auto, KernelPath::Portable];
    if Isa::Avx2.supported() {
        paths.extend([
            KernelPath::Avx2,
            KernelPath::DirectAvx2,
            KernelPath::LanesAvx2,
        ]);
    }
    if Isa::Avx512.supported() {
        paths.extend([
            KernelPath::Avx512,
            KernelPath::DirectAvx512,
            KernelPath::LanesAvx512,
        ]);
    }
    for (m, k, pad) in [(64, 3, 1), (3, 3, 1), (64, 1, 0), (5, 2, 0)] {
        let attrs = ConvAttrs {
            pads: Some(vec![pad; 4]),
            ..Default::default()
        };
        let g = geometry(&attrs, &[2, 0, 6, 5], &[m, 0, k, k], Some(&[m])).unwrap();
        let bias: Vec<f32> = (0..m).map(|c| c as f32 - 1.5).collect();
        for path in paths.iter().copied() {
            for b in [Some(&bias[..]), None] {
                let got = conv_on(&g, &[], &[], b, TILE_BYTES, path, Packs::default());
                let want: Vec<f32> = (0..got.len())
                    .map(|i| b.map_or(0.0, |b| b[i / g.out_size() % m]))
                    .collect();
                assert_eq!(got.len(), 2 * m * g.out_size(), "{path:?} M {m} k {k}");
                assert_eq!(*got, *want, "{path:?} M {m} k {k} bias {}", b.is_some());
            }
        }
    }
}

#[test]
fn unaddressable_extents_are_rejected() {
    for attrs in [
        ConvAttrs {
            pads: Some(vec![i64::MAX, i64::MAX]),
            ..ConvAttrs::default()
        },
        ConvAttrs {
            dilations: Some(vec![i64::MAX]),
            pads: Some(vec![i64::MAX, 0]),
            ..ConvAttrs::default()
        },
    ] {
        let e = geometry(&attrs, &[1, 1, 4], &[1, 1, 3], None).unwrap_err();
        assert!(
            e.to_string()
                .contains("longer than this machine can address"),
            "{e}"
        );
    }
    // Huge but addressable: a stride as long as the padding still works.
    let attrs = ConvAttrs {
        pads: Some(vec![1 << 40, 0]),
        strides: Some(vec![1 << 40]),
        ..ConvAttrs::default()
    };
    let g = geometry(&attrs, &[1, 1, 4], &[1, 1, 1], None).unwrap();
    assert_eq!(g.out_spatial, [2]);
    let y = conv(&g, &[1f32, 2.0, 3.0, 4.0], &[2.0], None, TILE_BYTES);
    assert_eq!(*y, [0.0, 2.0]);
}

#[test]
fn depthwise_scratch_stays_within_the_limit() {
    // Dilation and padding, not the input, make the AVX-512 row kernel's
    // padded copy large; under a small scratch limit the plain kernel runs.
    // (The AVX2 kernel makes no copy: here it runs with no tap inside for
    // most columns, a kernel far wider than the input.)
    let attrs = ConvAttrs {
        dilations: Some(vec![1, 1000]),
        pads: Some(vec![0, 1000, 0, 0]),
        group: 2,
        ..ConvAttrs::default()
    };
    let g = geometry(&attrs, &[1, 2, 4, 4], &[2, 1, 2, 2], None).unwrap();
    assert!(g.is_depthwise_2d());
    assert!(padded_rows_len(&g).unwrap() * 4 > 1024);
    let x: Vec<f64> = (0..32).map(|v| v as f64).collect();
    let w: Vec<f64> = (1..=8).map(|v| v as f64).collect();
    let want = reference(&g, &x, &w, None);
    let (x32, w32): (Vec<f32>, Vec<f32>) = (
        x.iter().map(|&v| v as f32).collect(),
        w.iter().map(|&v| v as f32).collect(),
    );
    for scratch in [1024, 1 << 20] {
        let got = conv(&g, &x32, &w32, None, scratch);
        let got: Vec<f64> = got.iter().map(|&v| v as f64).collect();
        assert_eq!(got, want, "scratch {scratch}");
    }
}

#[test]
fn depthwise_row_buffer_is_rezeroed_for_a_new_row_layout() {
    // The AVX-512 row kernel keeps its padded rows between planes and calls
    // and zeroes them only when the row layout changes. Two layouts of the
    // same buffer length (rows of 34), the second with its input columns
    // further right: the first's values left in the second's padding
    // columns would show as wrong sums near the left border.
    let layouts: [(usize, i64); 2] = [(20, 2), (18, 4)];
    for round in 0..2 {
        for &(iw, left) in &layouts {
            let attrs = ConvAttrs {
                pads: Some(vec![0, left, 0, 0]),
                group: 3,
                ..ConvAttrs::default()
            };
            let g = geometry(&attrs, &[1, 3, 5, iw], &[3, 1, 3, 3], None).unwrap();
            assert!(g.is_depthwise_2d());
            assert_eq!(g.out_spatial, [3, 20]);
            let x: Vec<f64> = (0..3 * 5 * iw).map(|v| 1.0 + (v % 7) as f64).collect();
            let w: Vec<f64> = (0..27).map(|v| 1.0 + (v % 4) as f64).collect();
            let want = reference(&g, &x, &w, None);
            let (x32, w32): (Vec<f32>, Vec<f32>) = (
                x.iter().map(|&v| v as f32).collect(),
                w.iter().map(|&v| v as f32).collect(),
            );
            let got = conv(&g, &x32, &w32, None, TILE_BYTES);
            let got: Vec<f64> = got.iter().map(|&v| v as f64).collect();
            assert_eq!(got, want, "round {round}, input width {iw}");
        }
    }
}

#[test]
fn depthwise_three_wide_rows_meet_the_definition() {
    // The AVX-512 row kernel's path for kernels three wide without column
    // dilation holds up to four output rows and four blocks of 16 in
    // registers: every count of rows left at the bottom (heights 1-9),
    // every count of blocks in the last group and partial last blocks
    // (widths 1-100), tap rows one to five, with row dilation, and
    // padding on every side, against the definition. The values are small
    // integers, so every sum is exact in f32 and must match to the bit.
    for (case, &(h, w, kh, dh, pads)) in [
        (1, 1, 1, 1, [0, 1, 0, 1]),
        (2, 5, 3, 1, [1, 1, 1, 1]),
        (3, 16, 3, 1, [1, 1, 1, 1]),
        (4, 17, 2, 1, [0, 1, 1, 1]),
        (5, 31, 3, 2, [2, 0, 2, 2]),
        (7, 33, 3, 1, [1, 2, 1, 0]),
        (9, 48, 5, 1, [2, 1, 2, 1]),
        (6, 50, 3, 1, [0, 0, 0, 0]),
        (8, 64, 3, 1, [1, 1, 1, 1]),
        (4, 65, 4, 2, [3, 1, 3, 1]),
        (3, 70, 3, 1, [1, 1, 0, 1]),
        (9, 100, 3, 1, [1, 1, 1, 1]),
    ]
    .iter()
    .enumerate()
    {
        let attrs = ConvAttrs {
            pads: Some(pads.to_vec()),
            dilations: Some(vec![dh, 1]),
            group: 2,
            ..ConvAttrs::default()
        };
        let g = geometry(&attrs, &[1, 2, h, w], &[2, 1, kh, 3], Some(&[2])).unwrap();
        assert!(g.is_depthwise_2d());
        let x: Vec<f64> = (0..2 * h * w)
            .map(|v| ((v * 7) % 11) as f64 - 5.0)
            .collect();
        let wt: Vec<f64> = (0..2 * kh * 3)
            .map(|v| ((v * 5) % 7) as f64 - 3.0)
            .collect();
        let b = [0.5, -2.0];
        let want = reference(&g, &x, &wt, Some(&b));
        let f = |v: &[f64]| v.iter().map(|&v| v as f32).collect::<Vec<f32>>();
        let got = conv(&g, &f(&x), &f(&wt), Some(&f(&b)), TILE_BYTES);
        let got: Vec<f64> = got.iter().map(|&v| v as f64).collect();
        assert_eq!(
            got, want,
            "case {case}: {h}x{w}, {kh} tap rows, dilation {dh}"
        );
    }
}

#[test]
fn phase_rows_hold_their_line_and_zeros() {
    // Every row shape the stride-phase copy can meet, against the
    // definition: element j is line[j * stride + phase - pad] where that is
    // on the line, zero elsewhere. The line sits at the image's start, in
    // its middle and at its end, so that whole-vector loads past the line
    // read other values (which must not show) and loads past the image are
    // masked. Distinct values catch a shifted or swapped copy, the NaN
    // sentinel an element left unwritten; AVX-512 rows are checked on CPUs
    // that have it.
    use crate::ops::sgemm::Isa;
    let writers: Vec<Isa> = [Isa::Portable, Isa::Avx2, Isa::Avx512]
        .into_iter()
        .filter(|isa| isa.supported())
        .collect();
    let image: Vec<f32> = (0..120).map(|v| 1.0 + v as f32).collect();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for &isa in &writers {
        for stride in 1..=3 {
            for phase in 0..stride {
                for pad in 0..5 {
                    for il in 0..=40 {
                        for at in [0, 40, image.len() - il] {
                            for len in 0..50 {
                                let mut out = vec![std::mem::MaybeUninit::new(f32::NAN); len];
                                let line = Some(at..at + il);
                                direct::write_line(&mut out, &image, line, stride, phase, pad, isa);
                                // SAFETY: initialised above (NaN) or written.
                                let got: Vec<f32> =
                                    out.iter().map(|v| unsafe { v.assume_init() }).collect();
                                let want: Vec<f32> = (0..len)
                                    .map(|j| match (j * stride + phase).checked_sub(pad) {
                                        Some(i) if i < il => image[at + i],
                                        _ => 0.0,
                                    })
                                    .collect();
                                assert_eq!(
                                    bits(&got),
                                    bits(&want),
                                    "{isa:?}, stride {stride}, phase {phase}, pad {pad}, \
                                     line of {il} at {at}, row of {len}"
                                );
                            }
                        }
                    }
                }
            }
        }
        let mut out = vec![std::mem::MaybeUninit::new(f32::NAN); 37];
        direct::write_line(&mut out, &image, None, 2, 1, 3, isa);
        // SAFETY: initialised above (NaN) or written.
        assert!(out
            .iter()
            .all(|v| unsafe { v.assume_init() }.to_bits() == 0));
    }
}

#[test]
fn tiles_cover_large_outputs() {
    // More output columns than one tile holds, with padding and stride.
    let attrs = ConvAttrs {
        pads: Some(vec![1, 1, 1, 1]),
        strides: Some(vec![1, 2]),
        ..Default::default()
    };
    let g = geometry(&attrs, &[1, 40, 70, 90], &[3, 40, 3, 3], None).unwrap();
    let mut r = Rng::new(7);
    let xs: Vec<f64> = (0..40 * 70 * 90).map(|_| r.signed_unit()).collect();
    let ws: Vec<f64> = (0..3 * 40 * 9).map(|_| r.signed_unit()).collect();
    assert!(g.out_size() > TILE_BYTES / 8 / (40 * 9));
    let want = reference(&g, &xs, &ws, None);
    let got = conv(&g, &xs, &ws, None, TILE_BYTES);
    for (a, b) in got.iter().zip(&want) {
        assert!((a - b).abs() < 1e-9);
    }
    // The f32 path (packed im2col on AVX-512 machines) over many tiles.
    let x32: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
    let w32: Vec<f32> = ws.iter().map(|&v| v as f32).collect();
    let got = conv(&g, &x32, &w32, None, TILE_BYTES);
    for (a, b) in got.iter().zip(&want) {
        assert!((*a as f64 - b).abs() < 1e-3, "{a} vs {b}");
    }
}

fn geo_err(attrs: ConvAttrs, x: &[usize], w: &[usize], b: Option<&[usize]>) -> String {
    geometry(&attrs, x, w, b).unwrap_err().to_string()
}

/// (output size, pad begin, pad end) of a 1-D geometry.
fn one_axis(
    auto_pad: AutoPad,
    stride: i64,
    dilation: i64,
    input: usize,
    kernel: usize,
) -> (usize, usize, usize) {
    let attrs = ConvAttrs {
        auto_pad,
        strides: Some(vec![stride]),
        dilations: Some(vec![dilation]),
        ..Default::default()
    };
    let g = geometry(&attrs, &[1, 1, input], &[1, 1, kernel], None).unwrap();
    (g.out_spatial[0], g.pads_begin[0], g.pads_end[0])
}

#[test]
fn auto_pad_formulas() {
    // in 5, k 3, stride 2: out 3, total pad 2 -> (1, 1)
    assert_eq!(one_axis(AutoPad::SameUpper, 2, 1, 5, 3), (3, 1, 1));
    // in 4, k 4, stride 1: total 3 -> UPPER (1, 2), LOWER (2, 1)
    assert_eq!(one_axis(AutoPad::SameUpper, 1, 1, 4, 4), (4, 1, 2));
    assert_eq!(one_axis(AutoPad::SameLower, 1, 1, 4, 4), (4, 2, 1));
    // stride larger than the kernel: in 7, k 2, stride 4 -> out 2, total max(0, 4+2-7)=0
    assert_eq!(one_axis(AutoPad::SameUpper, 4, 1, 7, 2), (2, 0, 0));
    // dilated kernel: k 3, d 2 -> span 5; VALID on 9 -> 5; SAME_LOWER keeps 9
    assert_eq!(one_axis(AutoPad::Valid, 1, 2, 9, 3), (5, 0, 0));
    assert_eq!(one_axis(AutoPad::SameLower, 1, 2, 9, 3), (9, 2, 2));
}

/// The error for a 1-D input of 5 and a kernel of 3 under `attrs`.
fn err_1d(attrs: ConvAttrs) -> String {
    geo_err(attrs, &[1, 1, 5], &[1, 1, 3], None)
}

#[test]
fn bad_shapes_and_attributes_are_rejected() {
    let d = ConvAttrs::default;
    assert!(geo_err(d(), &[1, 2], &[1, 2], None).contains("input 'X': expected rank 3 or more"));
    assert!(geo_err(d(), &[1, 2, 5], &[1, 2, 3, 3], None)
        .contains("input 'W': expected the rank of X (3)"));
    assert!(
        geo_err(ConvAttrs { group: 2, ..d() }, &[1, 3, 5], &[2, 1, 3], None)
            .contains("X has 3 channels but W.shape[1] * group = 1 * 2 = 2")
    );
    assert!(
        geo_err(ConvAttrs { group: 2, ..d() }, &[1, 2, 5], &[3, 1, 3], None)
            .contains("3 output channels (W.shape[0]) are not divisible by group 2")
    );
    assert!(
        geo_err(d(), &[1, 1, 5], &[2, 1, 3], Some(&[3])).contains("input 'B': expected shape [2]")
    );
    assert!(err_1d(ConvAttrs {
        strides: Some(vec![0]),
        ..d()
    })
    .contains("attribute 'strides': values must be at least 1"));
    assert!(err_1d(ConvAttrs {
        dilations: Some(vec![-1]),
        ..d()
    })
    .contains("attribute 'dilations': values must be at least 1"));
    assert!(err_1d(ConvAttrs {
        strides: Some(vec![1, 1]),
        ..d()
    })
    .contains("attribute 'strides': expected 1 values"));
    assert!(err_1d(ConvAttrs {
        pads: Some(vec![1]),
        ..d()
    })
    .contains("attribute 'pads': expected 2 values"));
    assert!(err_1d(ConvAttrs {
        pads: Some(vec![1, -1]),
        ..d()
    })
    .contains("attribute 'pads': values must not be negative"));
    assert!(err_1d(ConvAttrs {
        pads: Some(vec![0, 0]),
        auto_pad: AutoPad::Valid,
        ..d()
    })
    .contains("attribute 'pads': cannot be combined with auto_pad"));
    assert!(err_1d(ConvAttrs {
        kernel_shape: Some(vec![2]),
        ..d()
    })
    .contains("attribute 'kernel_shape': [2] contradicts W's spatial shape [3]"));
    // A kernel longer than the padded input: an empty output (see geometry).
    let g = geometry(&d(), &[1, 1, 2], &[1, 1, 3], None).unwrap();
    assert_eq!(g.out_spatial, [0]);
    assert!(conv(&g, &[1f32, 2.0], &[1.0, 1.0, 1.0], None, TILE_BYTES).is_empty());
    let dilated = ConvAttrs {
        dilations: Some(vec![3]),
        pads: Some(vec![1, 1]),
        ..d()
    };
    assert_eq!(
        geometry(&dilated, &[1, 1, 2], &[1, 1, 3], None)
            .unwrap()
            .out_spatial,
        [0]
    );
    assert!(
        geo_err(ConvAttrs { group: 0, ..d() }, &[1, 1, 2], &[1, 1, 3], None)
            .contains("attribute 'group': must be at least 1")
    );
}

/// The output positions of a run of tiles' sums, rows of none left out.
fn plan_positions(rows: tile_plan::Rows) -> Vec<usize> {
    match rows {
        tile_plan::Rows::Run { first, count } => (first..first + count).collect(),
        tile_plan::Rows::Listed(r) => r.iter().copied().filter(|&p| p != usize::MAX).collect(),
    }
}

/// A tile plan holds every output position once, at its own base, and
/// its tile runs the taps the position reads: reading X, exactly those
/// inside the input (so none reads padding, and none it needs is left
/// out); over the padded copy, every tap but, with finite weights, those
/// every position of the tile reads in the padding, from the position's
/// place in the grid. A full tile in order marks (with finite weights
/// only) exactly its positions' columns of taps along the last axis that
/// read only padding, and for a 3-wide kernel over a padding of one (and
/// the 7x7 stride-2 layer's kernel on even widths) the AVX-512 kernel has
/// a tile for every pattern. A plan in place reads X as a plan of classes
/// does, except that each tile's mask leaves out exactly its positions'
/// columns of taps that read padding, every mask has an edge tile and a
/// short tile has none. Random geometries of every rank, stride, dilation
/// and padding.
#[test]
fn tile_plans_hold_every_position_and_the_taps_it_reads() {
    let mut r = Rng::new(0x5DEECE66D);
    let (mut exact, mut skipping, mut skipping_in_order, mut edges) = (0, 0, 0, 0);
    let (mut in_place, mut masked_in_place) = (0, 0);
    // Besides the random ones, the patterns the kernel has edge tiles for
    // (flagged): 3-wide kernels over a padding of one along the last
    // axis at every offset of a row to the tiles, in 1-D, 2-D and 3-D,
    // and 7-wide ones at stride 2 over a padding of 3 on inputs of even
    // width, rows 7-11 wide; then others, whose masks in order the plain
    // tiles run (that kernel on rows of 6, or on inputs of odd width).
    let one_padded = (6..=13).map(|w| (vec![1, 4, 5, w], vec![8, 4, 3, 3], 1, 1, true));
    let stem = (12..=23).map(|w| {
        let flagged = w >= 14 && w % 2 == 0;
        (vec![1, 3, 9, w], vec![8, 3, 7, 7], 3, 2, flagged)
    });
    let fixed = one_padded
        .chain(stem)
        .chain([
            (vec![1, 2, 3, 4, 9], vec![4, 2, 1, 3, 3], 1, 1, true),
            (vec![2, 3, 40], vec![4, 3, 3], 1, 1, true),
            (vec![1, 3, 9, 16], vec![4, 3, 3, 3], 1, 2, false),
            (vec![1, 3, 9, 9], vec![4, 3, 5, 3], 1, 1, false),
            (vec![1, 3, 9, 21], vec![4, 3, 7, 7], 3, 2, false),
        ])
        .map(|(x, w, pad, stride, flagged)| {
            let k = x.len() - 2;
            let attrs = ConvAttrs {
                pads: Some(vec![pad; 2 * k]),
                strides: Some(vec![stride; k]),
                ..Default::default()
            };
            (geometry(&attrs, &x, &w, None).unwrap(), flagged)
        });
    let random = std::iter::repeat_with(|| random_geometry(&mut r).map(|g| (g, false))).take(400);
    for (case, (g, has_tiles)) in random.flatten().chain(fixed).enumerate() {
        let layout = direct::Layout::new(&g);
        let d = g.out_spatial.len();
        // (weights finite, plan): in order with infinite weights runs
        // every tap; in order with finite ones leaves out what a tile's
        // positions all read in the padding along the first axis.
        let plans = [
            (
                false,
                Some(tile_plan::TilePlan::in_order(&g, &layout, 6, false)),
            ),
            (
                true,
                Some(tile_plan::TilePlan::in_order(&g, &layout, 6, true)),
            ),
            (true, tile_plan::TilePlan::exact(&g, 6)),
            (
                true,
                tile_plan::TilePlan::in_place(&g, 6, &|mask| {
                    direct_lanes::has_edge_tile(g.kernel[d - 1], mask)
                }),
            ),
        ];
        for (kind, (finite, plan)) in plans.into_iter().enumerate() {
            let Some(plan) = plan else {
                continue;
            };
            if g.out_size() == 0 {
                assert_eq!(plan.len(), 0, "case {case}");
                continue;
            }
            assert_eq!(plan.reads_input, kind >= 2, "case {case}");
            assert_eq!(plan.has_tile_masks(), kind == 3, "case {case}");
            exact += usize::from(kind == 2);
            in_place += usize::from(kind == 3);
            let mut seen = vec![0u32; g.out_size()];
            // The kernel's walk of the tiles' columns, a tile at a time.
            let mut walked = plan.edge_column(0);
            for t in 0..plan.len() {
                assert_eq!(walked, plan.edge_column(t), "case {case} tile {t}");
                walked = plan.next_edge_column(walked);
                let (class, real) = plan.tile(t);
                let taps = &plan.classes[class];
                let positions = plan_positions(plan.rows(t..t + 1));
                assert_eq!(positions.len(), real, "case {case} tile {t}");
                let skips = taps.len() < layout.taps.len();
                skipping += usize::from(skips && plan.reads_input);
                skipping_in_order += usize::from(skips && !plan.reads_input);
                let kw = g.kernel[d - 1];
                // In place, a tile's own mask, which the kernel must have a
                // tile for (a short tile has none).
                let mask = match kind {
                    3 => plan.tile_mask(t),
                    _ => plan.edge_mask(t),
                };
                let whole = real == 6 && (kind == 3 || !plan.reads_input);
                assert!(
                    mask == 0 || (finite && whole),
                    "case {case}, tile {t}: mask {mask:#x} ({g:?})"
                );
                assert!(
                    mask == 0 || (!has_tiles && kind != 3) || direct_lanes::has_edge_tile(kw, mask),
                    "case {case}, tile {t}: no edge tile for {mask:#x} ({g:?})"
                );
                edges += usize::from(mask != 0 && direct_lanes::has_edge_tile(kw, mask));
                masked_in_place += usize::from(mask != 0 && kind == 3);
                for (i, &p) in positions.iter().enumerate() {
                    seen[p] += 1;
                    let mut o = vec![0; d];
                    let mut rest = p;
                    for a in (0..d).rev() {
                        o[a] = rest % g.out_spatial[a];
                        rest /= g.out_spatial[a];
                    }
                    // The kernel columns this position leaves out.
                    let left_out = |c: usize| mask >> (c * 6 + i) & 1 != 0;
                    if whole && finite && (plan.has_edge_columns() || kind == 3) {
                        // Every column that reads only padding here is
                        // marked: along the last axis its input index is
                        // outside (in place, where the tile runs any tap:
                        // a class reading no input needs no mask).
                        let runs_any = kind != 3 || !taps.is_empty();
                        for c in 0..kw {
                            let at = (o[d - 1] * g.strides[d - 1] + c * g.dilations[d - 1]) as i64
                                - g.pads_begin[d - 1] as i64;
                            let outside = at < 0 || at >= g.in_spatial[d - 1] as i64;
                            assert_eq!(
                                left_out(c),
                                outside && runs_any,
                                "case {case}, tile {t}, position {p}, kernel column {c} ({g:?})"
                            );
                        }
                    }
                    let base = plan.bases(t..t + 1)[i];
                    let mut k = vec![0; d];
                    for tap in 0..layout.taps.len() {
                        // The input index the tap reads along each axis.
                        let at: Vec<i64> = (0..d)
                            .map(|a| {
                                (o[a] * g.strides[a] + k[a] * g.dilations[a]) as i64
                                    - g.pads_begin[a] as i64
                            })
                            .collect();
                        let inside = (0..d).all(|a| at[a] >= 0 && at[a] < g.in_spatial[a] as i64);
                        // An edge tile leaves this position's product out.
                        assert!(
                            !left_out(k[d - 1]) || !inside,
                            "case {case}: tile {t} leaves out tap {tap} of position {p}, \
                             which reads the input ({g:?})"
                        );
                        let runs = taps.iter().find(|&&(_, t)| t == tap);
                        // In place the tap runs unless the mask leaves it
                        // out, and reads exactly the input.
                        let runs = runs.filter(|_| kind != 3 || !left_out(k[d - 1]));
                        if plan.reads_input {
                            assert_eq!(
                                runs.is_some(),
                                inside,
                                "case {case}: tile {t}, tap {tap}, position {p} ({g:?})"
                            );
                            if let Some(&(shift, _)) = runs {
                                let flat = (0..d)
                                    .fold(0i64, |acc, a| acc * g.in_spatial[a] as i64 + at[a]);
                                assert_eq!(
                                    base.wrapping_add(shift) as i64,
                                    flat,
                                    "case {case}: tile {t}, tap {tap}"
                                );
                            }
                        } else {
                            // Over the padded copy a tile leaves out only
                            // taps that read padding, and only with
                            // finite weights.
                            assert!(
                                runs.is_some() || (finite && !inside),
                                "case {case}: tap {tap} of position {p} left out of the padded copy"
                            );
                        }
                        for a in (0..d).rev() {
                            k[a] += 1;
                            if k[a] < g.kernel[a] || a == 0 {
                                break;
                            }
                            k[a] = 0;
                        }
                    }
                    if !plan.reads_input {
                        let grid = (0..d).fold(0, |acc, a| acc * layout.q[a] + o[a]);
                        assert_eq!(base, grid, "case {case} tile {t}");
                    }
                }
            }
            assert!(
                seen.iter().all(|&n| n == 1),
                "case {case}, plan {kind}: {seen:?}"
            );
        }
    }
    assert!(
        in_place > 100 && masked_in_place > 40,
        "{in_place} plans in place, {masked_in_place} of their tiles masked"
    );
    assert!(
        exact > 100 && skipping > 100 && skipping_in_order > 100 && edges > 100,
        "{exact} plans read X, {skipping} of their tiles skip taps, \
         {skipping_in_order} tiles in order skip taps, {edges} edge positions"
    );
}

/// The channel-lane kernel paths this machine can run.
fn lane_paths_here() -> Vec<KernelPath> {
    [
        (Isa::Avx512, KernelPath::LanesAvx512),
        (Isa::Avx2, KernelPath::LanesAvx2),
    ]
    .into_iter()
    .filter(|(isa, _)| isa.supported())
    .map(|(_, path)| path)
    .collect()
}

/// Geometries whose channel-lane tiles read X (long reductions), each
/// running only the taps its class reads inside the input, met against the
/// f64 reference on both instruction sets: every rank, unit and larger
/// strides, dilation, uneven padding, padding wide enough that some outputs
/// read no input at all, groups, out channels off the block.
#[test]
fn channel_lane_kernels_reading_x_meet_the_rounding_bound() {
    let mut r = Rng::new(0x2545F4914F6CDD1D);
    // X, W, pads, strides, dilations, group.
    type Case = (
        &'static [usize],
        &'static [usize],
        Vec<i64>,
        Vec<i64>,
        Vec<i64>,
        i64,
    );
    let cases: [Case; 6] = [
        (
            &[1, 128, 14, 13],
            &[16, 128, 3, 3],
            vec![1; 4],
            vec![1, 1],
            vec![1, 1],
            1,
        ),
        (
            &[1, 120, 11, 10],
            &[16, 120, 3, 3],
            vec![2, 0, 1, 3],
            vec![2, 1],
            vec![2, 2],
            1,
        ),
        (
            &[2, 400, 40],
            &[70, 400, 3],
            vec![0, 0],
            vec![2],
            vec![2],
            1,
        ),
        (
            &[1, 40, 6, 7, 8],
            &[16, 40, 3, 3, 3],
            vec![1; 6],
            vec![1; 3],
            vec![1; 3],
            1,
        ),
        (
            &[1, 256, 13, 13],
            &[64, 128, 3, 3],
            vec![1; 4],
            vec![1, 1],
            vec![1, 1],
            2,
        ),
        (
            &[1, 128, 5, 5],
            &[16, 128, 3, 3],
            vec![4; 4],
            vec![1, 1],
            vec![1, 1],
            1,
        ),
    ];

    let paths = lane_paths_here();
    for (i, (x, w, pads, strides, dilations, group)) in cases.into_iter().enumerate() {
        let attrs = ConvAttrs {
            pads: Some(pads),
            strides: Some(strides),
            dilations: Some(dilations),
            group,
            ..Default::default()
        };
        let g = geometry(&attrs, x, w, None).unwrap();
        let plan = direct_lanes::plan_for(&g, &direct::Layout::new(&g), Isa::Avx512, true);
        assert!(plan.reads_input, "case {i} takes the padded copy");
        let inputs = random_inputs(&g, &mut r);
        for &path in &paths {
            for with_bias in [true, false] {
                let what = format!("case {i} read from X");
                check_against_reference(&what, &g, &inputs, TILE_BYTES, path, with_bias);
            }
        }
    }
}

/// A reduction (1024 channels x 9 taps) whose block of weights (2.25 MiB)
/// the channel-lane kernels split into chunks on both instruction sets,
/// each tile carrying its sums from one chunk to the next, met against the
/// f64 reference: tiles reading X (8x8 outputs) and over the padded copy
/// (4x3 outputs, where the border classes would cost more than they save).
#[test]
fn channel_lane_chunks_carry_their_sums_on_both_plans() {
    let block_weights = 1024 * 9 * direct_lanes::BLOCK * 4;
    for isa in [Isa::Avx2, Isa::Avx512] {
        assert!(direct_lanes::chunk_weight_bytes(isa) < block_weights);
    }
    let mut r = Rng::new(0x9E3779B97F4A7C15);
    let paths = lane_paths_here();
    for (x, reads_input) in [(&[1, 1024, 8, 8], true), (&[1, 1024, 4, 3], false)] {
        let attrs = ConvAttrs {
            pads: Some(vec![1; 4]),
            ..Default::default()
        };
        let g = geometry(&attrs, x, &[16, 1024, 3, 3], None).unwrap();
        let plan = direct_lanes::plan_for(&g, &direct::Layout::new(&g), Isa::Avx512, true);
        assert_eq!(plan.reads_input, reads_input, "{x:?}");
        let inputs = random_inputs(&g, &mut r);
        for &path in &paths {
            for with_bias in [true, false] {
                let what = format!("{x:?} in chunks");
                check_against_reference(&what, &g, &inputs, TILE_BYTES, path, with_bias);
            }
        }
    }
}

/// An infinite weight times a padding zero is NaN, so with one the
/// channel-lane kernels skip no tap (their tiles run over the padded
/// copy): the border outputs it reaches through the padding are NaN, as
/// the im2col path gives, and the interior ones infinite.
#[test]
fn channel_lane_kernels_multiply_padding_when_a_weight_is_infinite() {
    let attrs = ConvAttrs {
        pads: Some(vec![1, 1, 1, 1]),
        ..Default::default()
    };
    let g = geometry(&attrs, &[1, 128, 6, 6], &[64, 128, 3, 3], None).unwrap();
    let x = vec![1.0f32; 128 * 36];
    let mut w = vec![0.01f32; 64 * 128 * 9];
    // Output channel 0, input channel 0, the top left tap.
    w[0] = f32::INFINITY;
    let mut paths = vec![KernelPath::Portable];
    for (path, isa) in [
        (KernelPath::LanesAvx512, Isa::Avx512),
        (KernelPath::LanesAvx2, Isa::Avx2),
    ] {
        if isa.supported() {
            paths.push(path);
        }
    }
    for path in paths {
        let got = conv_on(&g, &x, &w, None, TILE_BYTES, path, Packs::default());
        for (p, &v) in got[..36].iter().enumerate() {
            let (oy, ox) = (p / 6, p % 6);
            if oy == 0 || ox == 0 {
                assert!(v.is_nan(), "{path:?}: position {p} gave {v}, not NaN");
            } else {
                assert_eq!(v, f32::INFINITY, "{path:?}: position {p}");
            }
        }
        assert!(got[36..].iter().all(|v| v.is_finite()), "{path:?}");
    }
}

/// One plan cache serving calls of different shapes in turn (a prepared
/// node run on inputs of several sizes) gives each call its own plan: the
/// same bits as calls without a cache.
#[test]
fn a_plan_cache_makes_a_new_plan_for_new_shapes() {
    let paths = lane_paths_here();
    let mut r = Rng::new(0xD1B54A32D192ED03);
    let attrs = ConvAttrs {
        pads: Some(vec![1; 4]),
        ..Default::default()
    };
    let shapes: [&[usize]; 3] = [&[1, 128, 9, 7], &[1, 128, 5, 11], &[1, 128, 9, 7]];
    let w: Vec<f32> = (0..16 * 128 * 9).map(|_| r.signed_unit() as f32).collect();
    for &path in &paths {
        let lanes = LaneWeights::in_spans(16, 1, 128 * 9, &w, direct_lanes::span(path.isa()));
        let plans = direct_lanes::PlanCache::default();
        for x in shapes {
            let g = geometry(&attrs, x, &[16, 128, 3, 3], None).unwrap();
            let xs: Vec<f32> = (0..g.in_channels * g.in_size())
                .map(|_| r.signed_unit() as f32)
                .collect();
            let packs = |plans| Packs {
                lanes: Some(&lanes),
                plans,
                ..Packs::default()
            };
            let cached = conv_on(&g, &xs, &w, None, TILE_BYTES, path, packs(Some(&plans)));
            let fresh = conv_on(&g, &xs, &w, None, TILE_BYTES, path, packs(None));
            assert!(same_bits(&cached, &fresh), "{path:?} {x:?}");
        }
    }
}

/// The channel-lane kernels' numerical contract, to the bit: each output
/// is its bias and then one FMA per (input channel, tap) pair, channel by
/// channel and each channel's taps in row-major order (the products with
/// padding zeros add nothing to a non-zero sum), so an f32 FMA reference
/// in that order gives every output's exact bits. The shapes cover the
/// AVX2 tile's unrolled form (`direct_lanes::TapForm`): 3 x 3 unit-stride
/// over the padded copy, over X unpadded, from classes reading X and in
/// chunks, output channels off the tile's span; and shapes that take the
/// loop of steps: 7 x 7 stride 2 over the phase-split copy, a 3 x 3
/// stride 2, dilation, a 5 x 5 kernel, groups, and a 5 x 5 kernel read
/// from X in classes whose interior's tiles run every tap in chunks (1024
/// channels: more than one chunk with AVX2 where L2 is below 8 MiB, with
/// AVX-512 always), each chunk's tiles starting from the last one's sums.
#[test]
fn channel_lane_kernels_accumulate_in_their_contract_order() {
    let mut r = Rng::new(0x6A09E667F3BCC909);
    // X, W, pads, strides, dilations, group.
    type Case = (&'static [usize], &'static [usize], i64, i64, i64, i64);
    let cases: [Case; 23] = [
        (&[2, 16, 9, 10], &[40, 16, 3, 3], 1, 1, 1, 1),
        // Tiles whose first and last columns read padding with columns of
        // taps: 3-wide kernels over a padding of one, every pattern of the
        // AVX-512 edge tiles, reading X in place (5x6) and over the copy
        // (8x7), and the 7x7 stride-2 layer over the copy (rows of 11 or
        // 7, whose one-row classes find no place for a short tile away
        // from the padding) and in place (20x20, below).
        (&[1, 8, 5, 6], &[16, 8, 3, 3], 1, 1, 1, 1),
        (&[1, 24, 8, 7], &[64, 24, 3, 3], 1, 1, 1, 1),
        (&[1, 3, 20, 22], &[16, 3, 7, 7], 3, 2, 1, 1),
        (&[1, 3, 14, 14], &[64, 3, 7, 7], 3, 2, 1, 1),
        (&[1, 120, 12, 11], &[40, 120, 3, 3], 1, 1, 1, 1),
        (&[1, 3, 20, 21], &[16, 3, 7, 7], 3, 2, 1, 1),
        (&[1, 8, 15, 15], &[40, 8, 7, 7], 3, 2, 1, 1),
        (&[1, 8, 6, 7], &[8, 8, 3, 3], 0, 1, 1, 1),
        (&[1, 128, 7, 6], &[24, 128, 3, 3], 1, 1, 1, 1),
        (&[1, 1024, 4, 3], &[16, 1024, 3, 3], 1, 1, 1, 1),
        (&[1, 16, 11, 10], &[16, 16, 3, 3], 1, 2, 1, 1),
        (&[1, 16, 9, 9], &[16, 16, 3, 3], 2, 1, 2, 1),
        (&[1, 8, 9, 9], &[16, 8, 5, 5], 2, 1, 1, 1),
        (&[1, 32, 8, 8], &[32, 16, 3, 3], 1, 1, 1, 2),
        (&[1, 1024, 10, 10], &[8, 1024, 5, 5], 2, 1, 1, 1),
        (&[1, 3, 40, 40], &[64, 3, 7, 7], 3, 2, 1, 1),
        // The row tiles (`direct_rows.rs`): 3x3 over a padding of one at
        // stride 1, rows of 47 (the last tile overlapping the one before
        // it by one position), 40 channels (a partial block of 16); at
        // stride 2 in two groups of two images; the 7x7 stride-2 layer on
        // 30x30 (rows of 15, too short) reads X in place with the
        // channel-lane tiles, and on 38x64 (rows of 32) takes row tiles.
        (&[1, 16, 9, 47], &[40, 16, 3, 3], 1, 1, 1, 1),
        (&[2, 8, 7, 64], &[16, 4, 3, 3], 1, 2, 1, 2),
        (&[1, 3, 30, 30], &[64, 3, 7, 7], 3, 2, 1, 1),
        (&[1, 3, 38, 64], &[24, 3, 7, 7], 3, 2, 1, 1),
        // 7x7 at stride 1 over the copy (a padding of 3; the AVX2 tile's
        // 7-wide rows) and unpadded.
        (&[1, 4, 12, 13], &[32, 4, 7, 7], 3, 1, 1, 1),
        (&[1, 4, 12, 13], &[32, 4, 7, 7], 0, 1, 1, 1),
    ];
    let paths = lane_paths_here();
    assert!(!paths.is_empty() || !Isa::Avx2.supported());
    for (i, (x, w, pad, stride, dilation, group)) in cases.into_iter().enumerate() {
        let attrs = ConvAttrs {
            pads: Some(vec![pad; 4]),
            strides: Some(vec![stride; 2]),
            dilations: Some(vec![dilation; 2]),
            group,
            ..Default::default()
        };
        let g = geometry(&attrs, x, w, None).unwrap();
        if (1..=4).contains(&i) {
            // 5x6 outputs read X in place, their tiles' masks run by edge
            // tiles; 8x7 ones keep the copy (a one-row class of 7 has no
            // place for its short tile away from the padding), as do the
            // 7x7 stride-2 layer's 10x11 and 7x7 (one-row classes of 11
            // and 7), whose tiles in order run the edge tiles.
            let plan = direct_lanes::plan_for(&g, &direct::Layout::new(&g), Isa::Avx512, true);
            let masked = (0..plan.len()).filter(|&t| plan.tile_mask(t) != 0).count();
            match i {
                1 => assert!(plan.reads_input && masked >= 5, "case {i}: {masked}"),
                _ => assert!(!plan.reads_input && plan.has_edge_columns(), "case {i}"),
            }
        }
        if i == 16 || i == 19 {
            let plan = direct_lanes::plan_for(&g, &direct::Layout::new(&g), Isa::Avx512, true);
            let masked = (0..plan.len()).filter(|&t| plan.tile_mask(t) != 0).count();
            assert!(plan.reads_input && masked >= 20, "case {i}: {masked}");
        }
        // Which shapes the row tiles take (on AVX-512, finite weights).
        let rows = direct_rows::tiles_for(&g, Isa::Avx512, true).is_some();
        assert_eq!(rows, [17, 18, 20].contains(&i), "case {i}: row tiles");
        if i == 15 {
            // Classes reading X, whose interior runs every tap.
            let plan = direct_lanes::plan_for(&g, &direct::Layout::new(&g), Isa::Avx2, true);
            assert!(
                plan.reads_input && plan.classes.iter().any(|c| c.len() == 25),
                "case {i}"
            );
        }
        if i >= 21 {
            // The AVX2 tile runs their kernel rows as 7-wide rows.
            let plan = direct_lanes::plan_for(&g, &direct::Layout::new(&g), Isa::Avx2, true);
            assert!(
                plan.classes.iter().all(|c| matches!(
                    direct_lanes::TapForm::of(c, 49),
                    direct_lanes::TapForm::Rows7 { .. }
                )),
                "case {i}"
            );
        }
        if i == 5 {
            // Tiles cut from classes reading X, the edges' among them.
            let plan = direct_lanes::plan_for(&g, &direct::Layout::new(&g), Isa::Avx2, true);
            let edge = |c: &tile_plan::Taps| {
                matches!(
                    direct_lanes::TapForm::of(c, 9),
                    direct_lanes::TapForm::Block { rows: 2, .. }
                )
            };
            assert!(
                plan.reads_input && plan.classes.iter().any(edge),
                "case {i}"
            );
        }
        let narrow = |v: Vec<f64>| v.into_iter().map(|a| a as f32).collect::<Vec<_>>();
        let [xs, ws, bs] = random_inputs(&g, &mut r).map(narrow);
        let want = reference_with(&g, &xs, &ws, Some(&bs), |acc, x, w| x.mul_add(w, acc));
        for &path in &paths {
            let got = conv_on(&g, &xs, &ws, Some(&bs), TILE_BYTES, path, Packs::default());
            let first = (0..want.len()).find(|&k| got[k].to_bits() != want[k].to_bits());
            assert!(
                first.is_none(),
                "case {i}, {path:?}: output {} is {} where the contract's order gives {} ({g:?})",
                first.unwrap_or(0),
                got[first.unwrap_or(0)],
                want[first.unwrap_or(0)]
            );
        }
    }
}

/// Which shapes' tiles take the unrolled form of the AVX2 tile: blocks of
/// a 3 x 3 kernel, over the padded copy at unit stride (the whole kernel,
/// and the first and last output rows' 2 x 3), in X at any stride (the
/// interior's and the edges', in plans of classes and plans in place);
/// not the corners, dilated 3 x 3 kernels, nor other kernels.
#[test]
fn unrolled_tap_forms_fit_the_shapes_they_are_for() {
    use direct_lanes::TapForm;
    let form = |x: &[usize], w: &[usize], pad: i64, stride: i64, dilation: i64, finite: bool| {
        let attrs = ConvAttrs {
            pads: Some(vec![pad; 4]),
            strides: Some(vec![stride; 2]),
            dilations: Some(vec![dilation; 2]),
            ..Default::default()
        };
        let g = geometry(&attrs, x, w, None).unwrap();
        let plan = direct_lanes::plan_for(&g, &direct::Layout::new(&g), Isa::Avx2, finite);
        let forms: Vec<TapForm> = plan
            .classes
            .iter()
            .map(|c| TapForm::of(c, g.kernel_size()))
            .collect();
        (plan.reads_input, forms)
    };
    let block = |first, tap0, row, rows| TapForm::Block {
        first,
        tap0,
        row,
        rows,
        cols: 3,
    };
    // With finite weights C64 56x56 reads X in place, its edge tiles
    // forms of these blocks: the first output row reads kernel rows 1-2
    // only (a 2 x 3 block one input row down), the interior all three,
    // the last rows 0-1.
    let (reads_x, forms) = form(&[1, 64, 56, 56], &[64, 64, 3, 3], 1, 1, 1, true);
    assert!(reads_x);
    assert_eq!(
        forms,
        [block(56, 3, 56, 2), block(0, 0, 56, 3), block(0, 0, 56, 2)]
    );
    // With a weight that is not finite, every tap over the padded copy
    // (rows of 58).
    let (reads_x, forms) = form(&[1, 64, 56, 56], &[64, 64, 3, 3], 1, 1, 1, false);
    assert!(!reads_x);
    assert_eq!(forms, [block(0, 0, 58, 3)]);
    // Rows of 3 (a tile whose row starts and ends in it, an edge form the
    // AVX2 tile lacks) keep the copy, where the first and last output
    // rows' tiles run 2 x 3 blocks too.
    let (reads_x, forms) = form(&[1, 64, 56, 3], &[64, 64, 3, 3], 1, 1, 1, true);
    assert!(!reads_x);
    assert_eq!(
        forms,
        [block(0, 0, 5, 3), block(5, 3, 5, 2), block(0, 0, 5, 2)]
    );
    // At stride 2 in X, blocks too (the stride is in the positions' bases).
    let (reads_x, forms) = form(&[1, 16, 20, 20], &[16, 16, 3, 3], 1, 2, 1, true);
    assert!(reads_x);
    assert_eq!(forms, [block(20, 3, 20, 2), block(0, 0, 20, 3)]);
    for (w, stride, dilation) in [(3, 1, 2), (7, 2, 1), (5, 1, 1)] {
        let (_, forms) = form(&[1, 16, 20, 20], &[16, 16, w, w], 1, stride, dilation, true);
        assert!(forms.iter().all(|f| *f == TapForm::Steps), "{forms:?}");
    }
    // C256 14x14 (a long reduction) reads X in place, as C64.
    let (reads_x, forms) = form(&[1, 256, 14, 14], &[256, 256, 3, 3], 1, 1, 1, true);
    assert!(reads_x);
    assert_eq!(
        forms,
        [block(14, 3, 14, 2), block(0, 0, 14, 3), block(0, 0, 14, 2)]
    );
    // With rows of 3 (no plan in place), the long reduction's classes: the
    // interior and the four edges are blocks of taps; the four corners,
    // one position each, take steps.
    let (reads_x, forms) = form(&[1, 256, 14, 3], &[256, 256, 3, 3], 1, 1, 1, true);
    assert!(reads_x);
    let mut blocks: Vec<(usize, usize, usize)> = forms
        .iter()
        .filter_map(|f| match *f {
            TapForm::Block {
                tap0, rows, cols, ..
            } => Some((tap0, rows, cols)),
            _ => None,
        })
        .collect();
    blocks.sort();
    let want = [(0, 2, 3), (0, 3, 2), (0, 3, 3), (1, 3, 2), (3, 2, 3)];
    assert_eq!(blocks, want, "{forms:?}");
    assert_eq!(forms.len(), 9, "{forms:?}");
    assert!(forms.contains(&block(0, 0, 3, 3)));
}

/// Edge masks are looked up only for kernels an edge tile exists for: the
/// 3-wide ones and the 7x7 stride-2 layer's, not 5-wide ones (whose tiles
/// would look up a mask per tile for nothing), nor widths past what a
/// mask holds.
#[test]
fn edge_masks_are_looked_up_only_where_an_edge_tile_exists() {
    assert!(direct_lanes::edge_tiles_apply(3, 9));
    assert!(direct_lanes::edge_tiles_apply(3, 27));
    assert!(direct_lanes::edge_tiles_apply(7, 49));
    assert!(!direct_lanes::edge_tiles_apply(7, 48));
    assert!(!direct_lanes::edge_tiles_apply(5, 25));
    assert!(!direct_lanes::edge_tiles_apply(1, 1));
    assert!(!direct_lanes::edge_tiles_apply(8, 64));
    assert!(!direct_lanes::edge_tiles_apply(3, 8));
}

/// The AVX2 plans in place for 3 x 3 kernels over a padding of one and
/// the 7x7 stride-2 layer's kernel over a padding of 3: every
/// edge form of the AVX2 tile (`EDGE_MASKS_AVX2`) is met by some row
/// width and stride, each plan reads X with its masks, and the kernel's
/// sums equal the contract's order bit for bit (an f32 FMA reference that
/// leaves out the padding's products) on the AVX2 path.
#[test]
fn avx2_edge_forms_meet_the_contract_order() {
    let mut r = Rng::new(0x3C6EF372FE94F82B);
    let mut seen = std::collections::BTreeSet::new();
    // X's height and width, the stride, output channels, groups, the
    // kernel's size (3 over a padding of one, 7 over a padding of 3).
    let cases: [(usize, usize, i64, usize, i64, usize); 11] = [
        (4, 6, 1, 32, 1, 3),
        (5, 7, 1, 40, 1, 3),
        (3, 8, 1, 64, 2, 3),
        (6, 10, 1, 16, 1, 3),
        (7, 8, 2, 32, 1, 3),
        (6, 10, 2, 24, 1, 3),
        (9, 14, 2, 64, 2, 3),
        (2, 11, 1, 32, 1, 3),
        // The 7x7 stride-2 layer: rows of 10 and 8 outputs.
        (20, 20, 2, 64, 1, 7),
        (9, 16, 2, 24, 1, 7),
        (12, 20, 2, 32, 2, 7),
    ];
    for (i, (h, w, stride, m, group, k)) in cases.into_iter().enumerate() {
        let pad = (k / 2) as i64;
        let attrs = ConvAttrs {
            pads: Some(vec![pad; 4]),
            strides: Some(vec![stride; 2]),
            group,
            ..Default::default()
        };
        let cg = 1 + i % 4;
        let g = geometry(
            &attrs,
            &[1 + i % 2, cg * group as usize, h, w],
            &[m, cg, k, k],
            None,
        )
        .unwrap();
        let plan = direct_lanes::plan_for(&g, &direct::Layout::new(&g), Isa::Avx2, true);
        assert!(plan.reads_input && plan.has_tile_masks(), "case {i}: {g:?}");
        seen.extend(
            (0..plan.len())
                .map(|t| (k, plan.tile_mask(t)))
                .filter(|&(_, m)| m != 0),
        );
        if !Isa::Avx2.supported() {
            continue;
        }
        let narrow = |v: Vec<f64>| v.into_iter().map(|a| a as f32).collect::<Vec<_>>();
        let [xs, ws, bs] = random_inputs(&g, &mut r).map(narrow);
        let want = reference_with(&g, &xs, &ws, Some(&bs), |acc, x, w| x.mul_add(w, acc));
        let path = KernelPath::LanesAvx2;
        let got = conv_on(&g, &xs, &ws, Some(&bs), TILE_BYTES, path, Packs::default());
        let first = (0..want.len()).find(|&k| got[k].to_bits() != want[k].to_bits());
        assert!(
            first.is_none(),
            "case {i}: output {} is {} where the contract's order gives {} ({g:?})",
            first.unwrap_or(0),
            got[first.unwrap_or(0)],
            want[first.unwrap_or(0)]
        );
    }
    let forms: std::collections::BTreeSet<(usize, u64)> = direct_lanes::EDGE_MASKS_AVX2.into();
    assert_eq!(seen, forms, "the edge forms the cases met");
}

/// The row tiles take short 2-D reductions on AVX-512 with finite weights
/// whose row ends they have patterns for and whose rows their last tile
/// covers with few positions computed twice; the channel-lane tiles take
/// the rest.
#[test]
fn row_tiles_take_the_shapes_they_pay_for() {
    let takes = |x: &[usize], w: &[usize], pad: i64, stride: i64, dilation: i64| {
        let k = x.len() - 2;
        let attrs = ConvAttrs {
            pads: Some(vec![pad; 2 * k]),
            strides: Some(vec![stride; k]),
            dilations: Some(vec![dilation; k]),
            ..Default::default()
        };
        let g = geometry(&attrs, x, w, None).unwrap();
        direct_rows::tiles_for(&g, Isa::Avx512, true).is_some()
    };
    // The 7x7 stride-2 layer on 224x224 (rows of 112), 3x3 layers on rows
    // of 64 and 112, at strides 1 and 2.
    assert!(takes(&[1, 3, 224, 224], &[64, 3, 7, 7], 3, 2, 1));
    assert!(takes(&[1, 16, 64, 64], &[64, 16, 3, 3], 1, 1, 1));
    assert!(takes(&[1, 3, 224, 224], &[64, 3, 3, 3], 1, 2, 1));
    // Rows of 115 and 56: the last tile would compute 13 and 8 again.
    assert!(!takes(&[1, 3, 230, 230], &[64, 3, 7, 7], 3, 2, 1));
    assert!(!takes(&[1, 16, 56, 56], &[64, 16, 3, 3], 1, 1, 1));
    // Reductions past 256 (C64 56x56 3x3: 576).
    assert!(!takes(&[1, 64, 64, 64], &[64, 64, 3, 3], 1, 1, 1));
    // Row ends without a pattern: 5x5, a dilated 3x3, an odd input width
    // for the 7x7 stride-2 layer; rows of fewer than 20; 1-D and 3-D.
    assert!(!takes(&[1, 4, 64, 64], &[16, 4, 5, 5], 2, 1, 1));
    assert!(!takes(&[1, 4, 64, 64], &[16, 4, 3, 3], 1, 1, 2));
    assert!(!takes(&[1, 3, 223, 223], &[64, 3, 7, 7], 3, 2, 1));
    assert!(!takes(&[1, 16, 64, 19], &[64, 16, 3, 3], 1, 1, 1));
    assert!(!takes(&[1, 16, 64], &[64, 16, 3], 1, 1, 1));
    assert!(!takes(&[1, 4, 8, 64, 64], &[16, 4, 3, 3, 3], 1, 1, 1));
    // Not on AVX2, and not with a weight that is not finite.
    let attrs = ConvAttrs {
        pads: Some(vec![3; 4]),
        strides: Some(vec![2; 2]),
        ..Default::default()
    };
    let g = geometry(&attrs, &[1, 3, 224, 224], &[64, 3, 7, 7], None).unwrap();
    assert!(direct_rows::tiles_for(&g, Isa::Avx2, true).is_none());
    assert!(direct_rows::tiles_for(&g, Isa::Avx512, false).is_none());
}

/// Random shapes in the row tiles' and the plans in place's domain (the
/// 7x7 stride-2 kernel over a padding of 3 on even widths, 3x3 over a
/// padding of one at strides 1 and 2; few input channels; any output
/// channels, groups and images, with and without biases), met against
/// the f64 reference within the rounding bound on every channel-lane
/// path here. Each draw is checked to take the kernel it was drawn for.
#[test]
fn row_tiles_and_plans_in_place_meet_the_rounding_bound() {
    let mut r = Rng::new(0x853C49E6748FEA9B);
    let paths = lane_paths_here();
    let (mut rows, mut in_place) = (0, 0);
    for case in 0..24 {
        let pick = |r: &mut Rng, m: usize| r.below(m as u64) as usize;
        let (k, stride, pad) = [(7, 2, 3), (3, 1, 1), (3, 2, 1)][case % 3];
        let group = 1 + pick(&mut r, 2);
        let cg = 1 + pick(&mut r, if k == 7 { 4 } else { 12 });
        let mg = 1 + pick(&mut r, 70);
        // Output rows of 32 or 64 (row tiles) or 9-15 (in place only);
        // even input widths, as the 7x7 layer's patterns need.
        let out_w = match case % 2 {
            0 => [32, 64][pick(&mut r, 2)],
            _ => 9 + pick(&mut r, 7),
        };
        let in_w = match stride {
            1 => out_w,
            _ => 2 * out_w,
        };
        let in_h = 4 + pick(&mut r, 12);
        let batch = 1 + pick(&mut r, 2);
        let attrs = ConvAttrs {
            pads: Some(vec![pad; 4]),
            strides: Some(vec![stride; 2]),
            group: group as i64,
            ..Default::default()
        };
        let x = [batch, cg * group, in_h, in_w];
        let w = [mg * group, cg, k, k];
        let g = geometry(&attrs, &x, &w, None).unwrap();
        let takes_rows = direct_rows::tiles_for(&g, Isa::Avx512, true).is_some();
        let plan = direct_lanes::plan_for(&g, &direct::Layout::new(&g), Isa::Avx512, true);
        assert_eq!(takes_rows, case % 2 == 0, "case {case}: row tiles ({g:?})");
        rows += usize::from(takes_rows);
        in_place += usize::from(!takes_rows && plan.has_tile_masks());
        let inputs = random_inputs(&g, &mut r);
        for &path in &paths {
            let what = format!("case {case}");
            check_against_reference(&what, &g, &inputs, TILE_BYTES, path, case % 4 < 2);
        }
    }
    assert!(
        rows == 12 && in_place >= 6,
        "{rows} on row tiles, {in_place} in place"
    );
}

/// An AVX2 plan in place whose classes are not all unrolled blocks (an
/// output of one row: one kernel row of a 3 x 3 kernel) gives way to the
/// plan there would be without edge tiles: the classes for a long
/// reduction, the copy for a short one; both meet the contract's order.
#[test]
fn avx2_plans_without_blocks_fall_back_as_without_edge_tiles() {
    let mut r = Rng::new(0x510E527FADE682D1);
    for (c, long) in [(128, true), (8, false)] {
        let attrs = ConvAttrs {
            pads: Some(vec![1; 4]),
            ..Default::default()
        };
        let g = geometry(&attrs, &[1, c, 1, 10], &[32, c, 3, 3], None).unwrap();
        let plan = direct_lanes::plan_for(&g, &direct::Layout::new(&g), Isa::Avx2, true);
        assert_eq!(plan.reads_input, long, "C{c}");
        assert!(!plan.has_tile_masks(), "C{c}");
        if !Isa::Avx2.supported() {
            continue;
        }
        let narrow = |v: Vec<f64>| v.into_iter().map(|a| a as f32).collect::<Vec<_>>();
        let [xs, ws, bs] = random_inputs(&g, &mut r).map(narrow);
        let want = reference_with(&g, &xs, &ws, Some(&bs), |acc, x, w| x.mul_add(w, acc));
        let path = KernelPath::LanesAvx2;
        let got = conv_on(&g, &xs, &ws, Some(&bs), TILE_BYTES, path, Packs::default());
        let same = got
            .iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(
            same,
            "C{c}: the AVX2 path differs from the contract's order"
        );
    }
}
