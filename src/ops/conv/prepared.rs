//! What Conv does once per model, when its weights are constant (an
//! initializer, as in every exported network): the work that depends on W
//! alone moves out of every run.

use super::*;
use crate::ops::sgemm::Isa;
use crate::ops::NodeState;

/// A Conv node's prepared weights.
pub(crate) struct Prepared {
    /// f16 and bf16 weights widened to f32 (the type they are computed in);
    /// empty for the other types, which the kernels read as they are.
    pub widened: Vec<f32>,
    /// The f32 (or widened) weights packed for our GEMM on this CPU.
    pub packed: Option<PackedWeights>,
    /// The same for the direct kernel, when the run may take it.
    pub direct: Option<DirectWeights>,
    /// The same for the channel-lane direct kernel.
    pub lanes: Option<LaneWeights>,
    /// The channel-lane kernel's tile plan for the last input shape.
    pub plans: super::direct_lanes::PlanCache,
}

/// Prepares a node whose W is constant; declines otherwise. Nothing here is
/// validated: the run checks every input and attribute as it would without
/// preparation, and the prepared state only replaces work, never a check.
pub fn prepare(ctx: &KernelCtx, inputs: &[Option<&Tensor>]) -> Option<Box<NodeState>> {
    let w = inputs.get(1).copied().flatten()?;
    let widened: Vec<f32> = match w.storage() {
        Storage::F16(a) => a.iter().map(|v| v.to_f32()).collect(),
        Storage::BF16(a) => a.iter().map(|v| v.to_f32()).collect(),
        Storage::F32(_) => Vec::new(),
        _ => return None,
    };
    let weights: &[f32] = match w.storage() {
        Storage::F32(a) => a.as_slice()?,
        _ => &widened,
    };
    let (mut packed, mut direct, mut lanes) = (None, None, None);
    match pack(ctx, w.shape(), weights) {
        Some(Pack::Gemm(p)) => packed = Some(p),
        Some(Pack::Direct(p)) => direct = Some(p),
        Some(Pack::Lanes(p)) => lanes = Some(p),
        None => {}
    }
    if widened.is_empty() && packed.is_none() && direct.is_none() && lanes.is_none() {
        return None;
    }
    Some(Box::new(Prepared {
        widened,
        packed,
        direct,
        lanes,
        plans: Default::default(),
    }))
}

/// Weights packed for one of the f32 paths.
enum Pack {
    Gemm(PackedWeights),
    Direct(DirectWeights),
    Lanes(LaneWeights),
}

/// Packs W for the path the run will most likely take (the input's shape is
/// not known yet): for kernels larger than 1x1, the channel-lane kernel
/// where `lanes_pay` would pick it and the direct kernel where
/// `direct_pays` would, the GEMM otherwise, when its shape and `group` are
/// ones the run could accept. The run checks them again and uses the packing only if it fits,
/// packing per call otherwise.
fn pack(ctx: &KernelCtx, shape: &[usize], w: &[f32]) -> Option<Pack> {
    let isa = Isa::detect();
    let group = usize::try_from(ctx.int_attr("group").ok()?.unwrap_or(1)).ok()?;
    let m = *shape.first()?;
    if isa == Isa::Portable || shape.len() < 3 || group == 0 || m == 0 || m % group != 0 {
        return None;
    }
    // Packing pads each group's rows to whole row panels: with fewer than
    // four outputs per group (depthwise, whose kernel needs no packing) it
    // would hold several times the weights.
    if m / group < 4 {
        return None;
    }
    let kdim = w.len() / m;
    let taps: usize = shape[2..].iter().product();
    let direct = match isa {
        Isa::Avx512 => taps > 1,
        _ => taps > 1 && shape[1] <= super::DIRECT_AVX2_MAX_CHANNELS,
    };
    let lanes = super::lanes_pay(m / group, taps);
    if lanes {
        let span = super::direct_lanes::span(isa);
        return Some(Pack::Lanes(LaneWeights::in_spans(m, group, kdim, w, span)));
    }
    if direct {
        return Some(Pack::Direct(DirectWeights::new(m, group, kdim, w)));
    }
    Some(Pack::Gemm(PackedWeights::new(m, group, kdim, w, isa)))
}

/// The node's prepared state, when it has one.
pub(super) fn of<'a>(ctx: &KernelCtx<'a>) -> Option<&'a Prepared> {
    ctx.prepared.and_then(|s| s.downcast_ref::<Prepared>())
}
