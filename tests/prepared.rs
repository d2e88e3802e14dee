//! Prepared models (`Model::prepare`): the per-model work must not change a
//! single bit of any output, and must never stand in for a value the run
//! would read from elsewhere.

mod support;

use half::{bf16, f16};
use onnx_conformance::model::{AttrValue, Model};
use onnx_conformance::{Error, Limits, Tensor};
use support::rng::Rng;
use support::{model, node};

/// A Conv whose W and B are initializers (`constant`) or graph inputs.
fn conv_model(constant: bool, w: &Tensor, b: &Tensor, group: i64) -> (Model, Vec<&'static str>) {
    let attrs = vec![
        ("pads", AttrValue::Ints(vec![1, 0, 2, 1])),
        ("group", AttrValue::Int(group)),
    ];
    let conv = node("Conv", &["x", "w", "b"], "y", attrs);
    if constant {
        let mut m = model(22, vec![conv], &["x"], &["y"]);
        m.graph.initializers = vec![("w".into(), w.clone()), ("b".into(), b.clone())];
        (m, vec!["x"])
    } else {
        (
            model(22, vec![conv], &["x", "w", "b"], &["y"]),
            vec!["x", "w", "b"],
        )
    }
}

/// The tensor as serialized: equal bytes are equal bits.
fn bits(t: &Tensor) -> Vec<u8> {
    onnx_conformance::proto::save_tensor("t", t).unwrap()
}

#[test]
fn constant_weights_give_the_same_bits_as_fed_weights() {
    let mut r = Rng::new(7);
    for trial in 0..24 {
        let group = [1, 2, 4][trial % 3];
        let (c, m) = (4, 4 * (1 + trial % 2));
        let xs = [1usize, c, 5 + trial % 4, 6];
        let ws = [m, c / group as usize, 3, 2];
        let mut draw = |n: usize| (0..n).map(|_| r.signed_unit()).collect::<Vec<f64>>();
        let (xv, wv, bv) = (
            draw(xs.iter().product()),
            draw(ws.iter().product()),
            draw(m),
        );
        let cast = |shape: &[usize], v: &[f64], ty: usize| match ty {
            0 => Tensor::from_vec(shape, v.iter().map(|&a| a as f32).collect()),
            1 => Tensor::from_vec(shape, v.to_vec()),
            2 => Tensor::from_vec(shape, v.iter().map(|&a| f16::from_f64(a)).collect()),
            _ => Tensor::from_vec(shape, v.iter().map(|&a| bf16::from_f64(a)).collect()),
        };
        for ty in 0..4 {
            let (x, w, b) = (cast(&xs, &xv, ty), cast(&ws, &wv, ty), cast(&[m], &bv, ty));
            let (fed, _) = conv_model(false, &w, &b, group);
            let (constant, _) = conv_model(true, &w, &b, group);
            let want = onnx_conformance::graph::run(
                &fed,
                &[x.clone(), w.clone(), b.clone()],
                Limits::default(),
            )
            .unwrap();
            let prepared = constant.prepare(Limits::default()).unwrap();
            // Twice: the prepared state is read, never consumed.
            for _ in 0..2 {
                let got = prepared.run(std::slice::from_ref(&x)).unwrap();
                assert_eq!(bits(&got[0]), bits(&want[0]), "trial {trial}, type {ty}");
            }
        }
    }
}

