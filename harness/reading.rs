//! Trials that hold an older operator text to a later version's reading of
//! it. Their expected outputs follow the later text, which the older one
//! does not say (or says otherwise), so a pass there is weaker evidence than
//! a plain pass: such trials carry `~later-reading` in their name, the
//! reason in their record, and the report counts them apart.

use onnx_conformance::model::{AttrValue, Node};

/// Appended to the name of a trial that assumes a later reading.
pub const SUFFIX: &str = "~later-reading";

/// Why the node, run at `version`, is judged by a later version's text.
pub fn later_reading(node: &Node, version: i64) -> Option<String> {
    match (node.op_type.as_str(), version) {
        ("Conv", v) if v < 11 => conv_same_with_stride(node, v),
        ("Pad", 1) => pad1_negative(node),
        _ => None,
    }
}

/// `name` with the label when `reading` is set.
pub fn label(name: String, reading: Option<&str>) -> String {
    match reading {
        Some(_) => name + SUFFIX,
        None => name,
    }
}

fn ints<'a>(node: &'a Node, name: &str) -> &'a [i64] {
    match node.attribute(name) {
        Some(AttrValue::Ints(v)) => v,
        _ => &[],
    }
}

/// Conv-1's text sizes SAME_* output like the input, which a stride above 1
/// cannot give; Conv-11 made it `ceil(input / stride)`.
fn conv_same_with_stride(node: &Node, version: i64) -> Option<String> {
    let mode = match node.attribute("auto_pad") {
        Some(AttrValue::String(m)) if m == "SAME_UPPER" || m == "SAME_LOWER" => m,
        _ => return None,
    };
    let strides = ints(node, "strides");
    if !strides.iter().any(|&s| s > 1) {
        return None;
    }
    Some(format!(
        "Conv-{version}'s auto_pad text says {mode} pads \"so that the output spatial size match the input\", \
         which strides {strides:?} cannot give; the expected output follows Conv-11's \
         \"output_shape[i] = ceil(input_shape[i] / strides[i])\""
    ))
}

/// Pad-1's `paddings` only count "pixels added"; removing with negative
/// values is worded from Pad-2 on.
fn pad1_negative(node: &Node) -> Option<String> {
    let paddings = ints(node, "paddings");
    if !paddings.iter().any(|&p| p < 0) {
        return None;
    }
    Some(format!(
        "Pad-1's paddings text only says \"xi_begin the number of pixels added at the beginning of axis `i`\"; \
         paddings {paddings:?} are negative and the expected output follows Pad-2's \
         \"number of padding elements to add or remove (if negative)\""
    ))
}
