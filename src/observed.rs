//! Properties of a runtime's outputs that say what it computed, read from
//! the outputs themselves rather than from the case's parameters: an
//! expected failure (`cases/expectations.toml`, key `observed`) or a
//! differential finding (`cases/differential/known.toml`, `when`) that
//! describes what a runtime computes names such a property, so that it
//! cannot also excuse another bug met in the same kind of case.

use crate::compare::ErrorBound;
use crate::model::{AttrValue, Node};
use crate::{error_bound, graph, DataType, Model, Tensor};

/// The properties [`observed`] knows, by the name entries use.
pub const PROPERTIES: &[&str] = &[
    "float_arithmetic",
    "same_lower_read_as_upper",
    "same_pad_unclamped",
];

/// The properties of [`PROPERTIES`] that `theirs` has, for the
/// single-node `model` run on `inputs` whose right outputs are `right`.
pub fn observed(
    model: &Model,
    inputs: &[Tensor],
    right: &[Tensor],
    theirs: &[Tensor],
) -> Vec<String> {
    let mut seen = Vec::new();
    // The properties describe one operator's arithmetic; in a larger graph
    // the first node's inputs are not the graph's.
    if model.graph.nodes.len() != 1 {
        return seen;
    }
    if float_arithmetic(model, inputs, right, theirs) {
        seen.push("float_arithmetic".to_string());
    }
    if same_lower_read_as_upper(model, inputs, theirs) {
        seen.push("same_lower_read_as_upper".to_string());
    }
    if same_pad_unclamped(model, inputs, theirs) {
        seen.push("same_pad_unclamped".to_string());
    }
    seen
}

/// `float_arithmetic`: every output of theirs is what float32 arithmetic
/// on the inputs rounded to float32 gives, where the case is double and
/// `right` is the double result (the data set's expected outputs in the
/// harness; in a differential run ours, which the oracle settles before
/// any finding applies).
///
/// Pad moves values, so theirs must hold exactly the right values rounded
/// to float32. A Conv must lie [`near`] the double result.
pub fn float_arithmetic(
    model: &Model,
    inputs: &[Tensor],
    right: &[Tensor],
    theirs: &[Tensor],
) -> bool {
    let Some(node) = model.graph.nodes.first() else {
        return false;
    };
    if right.len() != theirs.len() || right.iter().any(|t| t.dtype() != DataType::Double) {
        return false;
    }
    let pairs = || {
        right
            .iter()
            .zip(theirs)
            .map(|(o, t)| (o.array::<f64>(), t.array::<f64>()))
    };
    if pairs().any(|(o, t)| !matches!((o, t), (Some(o), Some(t)) if o.shape() == t.shape())) {
        return false;
    }
    match node.op_type.as_str() {
        "Pad" => pairs().all(|(o, t)| {
            let (o, t) = (o.expect("checked"), t.expect("checked"));
            o.iter().zip(t).all(|(&o, &t)| {
                ((o as f32) as f64).to_bits() == t.to_bits() || (o.is_nan() && t.is_nan())
            })
        }),
        "Conv" => {
            let (double, t) = (
                right[0].array::<f64>().expect("checked"),
                theirs[0].array::<f64>().expect("checked"),
            );
            let (double, t): (Vec<f64>, Vec<f64>) = (
                double.iter().copied().collect(),
                t.iter().copied().collect(),
            );
            in_float(model, inputs, node).is_some_and(|(bound, _)| near(&bound, &double, &t))
        }
        _ => false,
    }
}

