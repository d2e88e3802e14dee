//! Resource limits: how much an untrusted model or tensor file may make us
//! read, allocate or compute.
//!
//! Every limit is checked before the allocation or the work it guards, so
//! exceeding one is an error that names the limit, never an out-of-memory
//! kill. The harness reads overrides from `ONNX_LIMITS`
//! (`name=value,name=value`, see [`Limits::with_overrides`]).

use std::fmt;

/// Bounds that keep bad input from exhausting the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest model or tensor file the loader reads, in bytes.
    pub max_file_bytes: u64,
    /// The largest tensor the loader decodes (initializer, attribute or
    /// data-set tensor), in bytes of its elements.
    pub max_tensor_bytes: u64,
    /// The largest output a kernel may allocate, in bytes (strings count
    /// their text as well as their handle).
    pub max_output_bytes: u64,
    /// The largest im2col buffer one Conv worker may hold, in bytes.
    pub max_im2col_bytes: u64,
    /// The most multiply-adds one Conv node may do: a small tensor with a
    /// huge kernel is cheap to store but would run for hours.
    pub max_conv_macs: u64,
    /// The most nodes a graph may have.
    pub max_nodes: u64,
    /// The most values (initializers, inputs, outputs, node outputs) a
    /// graph may name.
    pub max_values: u64,
    /// The deepest nesting of protobuf messages the decoder follows
    /// (a graph inside an attribute inside a node inside a graph ...).
    pub max_nesting: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            // ONNX files are protobufs, which top out at 2 GiB.
            max_file_bytes: 2 << 30,
            max_tensor_bytes: 2 << 30,
            max_output_bytes: 4 << 30,
            max_im2col_bytes: 64 << 20,
            // About a minute of f32 work on two cores.
            max_conv_macs: 1 << 42,
            max_nodes: 100_000,
            max_values: 1_000_000,
            max_nesting: 64,
        }
    }
}

/// A limit that a model, a tensor or a kernel would exceed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitExceeded {
    /// What would exceed it, e.g. "output" or "tensor 'W'".
    pub what: String,
    /// The limit's field name in [`Limits`].
    pub limit: &'static str,
    /// The amount needed (saturated at `u128::MAX`).
    pub needed: u128,
    pub allowed: u64,
}

impl fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let needed = if self.needed == u128::MAX {
            "more than 2^128".to_string()
        } else {
            self.needed.to_string()
        };
        write!(
            f,
            "{} needs {needed}, more than the limit {} = {} (raise it with ONNX_LIMITS={}=N or Limits::{})",
            self.what, self.limit, self.allowed, self.limit, self.limit
        )
    }
}

impl Limits {
    /// Fails when `needed` exceeds the limit `limit` whose value is `allowed`.
    pub fn check(
        what: impl Into<String>,
        limit: &'static str,
        needed: u128,
        allowed: u64,
    ) -> Result<(), LimitExceeded> {
        if needed > allowed as u128 {
            Err(LimitExceeded {
                what: what.into(),
                limit,
                needed,
                allowed,
            })
        } else {
            Ok(())
        }
    }

    /// Fails when the non-zero lengths of `shape` multiply past
    /// `isize::MAX`: such a shape has no address space even when another
    /// axis is empty and it holds no element.
    pub fn check_addressable(what: impl Into<String>, shape: &[u128]) -> Result<(), LimitExceeded> {
        let nonzero = shape
            .iter()
            .filter(|&&d| d > 0)
            .fold(1u128, |acc, &d| acc.saturating_mul(d));
        Limits::check(what, "max_output_bytes", nonzero, isize::MAX as u64)
    }

    /// These limits with `name=value` overrides applied, comma-separated
    /// (`max_output_bytes=1048576,max_nodes=10`). Values may use `_` and a
    /// `K`, `M` or `G` suffix (powers of 1024).
    pub fn with_overrides(mut self, spec: &str) -> Result<Limits, String> {
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| format!("'{item}' is not name=value"))?;
            let value = parse_amount(value.trim())
                .ok_or_else(|| format!("'{item}': '{value}' is not a number"))?;
            let name = name.trim();
            let field: &mut u64 = match name {
                "max_file_bytes" => &mut self.max_file_bytes,
                "max_tensor_bytes" => &mut self.max_tensor_bytes,
                "max_output_bytes" => &mut self.max_output_bytes,
                "max_im2col_bytes" => &mut self.max_im2col_bytes,
                "max_conv_macs" => &mut self.max_conv_macs,
                "max_nodes" => &mut self.max_nodes,
                "max_values" => &mut self.max_values,
                "max_nesting" => {
                    self.max_nesting = u32::try_from(value)
                        .map_err(|_| format!("'{item}': max_nesting must fit in 32 bits"))?;
                    continue;
                }
                other => {
                    return Err(format!(
                        "unknown limit '{other}'; known: max_file_bytes, max_tensor_bytes, max_output_bytes, max_im2col_bytes, max_conv_macs, max_nodes, max_values, max_nesting"
                    ))
                }
            };
            *field = value;
        }
        Ok(self)
    }
}

fn parse_amount(s: &str) -> Option<u64> {
    let s = s.replace('_', "");
    let (digits, shift) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 10),
        'M' | 'm' => (&s[..s.len() - 1], 20),
        'G' | 'g' => (&s[..s.len() - 1], 30),
        _ => (&s[..], 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_parse_names_suffixes_and_reject_unknowns() {
        let l = Limits::default()
            .with_overrides("max_output_bytes=4K, max_nodes=1_000,max_nesting=3")
            .unwrap();
        assert_eq!(l.max_output_bytes, 4096);
        assert_eq!(l.max_nodes, 1000);
        assert_eq!(l.max_nesting, 3);
        assert_eq!(l.max_file_bytes, Limits::default().max_file_bytes);
        assert_eq!(
            Limits::default().with_overrides("").unwrap(),
            Limits::default()
        );
        let e = Limits::default().with_overrides("max_bogus=1").unwrap_err();
        assert!(e.contains("unknown limit 'max_bogus'"), "{e}");
        assert!(Limits::default()
            .with_overrides("max_nodes")
            .unwrap_err()
            .contains("not name=value"));
        assert!(Limits::default()
            .with_overrides("max_nodes=-3")
            .unwrap_err()
            .contains("not a number"));
        assert!(Limits::default()
            .with_overrides("max_nodes=99999999999G")
            .is_err());
        assert!(Limits::default()
            .with_overrides("max_nesting=5G")
            .unwrap_err()
            .contains("32 bits"));
    }

    #[test]
    fn check_names_the_limit_and_how_to_raise_it() {
        assert!(Limits::check("x", "max_nodes", 10, 10).is_ok());
        let e = Limits::check("graph 'g'", "max_nodes", 11, 10).unwrap_err();
        assert_eq!(
            e.to_string(),
            "graph 'g' needs 11, more than the limit max_nodes = 10 (raise it with ONNX_LIMITS=max_nodes=N or Limits::max_nodes)"
        );
    }
}
