//! Fingerprint stability and sensitivity.

use csis_engine::*;
use serde_json::{json, Value};

fn l(s: &str) -> Label {
    Label::parse(s).unwrap()
}

fn bake_inputs() -> Value {
    json!({
        "series": "dask",
        "capabilities": {"identity_types": ["ldap"], "storage_types": []},
        "mods": [
            {"name": "base", "type": "ansible", "content": "3f2a"},
            {"name": "extra", "type": "shell", "content": "9b1c", "idempotent": true}
        ],
        "tests": ["id -u admin"],
        "disk_size": 20,
        "ratio": 1.5,
        "note": null
    })
}

#[test]
fn recipe_is_versioned_and_stable() {
    assert_eq!(RECIPE, "csis-fingerprint-v1");
    // A change to the encoding or recipe must be deliberate: it moves this value.
    let fp = Fingerprint::compute("bake", &bake_inputs(), &[]);
    assert_eq!(fp, Fingerprint::compute("bake", &bake_inputs(), &[]));
    assert_eq!(
        fp.to_hex(),
        "b26fbc7e84305d1422e15af534816d0fe31c96873029e3e80324b6627560a092",
        "the fingerprint recipe changed: bump RECIPE and record the new value"
    );
}

#[test]
fn key_order_does_not_matter() {
    let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": "s"}}"#).unwrap();
    let b: Value = serde_json::from_str(r#"{"a": {"x": "s", "y": [1, 2]}, "b": 1}"#).unwrap();
    assert_eq!(
        Fingerprint::compute("bake", &a, &[]),
        Fingerprint::compute("bake", &b, &[])
    );
    assert_eq!(canonical_bytes(&a), canonical_bytes(&b));
}

/// Every leaf of `v`, by JSON pointer.
fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, x)| leaves(x, format!("{at}/{k}"), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, x)| leaves(x, format!("{at}/{i}"), out)),
        _ => out.push(at),
    }
}

#[test]
fn any_input_change_moves_it() {
    let base = bake_inputs();
    let fp0 = Fingerprint::compute("bake", &base, &[]);
    let mut ptrs = Vec::new();
    leaves(&base, String::new(), &mut ptrs);
    assert!(ptrs.len() >= 10);
    for p in &ptrs {
        let mut v = base.clone();
        let leaf = v.pointer_mut(p).unwrap();
        *leaf = match leaf {
            Value::String(s) => Value::String(format!("{s}x")),
            Value::Number(n) => json!(n.as_f64().unwrap() + 1.0),
            Value::Bool(b) => Value::Bool(!*b),
            Value::Null => json!(0),
            _ => unreachable!(),
        };
        assert_ne!(Fingerprint::compute("bake", &v, &[]), fp0, "changing {p}");
    }
    // Removing a field, adding one, reordering an array.
    let mut v = base.clone();
    v.as_object_mut().unwrap().remove("note");
    assert_ne!(Fingerprint::compute("bake", &v, &[]), fp0);
    let mut v = base.clone();
    v["new"] = json!(false);
    assert_ne!(Fingerprint::compute("bake", &v, &[]), fp0);
    let mut v = base.clone();
    v["mods"].as_array_mut().unwrap().reverse();
    assert_ne!(Fingerprint::compute("bake", &v, &[]), fp0);
    // The kind is hashed.
    assert_ne!(Fingerprint::compute("emit", &base, &[]), fp0);
}

