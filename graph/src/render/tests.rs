//! Renderer unit tests on small hand-made graphs.

use super::*;
use crate::model::{Behind, Build, Due, Edge};

fn node(id: &str, series: &str) -> Node {
    Node {
        id: id.into(),
        kind: "image".into(),
        series: series.into(),
        runtime: Some("sim".into()),
        build: Some(Build {
            id: format!("dummy-{series}0000000000-1"),
            at: Some(1000),
        }),
        ..Node::default()
    }
}

fn sample() -> Graph {
    let mut web = node("//images/web@sim", "web");
    web.due = Some(Due {
        code: "inputs-changed".into(),
        reason: "inputs changed".into(),
        changed: vec!["inputs.mods[0].files[0] (playbooks/web.yml)".into()],
    });
    web.released = vec!["stable".into()];
    web.pinned_children = vec!["app".into()];
    let mut app = node("//images/app<&>@sim", "app<&>\"");
    app.behind = Some(Behind {
        pinned: "a".into(),
        head: "b".into(),
    });
    app.revoked = vec!["dummy-x".into()];
    let tools = node("//images/tools@sim", "tools");
    Graph {
        title: "t".into(),
        now: Some(1000 + 3 * 86_400),
        folded: true,
        nodes: vec![web, app, tools],
        edges: vec![
            Edge {
                from: "//images/web@sim".into(),
                to: "//images/app<&>@sim".into(),
                kind: EdgeKind::Pinned,
                behind: true,
            },
            Edge {
                from: "//images/web@sim".into(),
                to: "//images/tools@sim".into(),
                kind: EdgeKind::Follow,
                behind: false,
            },
        ],
    }
}

#[test]
fn svg_is_xml_with_every_label_mark_and_edge_kind() {
    let s = svg(&sample());
    let doc = roxmltree::Document::parse(&s).expect("well-formed SVG");
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    let all = texts.join("\n");
    for want in [
        "web",
        "app<&>\"",
        "tools",
        "★ stable",
        "⚓ 1 pinned",
        "↺ behind parent",
        "⊘ revoked",
        "due: inputs changed",
        "inputs.mods[0].files[0]",
        "(playbooks/web.yml)",
        "dummy-web00000 · 3d",
    ] {
        assert!(all.contains(want), "{want} missing from the SVG texts");
    }
    let classes: Vec<&str> = doc
        .descendants()
        .filter_map(|n| n.attribute("class"))
        .collect();
    assert!(classes.contains(&"edge pinned behind"));
    assert!(classes.contains(&"edge follow"));
    assert!(classes.iter().any(|c| c.starts_with("node image due")));
}

#[test]
fn dot_and_mermaid_carry_the_marks_and_edge_kinds() {
    let g = sample();
    let d = dot(&g);
    assert!(d.contains("class=\"node image due released pins\""), "{d}");
    assert!(d.contains("[class=\"pinned behind\", style=dashed"));
    assert!(d.contains("[class=\"follow\", penwidth=1.4]"));
    let m = mermaid(&g);
    assert!(m.contains("n0 -. behind .-> n1"), "{m}");
    assert!(m.contains("n0 --> n2"));
    assert!(m.contains("class n0 due;"));
    assert!(m.contains("#lt;&#gt;"));
}

#[test]
fn html_embeds_everything_and_escapes_the_data() {
    let mut g = sample();
    g.nodes[2].series = "</script><script>alert(1)</script>".into();
    let h = html(&g);
    assert_eq!(
        h.matches("<script").count(),
        2,
        "only the data and the page script"
    );
    assert!(!h.contains("src="));
    assert!(!h.contains("https://"));
    let v: serde_json::Value = serde_json::from_str(
        h.split("id=\"csis-graph\">")
            .nth(1)
            .unwrap()
            .split("</script>")
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(v["nodes"].as_array().unwrap().len(), 3);
}

#[test]
fn a_fleet_card_says_what_the_plan_does_with_it() {
    let mut data = node("//storages/data@sim", "data");
    data.kind = "storage".into();
    data.build = None;
    data.steps = vec![crate::model::Step {
        label: "//storages/data@sim:storage".into(),
        kind: "storage".into(),
        due: false,
        reason: "create data: new -> active (gated: apply_storage is false)".into(),
        ..Default::default()
    }];
    assert!(data.is_fleet() && !data.is_series());
    assert_eq!(card::build_line(&data, Some(1000)), "create data");
    // an image card is unchanged
    assert!(card::build_line(&node("//images/web@sim", "web"), None).starts_with("dummy-web"));
}
