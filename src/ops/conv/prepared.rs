//! What Conv does once per model, when its weights are constant (an
//! initializer, as in every exported network): the work that depends on W
//! alone moves out of every run.

use super::*;
use crate::ops::NodeState;

/// A Conv node's prepared weights.
pub(crate) struct Prepared {
    /// f16 and bf16 weights widened to f32 (the type they are computed in);
    /// empty for the other types, which the kernels read as they are.
    pub widened: Vec<f32>,
}

/// Prepares a node whose W is constant; declines otherwise. Nothing here is
/// validated: the run checks every input and attribute as it would without
/// preparation, and the prepared state only replaces work, never a check.
pub fn prepare(_ctx: &KernelCtx, inputs: &[Option<&Tensor>]) -> Option<Box<NodeState>> {
    let w = inputs.get(1).copied().flatten()?;
    let widened = match w.storage() {
        Storage::F16(a) => a.iter().map(|v| v.to_f32()).collect(),
        Storage::BF16(a) => a.iter().map(|v| v.to_f32()).collect(),
        _ => return None,
    };
    Some(Box::new(Prepared { widened }))
}

/// The node's prepared state, when it has one.
pub(super) fn of<'a>(ctx: &KernelCtx<'a>) -> Option<&'a Prepared> {
    ctx.prepared.and_then(|s| s.downcast_ref::<Prepared>())
}
