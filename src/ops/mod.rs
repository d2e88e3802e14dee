//! Operator kernels and the registry that picks one for a node.
//!
//! A kernel is registered under (domain, op type) with the list of versions
//! at which the operator changed. For a model importing opset `o`, the node
//! runs the greatest registered `since_version` not above `o`, and the kernel
//! receives that version so it can apply the version's rules.

pub(crate) mod cache;
pub mod center_crop_pad;
pub mod conv;
pub mod helpers;
pub mod pad;
pub(crate) mod parallel;
pub(crate) mod row_copy;
pub mod sgemm;

use crate::error::KernelError;
use crate::model::{AttrValue, Node};
use crate::tensor::{DataType, Tensor};

pub use crate::limits::Limits;

/// What a kernel knows about the node it runs.
pub struct KernelCtx<'a> {
    pub node: &'a Node,
    /// The operator version chosen for this node (a `since_version`).
    pub version: i64,
    pub limits: Limits,
    /// What the operator's `prepare` built for this node, if anything.
    pub prepared: Option<&'a NodeState>,
}

pub type OpOutput = Result<Vec<Tensor>, KernelError>;
pub type KernelFn = fn(&KernelCtx, &[Option<&Tensor>]) -> OpOutput;

/// Per-node work an operator does once per model (packed constant weights,
/// say), kept by the prepared model and handed back to every run.
pub type NodeState = dyn std::any::Any + Send + Sync;

/// Builds a node's state from its constant inputs (initializers; `None` for
/// inputs only known at run time). It may decline (`None`) for any reason:
/// the kernel must give the same result without it, and it reports every
/// error itself, at run time, in the node's order.
pub type PrepareFn = fn(&KernelCtx, &[Option<&Tensor>]) -> Option<Box<NodeState>>;

/// One operator with every version our kernel implements.
pub struct OpEntry {
    pub domain: &'static str,
    pub op_type: &'static str,
    pub versions: &'static [i64],
    pub kernel: KernelFn,
    pub prepare: Option<PrepareFn>,
}

const fn helper(op_type: &'static str, versions: &'static [i64], kernel: KernelFn) -> OpEntry {
    OpEntry {
        domain: "",
        op_type,
        versions,
        kernel,
        prepare: None,
    }
}

/// Every operator this library implements.
pub fn registry() -> &'static [OpEntry] {
    static ENTRIES: &[OpEntry] = &[
        OpEntry {
            domain: "",
            op_type: "Pad",
            versions: &pad::VERSIONS,
            kernel: pad::run,
            prepare: None,
        },
        OpEntry {
            domain: "",
            op_type: "Conv",
            versions: &conv::VERSIONS,
            kernel: conv::run,
            prepare: Some(conv::prepare),
        },
        OpEntry {
            domain: "",
            op_type: "CenterCropPad",
            versions: &center_crop_pad::VERSIONS,
            kernel: center_crop_pad::run,
            prepare: None,
        },
        // Helpers for function bodies, at the versions in effect at opset 18.
        helper("Add", &[14], helpers::add),
        helper("Sub", &[14], helpers::sub),
        helper("Div", &[14], helpers::div),
        helper("Max", &[13], helpers::max),
        helper("Concat", &[13], helpers::concat),
        helper("Constant", &[13], helpers::constant),
        helper("Gather", &[13], helpers::gather),
        helper("Shape", &[15], helpers::shape),
        helper("Slice", &[13], helpers::slice),
    ];
    ENTRIES
}

fn same_domain(a: &str, b: &str) -> bool {
    let norm = |d: &str| if d == "ai.onnx" { "" } else { d }.to_string();
    norm(a) == norm(b)
}

/// The operator and the version it runs at, for a node in a model importing `opset`.
pub fn resolve(domain: &str, op_type: &str, opset: i64) -> Option<(i64, &'static OpEntry)> {
    let entry = registry()
        .iter()
        .find(|e| same_domain(e.domain, domain) && e.op_type == op_type)?;
    let version = entry
        .versions
        .iter()
        .copied()
        .filter(|&v| v <= opset)
        .max()?;
    Some((version, entry))
}

/// Whether any version of the operator is registered.
pub fn is_known(domain: &str, op_type: &str) -> Option<&'static OpEntry> {
    registry()
        .iter()
        .find(|e| same_domain(e.domain, domain) && e.op_type == op_type)
}

