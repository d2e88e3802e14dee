//! Smaller variants of a case, tried in order while the disagreement holds.

use super::gen::{Case, CcpCase, ConvCase, PadCase};

/// Candidate simplifications of `case`, smallest steps last so that the big
/// ones (dropping an axis, halving) are tried first.
pub fn candidates(case: &Case) -> Vec<Case> {
    match case {
        Case::Pad(c) => pad(c).into_iter().map(Case::Pad).collect(),
        Case::Conv(c) => conv(c).into_iter().map(Case::Conv).collect(),
        Case::Ccp(c) => ccp(c).into_iter().map(Case::Ccp).collect(),
    }
}

fn pad(c: &PadCase) -> Vec<PadCase> {
    let mut out = Vec::new();
    let rank = c.shape.len();
    // Without `axes`: pads for every axis.
    if let Some(axes) = &c.axes {
        let n = axes.len();
        let mut full = vec![0i64; 2 * rank];
        for (i, &a) in axes.iter().enumerate() {
            let a = if a < 0 { a + rank as i64 } else { a } as usize;
            full[a] = c.pads[i];
            full[a + rank] = c.pads[i + n];
        }
        out.push(PadCase {
            axes: None,
            pads: full,
            ..c.clone()
        });
    }
    // Drop an axis (only without `axes`, where pads map one to one).
    if c.axes.is_none() && rank > 1 {
        for a in 0..rank {
            let mut d = c.clone();
            d.shape.remove(a);
            d.pads.remove(a + rank);
            d.pads.remove(a);
            out.push(d);
        }
    }
    if c.value.is_some() {
        out.push(PadCase {
            value: None,
            ..c.clone()
        });
    }
    for i in 0..c.pads.len() {
        let p = c.pads[i];
        if p != 0 {
            let mut d = c.clone();
            d.pads[i] = p / 2;
            out.push(d);
            let mut d = c.clone();
            d.pads[i] = p - p.signum();
            out.push(d);
        }
    }
    for a in 0..rank {
        if c.shape[a] > 1 {
            let mut d = c.clone();
            d.shape[a] -= 1;
            out.push(d);
        }
    }
    out
}

fn conv(c: &ConvCase) -> Vec<ConvCase> {
    let mut out = Vec::new();
    if c.batch > 1 {
        out.push(ConvCase {
            batch: 1,
            ..c.clone()
        });
    }
    if c.bias {
        out.push(ConvCase {
            bias: false,
            ..c.clone()
        });
    }
    if c.group > 1 {
        out.push(ConvCase {
            group: 1,
            ..c.clone()
        });
    }
    if c.in_per_group > 1 {
        out.push(ConvCase {
            in_per_group: c.in_per_group - 1,
            ..c.clone()
        });
    }
    if c.out_per_group > 1 {
        out.push(ConvCase {
            out_per_group: c.out_per_group - 1,
            ..c.clone()
        });
    }
    let rank = c.spatial.len();
    if rank > 1 {
        for a in 0..rank {
            let mut d = c.clone();
            for v in [
                &mut d.spatial,
                &mut d.kernel,
                &mut d.strides,
                &mut d.dilations,
            ] {
                v.remove(a);
            }
            if let Some(p) = &mut d.pads {
                p.remove(a + rank);
                p.remove(a);
            }
            out.push(d);
        }
    }
    for a in 0..rank {
        for field in 0..4 {
            let mut d = c.clone();
            let v = match field {
                0 => &mut d.spatial[a],
                1 => &mut d.kernel[a],
                2 => &mut d.strides[a],
                _ => &mut d.dilations[a],
            };
            if *v > 1 {
                *v -= 1;
                out.push(d);
            }
        }
    }
    if let Some(p) = &c.pads {
        for i in 0..p.len() {
            if p[i] > 0 {
                let mut d = c.clone();
                if let Some(q) = &mut d.pads {
                    q[i] -= 1;
                }
                out.push(d);
            }
        }
    }
    out
}

fn ccp(c: &CcpCase) -> Vec<CcpCase> {
    let mut out = Vec::new();
    let rank = c.shape.len();
    if c.axes.is_none() && rank > 1 {
        for a in 0..rank {
            let mut d = c.clone();
            d.shape.remove(a);
            d.targets.remove(a);
            out.push(d);
        }
    }
    for a in 0..rank {
        if c.shape[a] > 1 {
            let mut d = c.clone();
            d.shape[a] -= 1;
            out.push(d);
        }
    }
    for i in 0..c.targets.len() {
        if c.targets[i] > 0 {
            let mut d = c.clone();
            d.targets[i] -= 1;
            out.push(d);
        }
    }
    out
}