#[test]
fn an_initializer_a_node_overwrites_is_not_prepared() {
    // Breaks single assignment: `w` is an initializer and an Add's output.
    // The run reads the Add's value, so preparation must not use the
    // initializer's.
    let x = Tensor::from_vec(&[1, 1, 3, 3], vec![1f32; 9]);
    // Eight output channels, so that W is one the preparation packs.
    let w0 = Tensor::from_vec(&[8, 1, 2, 2], [1f32, 2.0, 3.0, 4.0].repeat(8));
    let delta = Tensor::from_vec(&[8, 1, 2, 2], vec![10f32; 32]);
    let build = |written: &str| {
        let mut m = model(
            22,
            vec![
                node("Add", &["w0", "delta"], written, vec![]),
                node("Conv", &["x", written], "y", vec![]),
            ],
            &["x"],
            &["y"],
        );
        m.graph.initializers = vec![
            ("w0".into(), w0.clone()),
            ("delta".into(), delta.clone()),
            (
                "w".into(),
                Tensor::from_vec(&[8, 1, 2, 2], vec![100f32; 32]),
            ),
        ];
        m
    };
    let run = |m: &Model| {
        onnx_conformance::graph::run(m, std::slice::from_ref(&x), Limits::default()).unwrap()
    };
    let clean = run(&build("w_sum"));
    assert_eq!(bits(&run(&build("w"))[0]), bits(&clean[0]));
    // (1+10)+(2+10)+(3+10)+(4+10) at each of the 4 positions of 8 channels.
    assert_eq!(
        clean[0]
            .array::<f32>()
            .unwrap()
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        vec![50.0; 32]
    );
}

#[test]
fn a_node_without_a_kernel_fails_preparation() {
    let m = model(
        22,
        vec![node("NoSuchOp", &["x"], "y", vec![])],
        &["x"],
        &["y"],
    );
    match m.prepare(Limits::default()) {
        Err(e @ Error::NoKernel { .. }) => assert!(e.to_string().contains("NoSuchOp"), "{e}"),
        Err(e) => panic!("expected no-kernel, got {e}"),
        Ok(_) => panic!("a model with an unknown operator was prepared"),
    }
}

/// Every Conv case in `cases/`, run again with its weights (and bias) made
/// initializers: the prepared run must give the fed run's bits exactly. The
/// conformance suite judges the fed run against the case's oracle, so this
/// extends that verdict to the prepared path.
#[test]
fn every_conv_case_gives_the_same_bits_with_constant_weights() {
    use onnx_conformance::proto::{load_model_file, load_tensor_file};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cases");
    let mut checked = 0;
    for entry in walkdir::WalkDir::new(&root).sort_by_file_name() {
        let entry = entry.unwrap();
        if entry.file_name() != "model.onnx" || entry.path().starts_with(root.join("invalid")) {
            continue;
        }
        let dir = entry.path().parent().unwrap();
        let Ok(m) = load_model_file(entry.path(), Limits::default()) else {
            continue;
        };
        let [conv] = m.graph.nodes.as_slice() else {
            continue;
        };
        let data = dir.join("test_data_set_0");
        if conv.op_type != "Conv" || !data.is_dir() {
            continue;
        }
        let feeds = onnx_conformance::graph::feed_names(&m);
        let inputs: Vec<Tensor> = (0..feeds.len())
            .map(|i| load_tensor_file(&data.join(format!("input_{i}.pb")), Limits::default()))
            .map(|r| r.unwrap().1)
            .collect();
        let want = onnx_conformance::graph::run(&m, &inputs, Limits::default());
        // W and B (the node's inputs after X) become initializers.
        let mut constant = m.clone();
        let mut data_inputs = Vec::new();
        for (name, t) in feeds.iter().zip(&inputs) {
            if conv.inputs.iter().skip(1).any(|n| n == name) {
                constant
                    .graph
                    .initializers
                    .push((name.to_string(), t.clone()));
            } else {
                data_inputs.push(t.clone());
            }
        }
        let got = constant
            .prepare(Limits::default())
            .and_then(|p| p.run(&data_inputs));
        match (want, got) {
            (Ok(w), Ok(g)) => {
                assert_eq!(w.len(), g.len(), "{}", dir.display());
                for (a, b) in w.iter().zip(&g) {
                    assert_eq!(bits(a), bits(b), "{}", dir.display());
                }
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{}", dir.display()),
            (w, g) => panic!(
                "{}: fed {:?} but constant {:?}",
                dir.display(),
                w.map(|_| ()),
                g.map(|_| ())
            ),
        }
        checked += 1;
    }
    eprintln!("{checked} Conv cases checked");
    // The fetched and generated cases hold well over this many Conv models.
    assert!(
        checked >= 50,
        "only {checked} Conv cases found under {}",
        root.display()
    );
}
