//! meta-state files that are hostile or damaged: each is refused naming the
//! file and line, or recovered from, and nothing else is lost.

use std::time::Instant;

use csis_cache::{load_light, LocalDir, MetaState};

/// Nine levels of nine aliases: 9^9 nodes once expanded.
fn alias_bomb(key: &str) -> String {
    let mut s = format!("{key}:\n  a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        let p = i - 1;
        s.push_str(&format!(
            "  a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    s
}

#[test]
fn an_alias_bomb_in_lineage_or_pins_is_refused_naming_the_file() {
    for (file, key) in [("lineage.yaml", "builds"), ("pins.yaml", "images")] {
        let t = tempfile::tempdir().unwrap();
        let meta = t.path().join("meta-state");
        std::fs::create_dir_all(&meta).unwrap();
        std::fs::write(meta.join(file), alias_bomb(key)).unwrap();
        let m = MetaState::of_tree(t.path());
        let started = Instant::now();
        let err = if file == "lineage.yaml" {
            m.lineage().map(|_| ()).unwrap_err()
        } else {
            m.pins().map(|_| ()).unwrap_err()
        };
        let msg = err.to_string();
        assert!(msg.contains(file), "{msg}");
        assert!(msg.contains("aliases expand") || msg.contains("alias"), "{msg}");
        assert!(msg.contains(&format!("{file}:")), "names a line: {msg}");
        let light = load_light(&m, &LocalDir::of_tree(t.path()))
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(light.contains(file), "{light}");
        assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
    }
}
