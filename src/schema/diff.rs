//! Schema differences between two versions of an operator, as data.
//!
//! The breaking rule, applied the same way everywhere: a change is breaking
//! when a model that is valid for the old version can be invalid under the
//! new one, or compute something else. So these are breaking: removing an
//! attribute, input or output; adding a required attribute or a required
//! (single) input; changing an attribute's type; making an attribute or
//! input required; changing an attribute's default; moving a parameter to
//! another position; narrowing the types an input accepts. Adding optional
//! attributes or inputs, making things optional and widening types are not.

use super::{AttrSchema, OpSchema, ParamSchema, VersionSchema};
use std::collections::BTreeSet;
use std::fmt;

/// One reported change.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// What kind of schema element changed: attribute, input, output, type constraint.
    pub kind: &'static str,
    pub name: String,
    /// added, removed, changed, widened, narrowed, ...
    pub what: String,
    pub detail: String,
    pub breaking: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DocDiff {
    /// Line similarity in [0, 1] (matching lines x 2 / total lines).
    pub similarity: f64,
    pub added: usize,
    pub removed: usize,
    /// Unified diff with `--- Op vOld` / `+++ Op vNew` headers.
    pub unified: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SchemaDiff {
    pub op: String,
    pub domain: String,
    pub old: i64,
    pub new: i64,
    pub changes: Vec<Change>,
    pub doc: DocDiff,
}

impl SchemaDiff {
    pub fn breaking(&self) -> bool {
        self.changes.iter().any(|c| c.breaking)
    }

    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Change> + 'a {
        self.changes.iter().filter(move |c| c.kind == kind)
    }
}

fn attr_text(a: &AttrSchema) -> String {
    let mut s = format!(
        "type={}; required={}",
        a.ty,
        if a.required { "True" } else { "False" }
    );
    if let Some(d) = &a.default {
        s += &format!("; default={d}");
    }
    s
}

fn param_text(p: &ParamSchema, v: &VersionSchema) -> String {
    format!(
        "{} ({}; {})",
        p.type_str,
        p.option.to_lowercase(),
        v.allowed(p).join(", ")
    )
}

fn change(kind: &'static str, name: &str, what: &str, detail: String, breaking: bool) -> Change {
    Change {
        kind,
        name: name.to_string(),
        what: what.to_string(),
        detail,
        breaking,
    }
}

/// The differences from `old` to `new` of operator `op`.
pub fn diff(op: &OpSchema, old: &VersionSchema, new: &VersionSchema) -> SchemaDiff {
    let mut changes = Vec::new();
    // Attributes: removed, added, then changed, each by name.
    for a in &old.attributes {
        if new.attribute(&a.name).is_none() {
            let to_input = new.input(&a.name).is_some();
            let what = if to_input {
                "removed (now an input)"
            } else {
                "removed"
            };
            changes.push(change("attribute", &a.name, what, attr_text(a), true));
        }
    }
    for a in &new.attributes {
        if old.attribute(&a.name).is_none() {
            changes.push(change(
                "attribute",
                &a.name,
                "added",
                attr_text(a),
                a.required,
            ));
        }
    }
    for a in &old.attributes {
        let Some(b) = new.attribute(&a.name) else {
            continue;
        };
        if a.ty != b.ty {
            changes.push(change(
                "attribute",
                &a.name,
                "type changed",
                format!("{} -> {}", a.ty, b.ty),
                true,
            ));
        }
        if a.required != b.required {
            let detail = format!("required {} -> {}", a.required, b.required);
            changes.push(change(
                "attribute",
                &a.name,
                "requirement changed",
                detail,
                b.required,
            ));
        }
        if a.description != b.description {
            let detail = first_line_diff(&a.description, &b.description);
            changes.push(change(
                "attribute description",
                &a.name,
                "changed",
                detail,
                false,
            ));
        }
        if a.default != b.default {
            let show = |d: &Option<serde_json::Value>| {
                d.as_ref().map_or("none".to_string(), |v| v.to_string())
            };
            let detail = format!("default {} -> {}", show(&a.default), show(&b.default));
            changes.push(change(
                "attribute",
                &a.name,
                "default changed",
                detail,
                true,
            ));
        }
    }
    params("input", old, new, &old.inputs, &new.inputs, &mut changes);
    params("output", old, new, &old.outputs, &new.outputs, &mut changes);
    // Type constraints: the allowed sets, by constraint name.
    for t in &old.type_constraints {
        let Some(u) = new.type_constraints.iter().find(|u| u.name == t.name) else {
            changes.push(change(
                "type constraint",
                &t.name,
                "removed",
                t.allowed.join(", "),
                false,
            ));
            continue;
        };
        let before: BTreeSet<&String> = t.allowed.iter().collect();
        let after: BTreeSet<&String> = u.allowed.iter().collect();
        let gone: Vec<&str> = before.difference(&after).map(|s| s.as_str()).collect();
        let came: Vec<&str> = after.difference(&before).map(|s| s.as_str()).collect();
        if !gone.is_empty() {
            changes.push(change(
                "type constraint",
                &t.name,
                "narrowed",
                format!("removed {}", gone.join(", ")),
                true,
            ));
        }
        if !came.is_empty() {
            changes.push(change(
                "type constraint",
                &t.name,
                "widened",
                format!("added {}", came.join(", ")),
                false,
            ));
        }
    }
    for u in &new.type_constraints {
        if !old.type_constraints.iter().any(|t| t.name == u.name) {
            changes.push(change(
                "type constraint",
                &u.name,
                "added",
                u.allowed.join(", "),
                false,
            ));
        }
    }
    SchemaDiff {
        op: op.name.clone(),
        domain: op.domain.clone(),
        old: old.since_version,
        new: new.since_version,
        changes,
        doc: doc_diff(&op.name, old, new),
    }
}

