//! The lineage rules every runtime keeps, written once and called by each
//! runtime's tests (`ops_dummy`, `ops_docker`, `ops_aws`) with the runtime
//! under test: retention keeps a released and a pinned build and disposes
//! the rest children-first; a build the runtime sees in use refuses its
//! disposal; a foreign build is adopted by `state import`; a release is
//! recorded and marked on the runtime; a record the runtime's tags disagree
//! with is `changed` until `lineage relabel`; `lineage restamp` records the
//! current fingerprint. Each rule takes the builds it is about; what a
//! runtime adds (docker's layers kept for a child, the dummy's second
//! retention run) its own test asserts on what the rule returns.

use std::collections::BTreeSet;

use super::Tree;

/// Reads the tag `key` of a build on the runtime: (build id, key).
pub type TagReader<'a> = dyn Fn(&str, &str) -> Option<String> + 'a;

/// A runtime, as its tests see it through one tree.
pub struct RuntimeUnderTest<'a> {
    pub tree: &'a Tree,
    /// The runtime's name in the tree.
    pub name: &'a str,
    /// Whether the runtime still holds the image of a build (the dummy's
    /// store, a tag of docker's repository, a registered AMI).
    pub holds: &'a dyn Fn(&str) -> bool,
    /// The runtime's lineage tag `key` on a build, where the test can read
    /// it.
    pub tag: Option<&'a TagReader<'a>>,
}

impl RuntimeUnderTest<'_> {
    fn recorded(&self) -> BTreeSet<String> {
        self.tree.recorded()
    }

    fn record(&self, id: &str) -> csis_cache::BuildRecord {
        self.tree
            .meta()
            .lineage()
            .unwrap()
            .find(id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} is not recorded"))
    }
}

/// What a retention run is about: `retention_keep: 1` is declared, an
/// instance is pinned to a build, another may be released (the caller did
/// both).
pub struct Retention<'a> {
    /// `(build, series)` released and beyond keep (kept as debt).
    pub released: Option<(&'a str, &'a str)>,
    /// `(build, series, instance)` pinned to an instance.
    pub pinned: (&'a str, &'a str, &'a str),
    /// Beyond keep and in no use: disposed.
    pub disposed: &'a [&'a str],
    /// Kept: the newest of each series, the released and the pinned build.
    pub kept: &'a [&'a str],
    /// `(child, parent)`, both disposed: the child goes first.
    pub child_first: (&'a str, &'a str),
}

/// `dispose image --retention`: a dry run deletes nothing and lists what
/// goes; the run keeps the released and the pinned build as retention debt,
/// disposes the rest (gone from the runtime and the records), children
/// before parents, and keeps every other build and its record. Its output.
pub fn retention_keeps_released_and_pinned(rt: &RuntimeUnderTest, r: &Retention) -> String {
    let t = rt.tree;
    let before = rt.recorded();
    let dry = t.ok(&["dispose", "image", "--retention", "--dry-run"]);
    for id in r.disposed.iter().chain(r.kept) {
        assert!((rt.holds)(id), "a dry run deleted {id}:\n{dry}");
    }
    assert_eq!(rt.recorded(), before, "a dry run changed the records");
    for d in r.disposed {
        assert!(dry.contains(&format!("would dispose {d}")), "{d}:\n{dry}");
    }

    let out = t.ok(&["dispose", "image", "--retention"]);
    if let Some((rel, rel_series)) = r.released {
        let debt = format!(
            "kept (retention debt): {rel} ({rel_series} on {}): released on model",
            rt.name
        );
        assert!(out.contains(&debt), "{debt}\nin\n{out}");
    }
    let (pin, pin_series, instance) = r.pinned;
    let debt = format!(
        "kept (retention debt): {pin} ({pin_series} on {}): ",
        rt.name
    );
    let why = format!("pinned by instance {instance}: decommission first");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&debt) && l.contains(&why)),
        "{debt}...{why}\nin\n{out}"
    );
    let recorded = rt.recorded();
    for d in r.disposed {
        assert!(out.contains(&format!("disposed {d}")), "{d}:\n{out}");
        assert!(!(rt.holds)(d), "{d} is still on {}", rt.name);
        assert!(!recorded.contains(*d), "{d} is still recorded");
    }
    for k in r.kept {
        assert!((rt.holds)(k), "{k} was deleted");
        if before.contains(*k) {
            assert!(recorded.contains(*k), "{k} lost its record");
        }
    }
    let pos = |id: &str| out.find(&format!("disposed {id}")).unwrap();
    let (child, parent) = r.child_first;
    assert!(pos(child) < pos(parent), "children first: {out}");
    out
}