/// `same_lower_read_as_upper`: a Conv with `auto_pad` SAME_LOWER whose
/// output is what SAME_UPPER gives (the odd unit of padding at the end
/// instead of the beginning, so the window sits one position late on
/// those axes), as float32 arithmetic computes it ([`near`]), where the
/// two paddings give different outputs at all (with an even total padding
/// they are the same, and there is nothing to read wrongly). Right
/// outputs and other wrong windows are far from it.
pub fn same_lower_read_as_upper(model: &Model, inputs: &[Tensor], theirs: &[Tensor]) -> bool {
    let Some(node) = model.graph.nodes.first() else {
        return false;
    };
    let same_lower =
        matches!(node.attribute("auto_pad"), Some(AttrValue::String(p)) if p == "SAME_LOWER");
    if node.op_type != "Conv" || !same_lower || theirs.len() != 1 {
        return false;
    }
    let mut upper = node.clone();
    for a in &mut upper.attributes {
        if a.name == "auto_pad" {
            a.value = AttrValue::String("SAME_UPPER".into());
        }
    }
    computes_as(model, inputs, node, &upper, &theirs[0])
}

/// `same_pad_unclamped`: a Conv with `auto_pad` SAME_UPPER or SAME_LOWER
/// whose total padding on some axis, `(ceil(n / s) - 1) * s + span - n`,
/// is negative (the spec clamps it at 0), and whose output is what that
/// negative padding gives when it is split as integer division toward
/// zero splits it (`total / 2` before for SAME_UPPER, `(total + 1) / 2`
/// for SAME_LOWER, the rest after): the window starts `-begin` elements
/// late on those axes. Computed as [`same_lower_read_as_upper`] is, and
/// only where it differs from the spec's output.
pub fn same_pad_unclamped(model: &Model, inputs: &[Tensor], theirs: &[Tensor]) -> bool {
    let Some(node) = model.graph.nodes.first() else {
        return false;
    };
    let upper = match node.attribute("auto_pad") {
        Some(AttrValue::String(p)) if p == "SAME_UPPER" => true,
        Some(AttrValue::String(p)) if p == "SAME_LOWER" => false,
        _ => return false,
    };
    if node.op_type != "Conv" || theirs.len() != 1 {
        return false;
    }
    let (Some(x), Some(w)) = (
        node.inputs
            .first()
            .and_then(|n| graph::given_value(model, inputs, n).ok()),
        node.inputs
            .get(1)
            .and_then(|n| graph::given_value(model, inputs, n).ok()),
    ) else {
        return false;
    };
    let (xs, ws) = (x.shape(), w.shape());
    let rank = xs.len().saturating_sub(2);
    if rank == 0 || ws.len() != rank + 2 {
        return false;
    }
    let ints = |name: &str| match node.attribute(name) {
        Some(AttrValue::Ints(v)) if v.len() == rank => Some(v.clone()),
        None => Some(vec![1; rank]),
        _ => None,
    };
    let (Some(strides), Some(dilations)) = (ints("strides"), ints("dilations")) else {
        return false;
    };
    let mut pads = vec![0i64; 2 * rank];
    for a in 0..rank {
        let (n, k, s, d) = (xs[a + 2] as i64, ws[a + 2] as i64, strides[a], dilations[a]);
        if s < 1 || d < 1 || k < 1 {
            return false;
        }
        let total = ((n + s - 1) / s - 1) * s + (k - 1) * d + 1 - n;
        let begin = if upper { total / 2 } else { (total + 1) / 2 };
        (pads[a], pads[a + rank]) = (begin, total - begin);
    }
    let mut unclamped = node.clone();
    unclamped
        .attributes
        .retain(|a| a.name != "auto_pad" && a.name != "pads");
    unclamped
        .attributes
        .push(crate::model::Attribute::new("pads", AttrValue::Ints(pads)));
    computes_as(model, inputs, node, &unclamped, &theirs[0])
}

/// Whether `theirs`, the output of the Conv `node`, is what the Conv
/// `misread` (the node as a runtime misreads it) gives, [`near`] it, where
/// the two nodes' outputs are not near each other (else the output tells
/// nothing about the reading).
fn computes_as(
    model: &Model,
    inputs: &[Tensor],
    node: &Node,
    misread: &Node,
    theirs: &Tensor,
) -> bool {
    let (Some((bound, wrong)), Some((_, right)), Ok(t)) = (
        in_float(model, inputs, misread),
        in_float(model, inputs, node),
        error_bound::values(theirs),
    ) else {
        return false;
    };
    near(&bound, &wrong, &t) && !near(&bound, &wrong, &right)
}