fn params(
    kind: &'static str,
    old_v: &VersionSchema,
    new_v: &VersionSchema,
    old: &[ParamSchema],
    new: &[ParamSchema],
    out: &mut Vec<Change>,
) {
    for (i, p) in old.iter().enumerate() {
        match new.iter().position(|q| q.name == p.name) {
            None => {
                let to_attr = new_v.attribute(&p.name).is_some();
                let what = if to_attr {
                    "removed (now an attribute)"
                } else {
                    "removed"
                };
                out.push(change(kind, &p.name, what, param_text(p, old_v), true));
            }
            Some(j) => {
                let q = &new[j];
                if i != j {
                    out.push(change(
                        kind,
                        &p.name,
                        "moved",
                        format!("position {i} -> {j}"),
                        true,
                    ));
                }
                if p.option != q.option {
                    let breaking =
                        q.option == "Single" || p.option == "Variadic" || q.option == "Variadic";
                    out.push(change(
                        kind,
                        &p.name,
                        "option changed",
                        format!("{} -> {}", p.option, q.option),
                        breaking,
                    ));
                }
                let before: BTreeSet<String> = old_v.allowed(p).into_iter().collect();
                let after: BTreeSet<String> = new_v.allowed(q).into_iter().collect();
                if before != after {
                    let narrowed = kind == "input" && !before.is_subset(&after);
                    let gone: Vec<&String> = before.difference(&after).collect();
                    let came: Vec<&String> = after.difference(&before).collect();
                    let mut detail = Vec::new();
                    if !came.is_empty() {
                        detail.push(format!(
                            "accepts {}",
                            came.iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                    }
                    if !gone.is_empty() {
                        detail.push(format!(
                            "no longer {}",
                            gone.iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                    }
                    let what = if narrowed {
                        "types narrowed"
                    } else {
                        "types widened"
                    };
                    out.push(change(kind, &p.name, what, detail.join("; "), narrowed));
                }
            }
        }
    }
    for q in new {
        if !old.iter().any(|p| p.name == q.name) {
            let from_attr = old_v.attribute(&q.name).is_some();
            let what = if from_attr {
                "added (was an attribute)"
            } else {
                "added"
            };
            let breaking = kind == "input" && q.option == "Single";
            out.push(change(
                kind,
                &q.name,
                what,
                param_text(q, new_v),
                breaking || from_attr,
            ));
        }
    }
}

/// The new description, trimmed to what follows the common prefix.
fn first_line_diff(a: &str, b: &str) -> String {
    let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let start = b[..b.char_indices().nth(common).map_or(b.len(), |(i, _)| i)]
        .rfind(char::is_whitespace)
        .map_or(0, |i| i + 1);
    let tail: String = b[start..].chars().take(100).collect();
    format!(
        "now \"{}{}\"",
        tail.trim(),
        if b.len() - start > 100 { "..." } else { "" }
    )
}

fn doc_diff(op: &str, old: &VersionSchema, new: &VersionSchema) -> DocDiff {
    let diff = similar::TextDiff::from_lines(old.doc.as_str(), new.doc.as_str());
    let (mut added, mut removed) = (0, 0);
    for c in diff.iter_all_changes() {
        match c.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    let unified = diff
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{op} v{}", old.since_version),
            &format!("{op} v{}", new.since_version),
        )
        .to_string();
    DocDiff {
        similarity: diff.ratio() as f64,
        added,
        removed,
        unified,
    }
}

/// Diffs of every consecutive pair of versions.
pub fn consecutive(op: &OpSchema) -> Vec<SchemaDiff> {
    op.versions
        .windows(2)
        .map(|w| diff(op, &w[0], &w[1]))
        .collect()
}

impl fmt::Display for SchemaDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "SchemaDiff: {} (domain '{}')", self.op, self.domain)?;
        writeln!(f, "  - old version: {}", self.old)?;
        writeln!(f, "  - new version: {}", self.new)?;
        writeln!(
            f,
            "  - breaking: {}",
            if self.breaking() { "yes" } else { "no" }
        )?;
        if self.breaking() {
            writeln!(f, "Breaking reasons:")?;
            for c in self.changes.iter().filter(|c| c.breaking) {
                writeln!(f, "  - {} '{}' ({}): {}", c.kind, c.name, c.what, c.detail)?;
            }
        }
        for (kind, title) in [
            ("attribute", "Attributes"),
            ("input", "Inputs"),
            ("output", "Outputs"),
            ("type constraint", "Type constraints"),
            ("attribute description", "Attribute descriptions"),
        ] {
            let list: Vec<&Change> = self.of_kind(kind).collect();
            if list.is_empty() {
                continue;
            }
            writeln!(f, "{title}:")?;
            for c in list {
                let tag = if c.breaking { "[BREAKING] " } else { "" };
                writeln!(f, "  - {tag}{} '{}': {}", c.what, c.name, c.detail)?;
            }
        }
        writeln!(f, "Documentation:")?;
        writeln!(
            f,
            "  - line similarity: {:.2} (+{}/-{} lines)",
            self.doc.similarity, self.doc.added, self.doc.removed
        )?;
        write!(f, "{}", self.doc.unified)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::op;

    fn pair(name: &str, a: i64, b: i64) -> SchemaDiff {
        let s = op(name).unwrap();
        let old = s.versions.iter().find(|v| v.since_version == a).unwrap();
        let new = s.versions.iter().find(|v| v.since_version == b).unwrap();
        diff(s, old, new)
    }

    /// Seed 002: Pad 1 -> 2.
    #[test]
    fn pad_1_to_2_matches_the_seed() {
        let d = pair("Pad", 1, 2);
        assert!(d.breaking());
        let attrs: Vec<(String, String, bool)> = d
            .of_kind("attribute")
            .map(|c| (c.name.clone(), c.what.clone(), c.breaking))
            .collect();
        assert_eq!(
            attrs,
            vec![
                ("paddings".into(), "removed".into(), true),
                ("pads".into(), "added".into(), true)
            ]
        );
        assert_eq!(
            d.of_kind("attribute").next().unwrap().detail,
            "type=INTS; required=True"
        );
        assert_eq!(format!("{:.2}", d.doc.similarity), "0.82");
        assert_eq!((d.doc.added, d.doc.removed), (3, 3));
        assert!(
            d.doc
                .unified
                .starts_with("--- Pad v1\n+++ Pad v2\n@@ -1,13 +1,13 @@"),
            "{}",
            d.doc.unified
        );
        let text = d.to_string();
        assert!(text.contains("  - breaking: yes"), "{text}");
        assert!(
            text.contains("  - [BREAKING] removed 'paddings': type=INTS; required=True"),
            "{text}"
        );
        assert!(
            text.contains("  - line similarity: 0.82 (+3/-3 lines)"),
            "{text}"
        );
    }

    #[test]
    fn pad_2_to_11_moves_pads_to_an_input_and_widens_types() {
        let d = pair("Pad", 2, 11);
        assert!(d.breaking());
        assert!(d.changes.iter().any(|c| c.kind == "attribute"
            && c.name == "pads"
            && c.what == "removed (now an input)"));
        assert!(d.changes.iter().any(|c| c.kind == "input"
            && c.name == "pads"
            && c.what == "added (was an attribute)"));
        assert!(d
            .changes
            .iter()
            .any(|c| c.kind == "type constraint" && c.what == "widened" && !c.breaking));
    }

    #[test]
    fn widening_only_is_not_breaking() {
        for (a, b) in [(19, 21), (21, 23), (23, 24), (24, 25)] {
            let d = pair("Pad", a, b);
            assert!(!d.breaking(), "Pad {a} -> {b}: {d}");
            assert!(
                d.changes
                    .iter()
                    .all(|c| c.what.contains("widened") || c.kind == "attribute description"),
                "Pad {a} -> {b}: {d}"
            );
        }
        let d = pair("Conv", 11, 22);
        assert!(!d.breaking(), "{d}");
        let d = pair("Pad", 18, 19);
        assert!(!d.breaking());
        let mode = d
            .of_kind("attribute description")
            .find(|c| c.name == "mode")
            .expect("mode's description changed");
        assert!(mode.detail.contains("wrap"), "{}", mode.detail);
        let d = pair("Pad", 13, 18);
        assert!(d
            .changes
            .iter()
            .any(|c| c.kind == "input" && c.name == "axes" && c.what == "added" && !c.breaking));
    }
}
