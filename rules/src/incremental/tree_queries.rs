//! The queries of the tree: each file parsed, and the tree loaded from the
//! parsed files (the loader over salsa inputs).

use super::*;

/// Parse one file into the spanned node tree (`yaml::parse_source`).
#[salsa::tracked(returns(ref))]
pub fn parse_file(db: &dyn Db, file: TreeFile) -> ParsedFile {
    db.counters().parses.fetch_add(1, Ordering::Relaxed);
    let path = file.path(db);
    let display = file.display(db);
    let mut h = blake3::Hasher::new();
    h.update(b"csis-incremental-parse-v1");
    put(&mut h, display.as_bytes());
    put(&mut h, path.to_string_lossy().as_bytes());
    let result = match file.text(db) {
        Ok(text) => {
            h.update(b"T");
            put(&mut h, text.as_bytes());
            let src = Arc::new(SourceFile {
                path: display.clone(),
                abs: path.clone(),
                text: text.clone(),
            });
            yaml::parse_source(src)
        }
        Err(e) => {
            h.update(b"E");
            put(&mut h, e.as_bytes());
            Err(Diagnostic::plain(display, format!("cannot read: {e}")))
        }
    };
    ParsedFile {
        hash: h.finalize(),
        result: Arc::new(result),
    }
}

/// Merge, template, type, resolve and validate the parsed files
/// ([`load::load_from_nodes`]).
#[salsa::tracked(returns(ref))]
pub fn load_tree(db: &dyn Db, input: TreeInput) -> LoadedTree {
    db.counters().loads.fetch_add(1, Ordering::Relaxed);
    let opts = input.options(db);
    let mut h = blake3::Hasher::new();
    h.update(b"csis-incremental-load-v1");
    put(&mut h, input.root(db).to_string_lossy().as_bytes());
    // The options by content (their Debug rendering is deterministic:
    // vectors, a BTreeMap, strings and a time).
    put(&mut h, format!("{:?}", opts.0).as_bytes());
    // What every series reads besides its own chain's image files: the
    // options and every file outside `images/` (cfg/, groups/, ...). With
    // overlays (whose files are not tracked) it is the whole tree's hash.
    let mut g = h.clone();
    let images = input.root(db).join("images");
    let mut nodes = Vec::with_capacity(input.files(db).len());
    let mut files = FxHashMap::with_capacity_and_hasher(input.files(db).len(), Default::default());
    for f in input.files(db) {
        let p = parse_file(db, *f);
        h.update(p.hash.as_bytes());
        if f.path(db).starts_with(&images) {
            files.insert(path_key(f.path(db)), p.hash);
        } else {
            g.update(p.hash.as_bytes());
        }
        nodes.push((f.path(db).clone(), p.hash, p.result.clone()));
    }
    let result = {
        let mut memo = db.image_memo().lock().unwrap_or_else(|e| e.into_inner());
        let r = load::load_from_parses(input.root(db), &opts.0, nodes, &mut memo);
        let c = db.counters();
        c.image_files_kept.fetch_add(memo.last.0, Ordering::Relaxed);
        c.image_files_loaded
            .fetch_add(memo.last.1, Ordering::Relaxed);
        c.image_files_resolved
            .fetch_add(memo.last_resolved, Ordering::Relaxed);
        r
    };
    let result = Arc::new(result);
    let hash = h.finalize();
    let globals = if opts.0.overlays.is_empty() {
        g.finalize()
    } else {
        hash
    };
    *db.loaded().lock().unwrap_or_else(|e| e.into_inner()) = Some(result.clone());
    LoadedTree {
        hash,
        globals,
        image_files: Arc::new(files),
        result,
    }
}