/// The strict bound of a Conv `node` and its f64 sums, both on `model`'s
/// inputs (the graph's inputs and initializers only; None where one is
/// computed or not a float) as a runtime that computes in float32 sees
/// them: double inputs rounded to float32, the others as they are (float,
/// and the half types, which such a runtime sums in float32 and rounds
/// once, as the strict bound of their type allows).
fn in_float(model: &Model, inputs: &[Tensor], node: &Node) -> Option<(ErrorBound, Vec<f64>)> {
    let value = |name: &String| -> Option<Tensor> {
        let t = graph::given_value(model, inputs, name).ok()?;
        if t.dtype() != DataType::Double {
            return Some(t.clone());
        }
        let v = error_bound::values(t).ok()?;
        Some(Tensor::from_vec(
            t.shape(),
            v.iter().map(|&v| v as f32).collect(),
        ))
    };
    let arg = |k: usize| node.inputs.get(k).filter(|n| !n.is_empty());
    let x = value(arg(0)?)?;
    let w = value(arg(1)?)?;
    let b = match arg(2) {
        Some(name) => Some(value(name)?),
        None => None,
    };
    error_bound::conv_with_sums(node, &x, &w, b.as_ref()).ok()
}

/// Whether `theirs` lies within twice `bound` (a strict float32 bound from
/// [`in_float`]) of `reference`, element by element.
///
/// A Conv computed in float32 from rounded inputs lies within
/// `g_{n+2} * (sum |w*x| + |b|)` of the exact result on the unrounded
/// ones (`g_n = (1 + u)^n - 1`; two input roundings per product on top of
/// the n-term sum; Higham's model as in `error_bound`), and a double
/// result or the f64 sums within far less; twice the strict float32 bound
/// (`2 * 2 * g_n * ...`) covers that for every n >= 1. A wrong window
/// or a dropped term differs by a sizeable part of the sum, far outside it.
fn near(bound: &ErrorBound, reference: &[f64], theirs: &[f64]) -> bool {
    reference.len() == bound.bound.len()
        && theirs.len() == reference.len()
        && reference
            .iter()
            .zip(theirs)
            .enumerate()
            .all(|(i, (&r, &t))| (r - t).abs() <= 2.0 * bound.at(i, r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AttrValue, Attribute, Graph, Node, ValueInfo};

    fn model(
        op: &str,
        inputs: &[&str],
        initializers: Vec<(String, Tensor)>,
        attributes: Vec<Attribute>,
    ) -> Model {
        Model {
            ir_version: 8,
            opset_import: vec![(String::new(), 18)],
            graph: Graph {
                name: "g".into(),
                nodes: vec![Node {
                    op_type: op.into(),
                    inputs: inputs.iter().map(|s| s.to_string()).collect(),
                    outputs: vec!["y".into()],
                    attributes,
                    ..Node::default()
                }],
                initializers,
                inputs: vec![ValueInfo {
                    name: "x".into(),
                    ..ValueInfo::default()
                }],
                outputs: vec![ValueInfo {
                    name: "y".into(),
                    ..ValueInfo::default()
                }],
            },
        }
    }

    fn doubles(v: &[f64]) -> Tensor {
        Tensor::from_vec(&[v.len()], v.to_vec())
    }

    fn rounded(v: &[f64]) -> Vec<f64> {
        v.iter().map(|&v| v as f32 as f64).collect()
    }

    #[test]
    fn pad_in_float_is_ours_rounded_and_nothing_else() {
        let m = model(
            "Pad",
            &["x", "pads"],
            vec![("pads".into(), Tensor::from_vec(&[2], vec![1i64, 0]))],
            vec![],
        );
        let ours = [0.0, 0.1, -2.3, 1e-40];
        let float = |v: &[f64]| {
            float_arithmetic(&m, &[doubles(&ours[1..])], &[doubles(&ours)], &[doubles(v)])
        };
        assert!(float(&rounded(&ours)));
        // The double result itself is not float arithmetic.
        assert!(!float(&ours));
        // A misplaced element is another bug.
        assert!(!float(&rounded(&[0.0, -2.3, 0.1, 1e-40])));
        // Another element type, or another shape, is not this property.
        let f32s = Tensor::from_vec(&[4], vec![0.0f32, 0.1, -2.3, 0.0]);
        assert!(!float_arithmetic(
            &m,
            &[],
            std::slice::from_ref(&f32s),
            std::slice::from_ref(&f32s)
        ));
        assert!(!float(&rounded(&ours[..3])));
    }

    #[test]
    fn conv_in_float_is_within_the_float_bound_and_a_shifted_window_is_not() {
        // A 1-D Conv, kernel 3, pads 1: y[i] = b + sum_t w[t] x[i + t - 1].
        let (x, w, b) = (
            vec![0.3, -1.7, 2.9, 0.11, -0.6],
            vec![1.3, -0.2, 0.77],
            0.05,
        );
        let exact = |shift: i64| -> Vec<f64> {
            (0..5i64)
                .map(|i| {
                    b + (0..3i64)
                        .filter_map(|t| {
                            x.get(usize::try_from(i + t - 1 + shift).ok()?)
                                .map(|&xv| w[t as usize] * xv)
                        })
                        .sum::<f64>()
                })
                .collect()
        };
        let in_float: Vec<f64> = (0..5i64)
            .map(|i| {
                let mut s = b as f32;
                for t in 0..3i64 {
                    if let Some(&xv) = usize::try_from(i + t - 1).ok().and_then(|j| x.get(j)) {
                        s += w[t as usize] as f32 * xv as f32;
                    }
                }
                s as f64
            })
            .collect();
        let m = model(
            "Conv",
            &["x", "w", "b"],
            vec![
                ("w".into(), Tensor::from_vec(&[1, 1, 3], w.clone())),
                ("b".into(), Tensor::from_vec(&[1], vec![b])),
            ],
            vec![Attribute::new("pads", AttrValue::Ints(vec![1, 1]))],
        );
        let t = |v: Vec<f64>| Tensor::from_vec(&[1, 1, 5], v);
        let inputs = [Tensor::from_vec(&[1, 1, 5], x.clone())];
        let float = |v: Vec<f64>| float_arithmetic(&m, &inputs, &[t(exact(0))], &[t(v)]);
        assert_ne!(in_float, exact(0));
        assert!(float(in_float));
        assert!(float(exact(0)));
        // The window one position late (SAME_LOWER read as SAME_UPPER).
        assert!(!float(exact(1)));
        // A thousand float32 units off on one value is not rounding.
        let mut far = exact(0);
        far[2] += 1000.0 * f32::EPSILON as f64 * far[2].abs();
        assert!(!float(far));
    }

    #[test]
    fn same_lower_read_as_upper_is_the_window_one_late_and_nothing_else() {
        // A 1-D float Conv, kernel 2, stride 1, SAME_*: one unit of padding,
        // at the beginning for SAME_LOWER (y[i] = w0 x[i-1] + w1 x[i]) and
        // at the end for SAME_UPPER (y[i] = w0 x[i] + w1 x[i+1]).
        let (x, w) = (vec![0.3f32, -1.7, 2.9, 0.11, -0.6], vec![1.3f32, -0.2]);
        let at = |i: i64| {
            usize::try_from(i)
                .ok()
                .and_then(|i| x.get(i))
                .copied()
                .unwrap_or(0.0)
        };
        let window = |first: i64| -> Vec<f32> {
            (0..5i64)
                .map(|i| w[0] * at(i + first) + w[1] * at(i + first + 1))
                .collect()
        };
        let (lower, upper) = (window(-1), window(0));
        let conv = |auto_pad: &str| {
            model(
                "Conv",
                &["x", "w"],
                vec![("w".into(), Tensor::from_vec(&[1, 1, 2], w.clone()))],
                vec![Attribute::new(
                    "auto_pad",
                    AttrValue::String(auto_pad.into()),
                )],
            )
        };
        let inputs = [Tensor::from_vec(&[1, 1, 5], x.clone())];
        let seen = |m: &Model, y: &[f32]| {
            same_lower_read_as_upper(m, &inputs, &[Tensor::from_vec(&[1, 1, 5], y.to_vec())])
        };
        let m = conv("SAME_LOWER");
        assert!(seen(&m, &upper));
        // The right output, or the window one place early, is not it.
        assert!(!seen(&m, &lower));
        assert!(!seen(&m, &window(-2)));
        // One value off by a thousand float32 units is another bug.
        let mut far = upper.clone();
        far[2] += 1000.0 * f32::EPSILON * far[2].abs();
        assert!(!seen(&m, &far));
        // Only a SAME_LOWER node can be read as SAME_UPPER.
        assert!(!seen(&conv("SAME_UPPER"), &upper));
        // A kernel of 3 pads one unit on each side either way: nothing to
        // read wrongly, so not even the right output shows the property.
        let w3 = vec![1.3f32, -0.2, 0.77];
        let even = model(
            "Conv",
            &["x", "w"],
            vec![("w".into(), Tensor::from_vec(&[1, 1, 3], w3.clone()))],
            vec![Attribute::new(
                "auto_pad",
                AttrValue::String("SAME_LOWER".into()),
            )],
        );
        let centred: Vec<f32> = (0..5i64)
            .map(|i| (0..3).map(|t| w3[t as usize] * at(i + t - 1)).sum())
            .collect();
        assert!(!seen(&even, &centred));
        let m = model("Pad", &["x"], vec![], vec![]);
        assert!(!same_lower_read_as_upper(&m, &inputs, &inputs));
    }

    #[test]
    fn same_pad_unclamped_starts_the_window_late_and_is_nothing_else() {
        // Length 4, kernel 1, stride 4, SAME_*: one output; the total
        // padding (1 - 1) * 4 + 1 - 4 = -3 is 0 for the spec (y = x[0] w),
        // and split toward zero it begins at -1 for both SAME_UPPER (-3 / 2)
        // and SAME_LOWER (-2 / 2): y = x[1] w.
        let (x, w) = (vec![0.3f32, -1.7, 2.9, 0.11], 1.3f32);
        let conv = |auto_pad: &str, stride: i64| {
            model(
                "Conv",
                &["x", "w"],
                vec![("w".into(), Tensor::from_vec(&[1, 1, 1], vec![w]))],
                vec![
                    Attribute::new("auto_pad", AttrValue::String(auto_pad.into())),
                    Attribute::new("strides", AttrValue::Ints(vec![stride])),
                ],
            )
        };
        let inputs = [Tensor::from_vec(&[1, 1, 4], x.clone())];
        let seen = |m: &Model, y: &[f32]| {
            let t = Tensor::from_vec(&[1, 1, y.len()], y.to_vec());
            same_pad_unclamped(m, &inputs, &[t])
        };
        for auto_pad in ["SAME_UPPER", "SAME_LOWER"] {
            let m = conv(auto_pad, 4);
            assert!(seen(&m, &[x[1] * w]), "{auto_pad}");
            // The spec's output, or another element, is not it.
            assert!(!seen(&m, &[x[0] * w]), "{auto_pad}");
            assert!(!seen(&m, &[x[2] * w]), "{auto_pad}");
        }
        // With stride 1 the padding is not negative: nothing to read late.
        assert!(!seen(
            &conv("SAME_UPPER", 1),
            &x.iter().map(|v| v * w).collect::<Vec<_>>()
        ));
        assert!(!seen(&conv("NOTSET", 4), &[x[1] * w]));
    }
}
