//! Operator schemas as data: `cases/schemas/<Op>.json`, written by
//! `cargo xtask fetch-cases` from the pinned onnx package's `onnx.defs` and
//! embedded here at build time.
//!
//! - [`validate`]: checks a node against its version's schema before it runs.
//! - [`diff`]: what changed between two versions, and whether it breaks.

pub mod diff;
pub mod validate;

use serde::Deserialize;
use std::sync::OnceLock;

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct OpSchema {
    pub name: String,
    pub domain: String,
    pub onnx_version: String,
    pub versions: Vec<VersionSchema>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct VersionSchema {
    pub since_version: i64,
    pub doc: String,
    pub min_input: usize,
    pub max_input: usize,
    pub min_output: usize,
    pub max_output: usize,
    pub attributes: Vec<AttrSchema>,
    pub inputs: Vec<ParamSchema>,
    pub outputs: Vec<ParamSchema>,
    pub type_constraints: Vec<TypeConstraint>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct AttrSchema {
    pub name: String,
    /// ONNX attribute type name: INT, INTS, FLOAT, STRING, ...
    #[serde(rename = "type")]
    pub ty: String,
    pub required: bool,
    pub default: Option<serde_json::Value>,
    pub description: String,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ParamSchema {
    pub name: String,
    /// A type parameter (`T`) or a concrete type (`tensor(int64)`).
    pub type_str: String,
    /// `Single`, `Optional` or `Variadic`.
    pub option: String,
    pub description: String,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct TypeConstraint {
    pub name: String,
    pub allowed: Vec<String>,
    pub description: String,
}

const EMBEDDED: &[(&str, &str)] = &[
    ("Pad", include_str!("../../cases/schemas/Pad.json")),
    ("Conv", include_str!("../../cases/schemas/Conv.json")),
    (
        "CenterCropPad",
        include_str!("../../cases/schemas/CenterCropPad.json"),
    ),
];

/// Every embedded operator schema. The JSON is produced by our own xtask,
/// so a parse failure is a build defect; such schemas are skipped (and the
/// `schemas_parse` test fails) rather than panicking at run time.
pub fn all() -> &'static [OpSchema] {
    static ALL: OnceLock<Vec<OpSchema>> = OnceLock::new();
    ALL.get_or_init(|| {
        EMBEDDED
            .iter()
            .filter_map(|(_, text)| serde_json::from_str(text).ok())
            .collect()
    })
}

pub fn op(name: &str) -> Option<&'static OpSchema> {
    all().iter().find(|s| s.name == name)
}

/// The schema of `name` at exactly `since_version`.
pub fn version(name: &str, since_version: i64) -> Option<&'static VersionSchema> {
    op(name)?
        .versions
        .iter()
        .find(|v| v.since_version == since_version)
}

impl VersionSchema {
    pub fn attribute(&self, name: &str) -> Option<&AttrSchema> {
        self.attributes.iter().find(|a| a.name == name)
    }

    pub fn input(&self, name: &str) -> Option<&ParamSchema> {
        self.inputs.iter().find(|a| a.name == name)
    }

    /// The allowed type strings of a parameter: its constraint's list, or
    /// the concrete type it names.
    pub fn allowed(&self, p: &ParamSchema) -> Vec<String> {
        match self.type_constraints.iter().find(|t| t.name == p.type_str) {
            Some(t) => t.allowed.clone(),
            None => vec![p.type_str.clone()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_parse() {
        for (name, text) in EMBEDDED {
            let s: OpSchema = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&s.name, name);
        }
        assert_eq!(all().len(), EMBEDDED.len());
    }

    #[test]
    fn versions_match_the_kernels() {
        let pad: Vec<i64> = op("Pad")
            .unwrap()
            .versions
            .iter()
            .map(|v| v.since_version)
            .collect();
        assert_eq!(pad, crate::ops::pad::VERSIONS);
        let conv: Vec<i64> = op("Conv")
            .unwrap()
            .versions
            .iter()
            .map(|v| v.since_version)
            .collect();
        assert_eq!(conv, crate::ops::conv::VERSIONS);
        let ccp: Vec<i64> = op("CenterCropPad")
            .unwrap()
            .versions
            .iter()
            .map(|v| v.since_version)
            .collect();
        assert_eq!(ccp, crate::ops::center_crop_pad::VERSIONS);
    }

    /// The kernels' own type lists agree with the schemas' constraints.
    #[test]
    fn kernel_type_lists_match_the_schemas() {
        use crate::ops::{center_crop_pad, conv, pad};
        let check = |op: &str, param: &str, kernel: &dyn Fn(i64) -> Vec<crate::DataType>| {
            for v in &self::op(op).unwrap().versions {
                let p = v.input(param).unwrap();
                let mut want = v.allowed(p);
                want.sort();
                let mut got: Vec<String> = kernel(v.since_version)
                    .iter()
                    .map(|t| format!("tensor({t})"))
                    .collect();
                got.sort();
                assert_eq!(got, want, "{op}-{}", v.since_version);
            }
        };
        check("Pad", "data", &pad::allowed_types);
        check("Conv", "X", &conv::allowed_types);
        check(
            "CenterCropPad",
            "input_data",
            &center_crop_pad::allowed_types,
        );
    }
}