#[test]
fn hashed_deps_move_it_order_deps_do_not() {
    let mut g = Graph::new();
    let p = g
        .add_node(Node::new(l("//images/base@rt"), "bake").with_inputs(json!({"v": 1})))
        .unwrap();
    let emit = g
        .add_node(Node::new(l("//images/child@rt"), "emit").with_inputs(json!({"e": 1})))
        .unwrap();
    let c = g
        .add_node(Node::new(l("//images/child@rt"), "bake").with_inputs(json!({"v": 2})))
        .unwrap();
    g.add_dep(c, p, Dep::hashed("parent")).unwrap();
    g.add_dep(c, emit, Dep::Order).unwrap();
    let fps = g.fingerprints().unwrap();

    // The same graph with the parent's inputs changed: the child moves.
    let mut g2 = Graph::new();
    let p2 = g2
        .add_node(Node::new(l("//images/base@rt"), "bake").with_inputs(json!({"v": 9})))
        .unwrap();
    let emit2 = g2
        .add_node(Node::new(l("//images/child@rt"), "emit").with_inputs(json!({"e": 7})))
        .unwrap();
    let c2 = g2
        .add_node(Node::new(l("//images/child@rt"), "bake").with_inputs(json!({"v": 2})))
        .unwrap();
    g2.add_dep(c2, p2, Dep::hashed("parent")).unwrap();
    g2.add_dep(c2, emit2, Dep::Order).unwrap();
    let fps2 = g2.fingerprints().unwrap();
    assert_ne!(fps.get(p), fps2.get(p2));
    assert_ne!(
        fps.get(c),
        fps2.get(c2),
        "a hashed dependency moves the child"
    );
    assert_ne!(fps.get(emit), fps2.get(emit2));

    // Only the emit (an ordering dependency) changed: the child does not move.
    let mut g3 = Graph::new();
    let p3 = g3
        .add_node(Node::new(l("//images/base@rt"), "bake").with_inputs(json!({"v": 1})))
        .unwrap();
    let e3 = g3
        .add_node(Node::new(l("//images/child@rt"), "emit").with_inputs(json!({"e": 7})))
        .unwrap();
    let c3 = g3
        .add_node(Node::new(l("//images/child@rt"), "bake").with_inputs(json!({"v": 2})))
        .unwrap();
    g3.add_dep(c3, p3, Dep::hashed("parent")).unwrap();
    g3.add_dep(c3, e3, Dep::Order).unwrap();
    let fps3 = g3.fingerprints().unwrap();
    assert_eq!(fps.get(c), fps3.get(c3));

    // A pinned child hashing the parent's fingerprint as a literal equals the follow child.
    let mut g4 = Graph::new();
    let p4 = g4
        .add_node(Node::new(l("//images/base@rt"), "bake").with_inputs(json!({"v": 9})))
        .unwrap();
    let c4 = g4
        .add_node(Node::new(l("//images/child@rt"), "bake").with_inputs(json!({"v": 2})))
        .unwrap();
    g4.add_dep(c4, p4, Dep::pinned("parent", fps.get(p)))
        .unwrap();
    let fps4 = g4.fingerprints().unwrap();
    assert_eq!(
        fps4.get(c4),
        fps.get(c),
        "pinned literal == follow of the same parent"
    );

    // The hash name matters.
    let fa = Fingerprint::compute("bake", &json!({}), &[("parent", fps.get(p))]);
    let fb = Fingerprint::compute("bake", &json!({}), &[("base", fps.get(p))]);
    assert_ne!(fa, fb);
    // Dependency order does not.
    let x = Fingerprint::of_bytes(b"x");
    let y = Fingerprint::of_bytes(b"y");
    assert_eq!(
        Fingerprint::compute("bake", &json!({}), &[("a", x), ("b", y)]),
        Fingerprint::compute("bake", &json!({}), &[("b", y), ("a", x)])
    );
}

#[test]
fn labels_and_attrs_are_not_hashed() {
    let mut g = Graph::new();
    let a = g
        .add_node(
            Node::new(l("//images/a@rt1"), "bake")
                .with_inputs(json!({"v": 1}))
                .with_attr("series", "a")
                .with_cost(5)
                .with_pool("rt1"),
        )
        .unwrap();
    let b = g
        .add_node(Node::new(l("//images/b@rt2"), "bake").with_inputs(json!({"v": 1})))
        .unwrap();
    let fps = g.fingerprints().unwrap();
    assert_eq!(fps.get(a), fps.get(b));
}

#[test]
fn explain_diff_of_canonical_documents() {
    let mk = |content: &str, parent: u8| {
        let mut g = Graph::new();
        let p = g
            .add_node(Node::new(l("//images/base@rt"), "bake").with_inputs(json!({"v": parent})))
            .unwrap();
        let c = g
            .add_node(Node::new(l("//images/c@rt"), "bake").with_inputs(json!({
                "mods": [{"name": "a", "content": "aaaa"}, {"name": "b", "content": content}]
            })))
            .unwrap();
        g.add_dep(c, p, Dep::hashed("parent")).unwrap();
        let fps = g.fingerprints().unwrap();
        g.canonical(c, &fps)
    };
    let old = mk(&"3f2a".repeat(16), 1);
    let new = mk(&"9b1c".repeat(16), 2);
    let lines: Vec<String> = diff(&old, &new).iter().map(|c| c.to_string()).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("deps.parent: "), "{lines:?}");
    assert_eq!(
        lines[1],
        "inputs.mods[1].content (b): 3f2a3f2a.. -> 9b1c9b1c.."
    );
}

#[test]
fn canonical_bytes_follow_the_documented_recipe() {
    fn s(out: &mut Vec<u8>, x: &str) {
        out.extend_from_slice(&(x.len() as u64).to_le_bytes());
        out.extend_from_slice(x.as_bytes());
    }
    // {"b": [true, null], "a": 7, "c": "hi"}
    let mut want = Vec::new();
    want.push(b'{');
    want.extend_from_slice(&3u64.to_le_bytes());
    s(&mut want, "a");
    want.push(b'#');
    s(&mut want, "7");
    s(&mut want, "b");
    want.push(b'[');
    want.extend_from_slice(&2u64.to_le_bytes());
    want.push(b't');
    want.push(b'n');
    s(&mut want, "c");
    want.push(b's');
    s(&mut want, "hi");
    let v = json!({"b": [true, null], "a": 7, "c": "hi"});
    assert_eq!(canonical_bytes(&v), want);
}