/// Three generations of a base, `web` (follow) and `app` (follow), their
/// builds `b`, `w`, `a` oldest first, and `retention_keep: 1` declared: the
/// second app build released (prod) and the first web build pinned to
/// instance vm-1 are kept as debt with the newest of each series; the older
/// base builds, the second web build and the first app build go, the web
/// build before its base. [`retention_keeps_released_and_pinned`]'s output.
pub fn retention_of_three_generations(
    rt: &RuntimeUnderTest,
    b: &[String],
    w: &[String],
    a: &[String],
) -> String {
    rt.tree
        .ok(&["release", "app", "--build", &a[1], "--model", "prod"]);
    rt.tree.pin_instance("vm-1", &w[0]);
    retention_keeps_released_and_pinned(
        rt,
        &Retention {
            released: Some((&a[1], "app")),
            pinned: (&w[0], "web", "vm-1"),
            disposed: &[&b[0], &b[1], &w[1], &a[0]],
            kept: &[&b[2], &w[0], &w[2], &a[1], &a[2]],
            child_first: (&w[1], &b[1]),
        },
    )
}

/// A build the runtime sees in use (by `user`: a container, an instance)
/// refuses the disposal of `ids`, and nothing is deleted.
pub fn in_use_refuses_disposal(rt: &RuntimeUnderTest, ids: &[&str], user: &str) {
    let t = rt.tree;
    let before = rt.recorded();
    let mut args = vec!["dispose", "image"];
    args.extend_from_slice(ids);
    let (code, _, err) = t.run(&args);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is in use") && err.contains(user), "{err}");
    assert!(err.contains("nothing was deleted"), "{err}");
    for id in ids {
        assert!((rt.holds)(id), "{id} was deleted");
    }
    assert_eq!(rt.recorded(), before, "the records changed");
}

/// `id` (a build of `series` from `parent`) is on the runtime and not
/// recorded: the state query reports it foreign, which is no hard drift
/// (exit 0) but fails `--strict`; `state import` adopts it with its parent,
/// and the records and the runtime agree again. The import's output.
pub fn foreign_is_adopted(rt: &RuntimeUnderTest, id: &str, series: &str, parent: &str) -> String {
    let t = rt.tree;
    let (code, out, err) = t.run(&["state", "query"]);
    assert_eq!(code, 0, "foreign is never hard drift: {out}\n{err}");
    let foreign: Vec<&str> = out.lines().filter(|l| l.contains(": foreign")).collect();
    assert_eq!(foreign.len(), 1, "{out}");
    assert!(
        foreign[0].contains(&format!("image {id}@{}: foreign", rt.name)),
        "{out}"
    );
    assert_eq!(t.run(&["state", "query", "--strict"]).0, 1);
    let out = t.ok(&["state", "import"]);
    assert!(
        out.contains(&format!("adopted {id} ({series} on {}", rt.name)),
        "{out}"
    );
    assert_eq!(rt.record(id).parent.as_deref(), Some(parent));
    let (code, q, _) = t.run(&["state", "query", "--strict"]);
    assert_eq!(code, 0, "{q}");
    out
}

