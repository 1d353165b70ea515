//! The starter trees `csis init` writes, as the loader reads them: the dummy
//! starter is a chain on a dummy runtime whose modification files it ships.
//! What `init` prints, and that every starter validates, is the output
//! cases `tests/cli_cases/init-*.case`.

#[test]
fn the_dummy_starter_has_a_chain_on_a_dummy_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("t");
    let (code, out, err) = csis_testkit::output(csis_testkit::csis().arg("init").arg(&tree));
    assert_eq!(code, 0, "csis init failed:\n{out}\n{err}");
    let t = csis_rules::load(&tree, &csis_rules::LoadOptions::default()).unwrap();
    let rt = t.default_runtime().unwrap();
    assert_eq!(rt.type_name(), "dummy");
    let app = t.image("app-server").unwrap();
    assert_eq!(
        t.chain(app).iter().map(|l| l.name()).collect::<Vec<_>>(),
        ["app-server", "base-tools", "debian-12"]
    );
    assert!(app
        .runtimes
        .iter()
        .all(|r| r.runtime.as_deref() == Some(rt.name.as_str())));
    for m in t
        .mod_inputs(app)
        .iter()
        .chain(t.mod_inputs(t.image("base-tools").unwrap()).iter())
    {
        for f in &m.files {
            assert!(f.is_file(), "the starter ships {}", f.display());
        }
    }
}