/// Normalizes an `axes` list (negative counts from the back) for a tensor
/// of rank `rank`: all axes when absent; out-of-range and repeated axes are
/// rejected with an error built by `err` (an input or an attribute error).
pub fn normalize_axes(
    axes: Option<&[i64]>,
    rank: usize,
    err: impl Fn(String) -> KernelError,
) -> Result<Vec<usize>, KernelError> {
    let Some(list) = axes else {
        return Ok((0..rank).collect());
    };
    let r = rank as i64;
    let mut seen = vec![false; rank];
    let mut out = Vec::with_capacity(list.len());
    for &a in list {
        if a < -r || a >= r {
            return Err(err(format!(
                "axis {a} is out of range [{}, {}] for rank {rank}",
                -r,
                r - 1
            )));
        }
        let n = if a < 0 { a + r } else { a } as usize;
        if std::mem::replace(&mut seen[n], true) {
            return Err(err(format!("axis {n} is repeated in {list:?}")));
        }
        out.push(n);
    }
    Ok(out)
}

pub fn allowed_list(types: &[DataType]) -> String {
    types
        .iter()
        .map(|t| format!("tensor({t})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Rejects an element type outside a version's type constraint.
pub fn check_type(name: &str, dtype: DataType, allowed: &[DataType]) -> Result<(), KernelError> {
    if allowed.contains(&dtype) {
        Ok(())
    } else {
        Err(KernelError::Type {
            name: name.to_string(),
            dtype,
            allowed: allowed_list(allowed),
        })
    }
}

impl KernelCtx<'_> {
    /// Refuses an output of `shape` and `dtype` (strings: their handles)
    /// beyond `max_output_bytes`, before it is allocated.
    pub fn check_output(&self, shape: &[usize], dtype: DataType) -> Result<(), KernelError> {
        let dims: Vec<u128> = shape.iter().map(|&d| d as u128).collect();
        Limits::check_addressable(format!("output shape {shape:?}"), &dims)?;
        let elements = dims.iter().fold(1u128, |a, &d| a.saturating_mul(d));
        Limits::check(
            format!("output of shape {shape:?}"),
            "max_output_bytes",
            elements.saturating_mul(dtype.memory_bytes() as u128),
            self.limits.max_output_bytes,
        )?;
        Ok(())
    }

    pub fn required_input<'t>(
        &self,
        inputs: &[Option<&'t Tensor>],
        i: usize,
        name: &str,
    ) -> Result<&'t Tensor, KernelError> {
        inputs
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| KernelError::input(name, format!("required (input {i}) but missing")))
    }

    pub fn string_attr(&self, name: &str) -> Result<Option<&str>, KernelError> {
        match self.node.attribute(name) {
            None => Ok(None),
            Some(AttrValue::String(s)) => Ok(Some(s)),
            Some(other) => Err(KernelError::attribute(
                name,
                format!("expected a STRING, got {}", other.type_name()),
            )),
        }
    }

    pub fn ints_attr(&self, name: &str) -> Result<Option<&[i64]>, KernelError> {
        match self.node.attribute(name) {
            None => Ok(None),
            Some(AttrValue::Ints(v)) => Ok(Some(v)),
            Some(other) => Err(KernelError::attribute(
                name,
                format!("expected INTS, got {}", other.type_name()),
            )),
        }
    }

    pub fn int_attr(&self, name: &str) -> Result<Option<i64>, KernelError> {
        match self.node.attribute(name) {
            None => Ok(None),
            Some(AttrValue::Int(v)) => Ok(Some(*v)),
            Some(other) => Err(KernelError::attribute(
                name,
                format!("expected an INT, got {}", other.type_name()),
            )),
        }
    }

    pub fn float_attr(&self, name: &str) -> Result<Option<f32>, KernelError> {
        match self.node.attribute(name) {
            None => Ok(None),
            Some(AttrValue::Float(v)) => Ok(Some(*v)),
            Some(other) => Err(KernelError::attribute(
                name,
                format!("expected a FLOAT, got {}", other.type_name()),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_picks_greatest_since_version_not_above_opset() {
        assert_eq!(resolve("", "Pad", 1).map(|r| r.0), Some(1));
        assert_eq!(resolve("", "Pad", 10).map(|r| r.0), Some(2));
        assert_eq!(resolve("ai.onnx", "Pad", 17).map(|r| r.0), Some(13));
        assert_eq!(resolve("", "Pad", 22).map(|r| r.0), Some(21));
        assert_eq!(resolve("", "Pad", 99).map(|r| r.0), Some(25));
        assert!(resolve("", "Pad", 0).is_none());
        assert!(resolve("com.example", "Pad", 18).is_none());
        assert!(resolve("", "Nope", 18).is_none());
    }
}
