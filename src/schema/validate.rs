//! Checks a node against its version's schema before the kernel runs:
//! unknown attributes, attribute types, required attributes, input counts
//! and element types.

use super::VersionSchema;
use crate::error::KernelError;
use crate::model::Node;
use crate::tensor::Tensor;

/// Validates `node` (with its resolved inputs) against `schema`, which is
/// the schema of `op`-`version`.
pub fn validate(
    node: &Node,
    inputs: &[Option<&Tensor>],
    schema: &VersionSchema,
    op: &str,
) -> Result<(), KernelError> {
    let v = schema.since_version;
    for a in &node.attributes {
        let Some(s) = schema.attribute(&a.name) else {
            let known: Vec<&str> = schema.attributes.iter().map(|a| a.name.as_str()).collect();
            return Err(KernelError::attribute(
                &a.name,
                format!(
                    "not an attribute of {op}-{v} (it has: {})",
                    known.join(", ")
                ),
            ));
        };
        if a.value.type_name() != s.ty {
            return Err(KernelError::attribute(
                &a.name,
                format!("{op}-{v} declares it {}, got {}", s.ty, a.value.type_name()),
            ));
        }
    }
    for s in schema.attributes.iter().filter(|s| s.required) {
        if node.attribute(&s.name).is_none() {
            return Err(KernelError::attribute(
                &s.name,
                format!("required by {op}-{v} but missing"),
            ));
        }
    }
    if inputs.len() > schema.max_input {
        return Err(KernelError::Invalid(format!(
            "{op}-{v} takes at most {} inputs, got {}",
            schema.max_input,
            inputs.len()
        )));
    }
    for (i, p) in schema.inputs.iter().enumerate() {
        let present = inputs.get(i).copied().flatten().is_some();
        if p.option == "Single" && !present {
            return Err(KernelError::input(
                &p.name,
                format!("required by {op}-{v} (input {i}) but missing"),
            ));
        }
    }
    for (i, t) in inputs.iter().enumerate() {
        let Some(t) = t else { continue };
        let Some(p) = schema
            .inputs
            .get(i)
            .or_else(|| schema.inputs.last().filter(|p| p.option == "Variadic"))
        else {
            continue;
        };
        let allowed = schema.allowed(p);
        let ty = format!("tensor({})", t.dtype());
        if !allowed.contains(&ty) {
            return Err(KernelError::Type {
                name: p.name.clone(),
                dtype: t.dtype(),
                allowed: allowed.join(", "),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AttrValue;
    use crate::schema::version;

    fn node(attrs: Vec<(&str, AttrValue)>) -> Node {
        Node::new("n", "Pad", &[], &[], attrs)
    }

    #[test]
    fn each_rule_has_its_message() {
        let x = Tensor::from_vec(&[2], vec![1f32, 2.]);
        let p = Tensor::from_vec(&[2], vec![0i64, 0]);
        let s18 = version("Pad", 18).unwrap();
        let e = validate(
            &node(vec![("modes", AttrValue::String("edge".into()))]),
            &[Some(&x), Some(&p)],
            s18,
            "Pad",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "attribute 'modes': not an attribute of Pad-18 (it has: mode)"
        );
        let e = validate(
            &node(vec![("mode", AttrValue::Int(1))]),
            &[Some(&x), Some(&p)],
            s18,
            "Pad",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "attribute 'mode': Pad-18 declares it STRING, got INT"
        );
        let s2 = version("Pad", 2).unwrap();
        let e = validate(&node(vec![]), &[Some(&x)], s2, "Pad").unwrap_err();
        assert_eq!(
            e.to_string(),
            "attribute 'pads': required by Pad-2 but missing"
        );
        let e = validate(&node(vec![]), &[Some(&x)], s18, "Pad").unwrap_err();
        assert_eq!(
            e.to_string(),
            "input 'pads': required by Pad-18 (input 1) but missing"
        );
        let e = validate(
            &node(vec![]),
            &[Some(&x), Some(&p), None, None, None],
            s18,
            "Pad",
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "Pad-18 takes at most 4 inputs, got 5");
        let p32 = Tensor::from_vec(&[2], vec![0i32, 0]);
        let e = validate(&node(vec![]), &[Some(&x), Some(&p32)], s18, "Pad").unwrap_err();
        assert_eq!(
            e.to_string(),
            "element type int32 of 'pads' is not allowed; allowed: tensor(int64)"
        );
        assert!(validate(
            &node(vec![("mode", AttrValue::String("edge".into()))]),
            &[Some(&x), Some(&p)],
            s18,
            "Pad"
        )
        .is_ok());
    }
}