/// `release SERIES --build ID --model MODEL`: recorded as the model's
/// current release and marked on the runtime; a second release of it
/// changes nothing.
pub fn release_is_recorded_and_marked(rt: &RuntimeUnderTest, series: &str, id: &str, model: &str) {
    let t = rt.tree;
    let args = ["release", series, "--build", id, "--model", model];
    let out = t.ok(&args);
    assert!(
        out.contains(&format!(
            "released {id} as {model} of {series} on {} (marked on the runtime)",
            rt.name
        )),
        "{out}"
    );
    let rel = t.meta().releases().unwrap();
    assert_eq!(rel.current[model][series], id);
    let n = rel.releases.len();
    if let Some(tag) = rt.tag {
        assert_eq!(tag(id, "csis_release").as_deref(), Some(model));
    }
    let out = t.ok(&args);
    assert!(
        out.contains(&format!("already the current {model} release")),
        "{out}"
    );
    assert_eq!(t.meta().releases().unwrap().releases.len(), n);
}

/// The runtime's tags on `id` disagree with its record: the state query
/// reports it `changed: <what>` (no hard drift, but `--strict` fails);
/// `lineage relabel` (a dry run first, which changes nothing) moves the
/// tags, and the query agrees.
pub fn changed_until_relabelled(rt: &RuntimeUnderTest, id: &str, what: &str) {
    let t = rt.tree;
    let (code, out, _) = t.run(&["state", "query"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("image {id}@{}: changed: {what}", rt.name)),
        "{out}"
    );
    assert_eq!(t.run(&["state", "query", "--strict"]).0, 1);
    let dry = t.ok(&["lineage", "relabel", "--runtime", rt.name, "--dry-run"]);
    assert!(dry.contains(&format!("would relabel {id}")), "{dry}");
    assert_eq!(t.run(&["state", "query", "--strict"]).0, 1);
    let out = t.ok(&["lineage", "relabel", "--runtime", rt.name]);
    assert!(out.contains(&format!("relabelled {id}")), "{out}");
    let (code, out, _) = t.run(&["state", "query", "--strict"]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("changed"), "{out}");
}

/// `id`, the only build of `series` whose recorded fingerprint is not the
/// current one (an older recipe's): `lineage restamp` (a dry run first,
/// which changes nothing) records the current fingerprint and the previous
/// one, marks it on the runtime, and a second restamp of the series has
/// nothing to do.
pub fn restamp_records_the_current_fingerprint(rt: &RuntimeUnderTest, series: &str, id: &str) {
    let t = rt.tree;
    let real = rt.record(id).input_fingerprint.unwrap();
    let old = "0".repeat(64);
    let mut l = t.meta().lineage().unwrap();
    l.builds
        .iter_mut()
        .find(|b| b.build_id == id)
        .unwrap()
        .input_fingerprint = Some(old.clone());
    t.meta().save_lineage(&l).unwrap();
    let dry = t.ok(&["lineage", "restamp", "--runtime", rt.name, "--dry-run"]);
    assert!(
        dry.contains(&format!(
            "would restamp {id} ({series}): 000000000000 -> {}",
            &real[..12]
        )),
        "{dry}"
    );
    assert_eq!(
        rt.record(id).input_fingerprint.as_deref(),
        Some(old.as_str())
    );
    let restamp = [
        "lineage",
        "restamp",
        "--runtime",
        rt.name,
        "--series",
        series,
    ];
    let out = t.ok(&restamp);
    assert!(out.contains(&format!("restamped {id}")), "{out}");
    let rec = rt.record(id);
    assert_eq!(rec.input_fingerprint.as_deref(), Some(real.as_str()));
    assert_eq!(rec.fingerprint_restamped.len(), 1);
    assert_eq!(rec.fingerprint_restamped[0].previous, old);
    if let Some(tag) = rt.tag {
        assert_eq!(
            tag(id, "csis_fingerprint").as_deref(),
            Some(&real[..16]),
            "the runtime's mark"
        );
    }
    let out = t.ok(&restamp);
    assert!(out.contains("nothing to restamp"), "{out}");
    let (code, out, _) = t.run(&["state", "query", "--strict"]);
    assert_eq!(code, 0, "{out}");
}
