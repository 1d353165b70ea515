//! `csis builds` and the build resolver (`csis_cache::build_ref`) on builds
//! made by the real `csis` binary on the dummy runtime, from a temporary
//! copy of `tests/fixtures/ops/basic`.

use csis_cache::build_ref::{hash_part, resolve_build, short_id, BuildRefError, BuildScope};
use csis_cache::MetaState;
use serde_json::Value;

use crate::ops_support;
use ops_support::Tree;

const WEB: &str = "  - name: web\n    source_image: deb12\n    parent_policy: follow\n";
const WEB_MODIFIED: &str = "  - name: web\n    source_image: deb12\n    parent_policy: follow\n    modifications:\n      - {name: web-setup, type: bash, scripts: [scripts/web.sh]}\n";

/// The line of `out` that shows a build's short id, and where it is.
fn line_of<'a>(out: &'a str, id: &str) -> (usize, &'a str) {
    let s = short_id(id);
    let pos = out
        .find(&format!("  {s}  "))
        .unwrap_or_else(|| panic!("{s} not listed:\n{out}"));
    let end = out[pos..].find('\n').map_or(out.len(), |e| pos + e);
    (pos, &out[pos..end])
}

#[test]
fn builds_lists_both_builds_newest_first_with_marks_and_the_resolver_names_them() {
    let t = Tree::basic();
    std::fs::create_dir_all(t.root.join("scripts")).unwrap();
    std::fs::write(t.root.join("scripts/web.sh"), "echo one\n").unwrap();
    t.edit("images/images.yaml", WEB, WEB_MODIFIED);
    t.ok(&["build", "--json"]);
    // the edit: web's script changes, web and its follow child bake again.
    // Final names carry the time to the second: wait for the next second so
    // the two web builds have different names (one name of two builds is
    // refused as ambiguous, see the unit tests).
    std::thread::sleep(std::time::Duration::from_millis(1100));
    t.edit("scripts/web.sh", "one", "two");
    t.ok(&["build", "--json"]);
    let base = t.ids("deb12");
    let web = t.ids("web");
    let app = t.ids("app");
    assert_eq!(base.len(), 1);
    assert_eq!(web.len(), 2, "the edit bakes web again");
    assert_eq!(app.len(), 2, "app follows web");
    // marks: tools stays pinned to the first web build; a release; a revocation
    t.ok(&["release", "app", "--build", &app[1], "--model", "prod"]);
    // the commands take a build by a hash prefix as by its full id
    let app_old_prefix: String = hash_part(&app[0]).chars().take(10).collect();
    t.ok(&["revoke", &app_old_prefix, "--reason", "old"]);

    let out = t.ok(&["builds"]);
    for header in ["deb12@sim", "web@sim", "app@sim", "tools@sim"] {
        assert!(out.lines().any(|l| l == header), "{header}:\n{out}");
    }
    let (new_pos, new_line) = line_of(&out, &web[1]);
    let (old_pos, old_line) = line_of(&out, &web[0]);
    assert!(new_pos < old_pos, "newest first:\n{out}");
    assert!(new_line.contains("head"), "{new_line}");
    assert!(!old_line.contains("head"), "{old_line}");
    assert!(old_line.contains("pinned(tools@sim)"), "{old_line}");
    assert!(
        new_line.contains(&format!("parent {}", short_id(&base[0]))),
        "{new_line}"
    );
    let (a_new, a_new_line) = line_of(&out, &app[1]);
    let (a_old, a_old_line) = line_of(&out, &app[0]);
    assert!(a_new < a_old, "{out}");
    assert!(a_new_line.contains("released(prod)"), "{a_new_line}");
    assert!(a_old_line.contains("revoked(old)"), "{a_old_line}");
    let web_name = {
        let l = MetaState::of_tree(&t.root).lineage().unwrap();
        l.find(&web[1]).unwrap().name.clone().unwrap()
    };
    assert!(new_line.contains(&web_name), "{new_line}");

    // --json: the same rows
    let rows: Vec<Value> = serde_json::from_str(&t.ok(&["builds", "--json"])).unwrap();
    let web_rows: Vec<&Value> = rows.iter().filter(|r| r["series"] == "web").collect();
    let ids: Vec<&str> = web_rows
        .iter()
        .map(|r| r["build_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![web[1].as_str(), web[0].as_str()]);
    assert_eq!(web_rows[0]["head"], true);
    assert_eq!(web_rows[0]["runtime"], "sim");
    assert_eq!(web_rows[0]["name"], web_name.as_str());
    assert_eq!(web_rows[0]["short_id"], short_id(&web[1]).as_str());
    assert_eq!(web_rows[0]["parent"], base[0].as_str());
    assert_eq!(web_rows[0]["parent_short"], short_id(&base[0]).as_str());
    assert!(web_rows[0]["age_seconds"].is_u64(), "{}", web_rows[0]);
    assert_eq!(web_rows[1]["head"], false);
    assert_eq!(web_rows[1]["pinned_by"], serde_json::json!(["tools@sim"]));
    let app_rows: Vec<&Value> = rows.iter().filter(|r| r["series"] == "app").collect();
    assert_eq!(app_rows[0]["released"], serde_json::json!(["prod"]));
    assert_eq!(app_rows[1]["revoked"], true);
    assert_eq!(app_rows[1]["revoked_reason"], "old");

    // PATTERN (substring, glob) and --runtime
    let only: Vec<Value> = serde_json::from_str(&t.ok(&["builds", "we", "--json"])).unwrap();
    assert_eq!(only.len(), 2);
    assert!(only.iter().all(|r| r["series"] == "web"));
    let glob: Vec<Value> = serde_json::from_str(&t.ok(&["builds", "a*", "--json"])).unwrap();
    assert_eq!(glob.len(), 2);
    assert!(glob.iter().all(|r| r["series"] == "app"));
    let none: Vec<Value> =
        serde_json::from_str(&t.ok(&["builds", "--runtime", "elsewhere", "--json"])).unwrap();
    assert!(none.is_empty());
    assert!(t
        .ok(&["builds", "--runtime", "elsewhere"])
        .contains("no recorded builds on elsewhere"));
    let (code, _, err) = t.run(&["builds", "x["]);
    assert_eq!(code, 2);
    assert!(err.contains("invalid series pattern 'x['"), "{err}");

    // the resolver: a prefix and a name name the same build as the full id
    let lineage = MetaState::of_tree(&t.root).lineage().unwrap();
    let all = BuildScope::default();
    let full = resolve_build(&lineage, &web[1], all).unwrap();
    let prefix: String = hash_part(&web[1]).chars().take(8).collect();
    assert_eq!(resolve_build(&lineage, &prefix, all).unwrap(), full);
    assert_eq!(
        resolve_build(&lineage, &format!("dummy-{prefix}"), all).unwrap(),
        full
    );
    assert_eq!(resolve_build(&lineage, &web_name, all).unwrap(), full);
    assert!(matches!(
        resolve_build(&lineage, &prefix[..7], all),
        Err(BuildRefError::TooShort { .. })
    ));

    // a second bake of the same inputs shares the hash prefix: refused, listing both
    t.ok(&["build", "--json", "--force-bake", "deb12"]);
    let base = t.ids("deb12");
    assert_eq!(base.len(), 2);
    let lineage = MetaState::of_tree(&t.root).lineage().unwrap();
    let prefix: String = hash_part(&base[0]).chars().take(8).collect();
    assert_eq!(
        prefix,
        hash_part(&base[1]).chars().take(8).collect::<String>()
    );
    let err = resolve_build(&lineage, &prefix, all).unwrap_err();
    let BuildRefError::Ambiguous { candidates, .. } = &err else {
        panic!("{err}")
    };
    let named: Vec<&str> = candidates.iter().map(|c| c.build_id.as_str()).collect();
    assert_eq!(named, vec![base[0].as_str(), base[1].as_str()]);
    let text = err.to_string();
    assert!(text.contains("deb12@sim"), "{text}");
    // the full id and the name still name one build each
    assert_eq!(
        resolve_build(&lineage, &base[1], all).unwrap().build_id,
        base[1]
    );
    let name0 = lineage.find(&base[0]).unwrap().name.clone().unwrap();
    assert_eq!(
        resolve_build(&lineage, &name0, all).unwrap().build_id,
        base[0]
    );
    // the command refuses the ambiguous prefix in one clear answer and changes nothing
    let revocations = std::fs::read(t.root.join("meta-state/revocations.yaml")).ok();
    let (code, _, err) = t.run(&["revoke", &prefix]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("names 2 recorded builds"), "{err}");
    assert_eq!(
        std::fs::read(t.root.join("meta-state/revocations.yaml")).ok(),
        revocations
    );
    let (code, _, err) = t.run(&["dispose", "image", &prefix[..7]]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("too short"), "{err}");
    assert_eq!(t.ids("deb12").len(), 2, "nothing disposed");
    let e = resolve_build(&lineage, "no-such-build", all).unwrap_err();
    assert!(matches!(e, BuildRefError::NotFound { .. }));
    assert!(!e.to_string().contains('\n'), "{e}");
}
