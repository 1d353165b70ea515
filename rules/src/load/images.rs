//! Images (`images:`): templates with the image as `this` and `image`,
//! the strict model, its runtime entries and modifications as the
//! resolution fills them in.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use super::index::Declared;
use super::{first_marker, ImageSpan, Item, Loader, MemoFile};
use crate::template::Renderer;
use crate::tree::*;
use csis_schema::model::*;
use csis_schema::secret;
use csis_schema::yaml::{join_path, Node};

/// A file of `images/` as the load found it: kept (its images are the
/// memo's entry of that path), or loaded anew (kept in the memo under its
/// path, unless it has no hash or holds a marker).
enum Got {
    Kept(PathBuf),
    Loaded(Option<PathBuf>, Vec<Arc<Image>>),
}

impl Loader<'_> {
    /// The images of `images/` from the caller's parses, each file's from
    /// the memo when its parse is the one the memo holds (under the same
    /// key), else loaded and kept there ([`super::ImageMemo`]); a kept
    /// file's images come resolved when the resolution's context is the
    /// one they were resolved in ([`Loader::keep_resolved`] keeps them).
    pub(super) fn load_images_memo(&mut self) -> Vec<Arc<Image>> {
        let Some(memo) = self.memo.take() else {
            return Vec::new();
        };
        let key = self.memo_key();
        if memo.key != Some(key) {
            memo.files.clear();
            memo.key = Some(key);
        }
        memo.last = (0, 0);
        memo.last_resolved = 0;
        let dir = self.root.join("images");
        // each file's images: kept (in the memo, by path) or loaded
        let mut got: Vec<Got> = Vec::new();
        let mut seen = HashSet::new();
        for path in self.pre_paths(&dir, true) {
            let Some(pre) = self.take_pre(&path) else {
                continue;
            };
            let kept = pre
                .hash
                .and_then(|h| memo.files.get(&path).filter(|m| m.hash == h));
            if let Some(m) = kept {
                self.d.items.extend(m.diags.iter().cloned());
                self.renderer.add_reads(&m.reads);
                memo.last.0 += 1;
                seen.insert(path.clone());
                got.push(Got::Kept(path));
                continue;
            }
            memo.last.1 += 1;
            // A file holding a marker is loaded anew every time: what its
            // markers open to depends on the identities, whose files the
            // key does not cover.
            let sealed = matches!(&*pre.parse, Ok(n) if first_marker(n).is_some());
            // the file's own template reads, kept with its images
            let own = Renderer::new(&self.env, &self.execution);
            let whole = std::mem::replace(&mut self.renderer, own);
            let before = self.d.items.len();
            let mut out = vec![("images".to_string(), Vec::new())];
            self.file_items(
                "images",
                &["images"],
                Arc::unwrap_or_clone(pre.parse),
                &mut out,
            );
            let mut loaded = Vec::new();
            for it in out.into_iter().flat_map(|(_, v)| v) {
                loaded.extend(self.load_image(it).map(Arc::new));
            }
            let reads = std::mem::replace(&mut self.renderer, whole).reads();
            self.renderer.add_reads(&reads);
            let kept_as = pre.hash.filter(|_| !sealed).map(|hash| {
                let diags = self.d.items[before..].to_vec();
                memo.files.insert(
                    path.clone(),
                    MemoFile {
                        hash,
                        images: loaded.clone(),
                        diags,
                        reads,
                        resolved: None,
                    },
                );
                seen.insert(path.clone());
                path
            });
            got.push(Got::Loaded(kept_as, loaded));
        }
        memo.files.retain(|p, _| seen.contains(p));
        // the context every image is resolved in: the files outside
        // `images/` and the names of every image, in order
        self.resolution_context = self.globals.map(|g| {
            // the bytes gathered, then hashed at once (5,000 images' names
            // are some 20,000 pieces)
            let mut h: Vec<u8> = Vec::with_capacity(64 * 1024);
            h.extend_from_slice(b"csis-image-resolution-v1\0");
            h.extend_from_slice(g.as_bytes());
            // the offline checks see tag keys redacted by the registry
            h.extend_from_slice(&(secret::count() as u64).to_le_bytes());
            let mut names = |i: &Arc<Image>| {
                let declared = [i.name.as_str(), i.declared_name()];
                for n in declared
                    .into_iter()
                    .chain(i.aliases().iter().map(String::as_str))
                {
                    h.extend_from_slice(&(n.len() as u64).to_le_bytes());
                    h.extend_from_slice(n.as_bytes());
                }
                h.push(0);
            };
            for g in &got {
                match g {
                    Got::Loaded(_, v) => v.iter().for_each(&mut names),
                    Got::Kept(p) => memo.files[p].images.iter().for_each(&mut names),
                }
            }
            blake3::hash(&h)
        });
        let mut images = Vec::new();
        self.spans.clear();
        for g in got {
            let start = images.len();
            let mut resolved = false;
            let path = match g {
                Got::Loaded(path, v) => {
                    images.extend(v);
                    path
                }
                Got::Kept(p) => {
                    let m = &memo.files[&p];
                    match &m.resolved {
                        Some((ctx, r)) if Some(*ctx) == self.resolution_context => {
                            images.extend(r.iter().cloned());
                            resolved = true;
                            memo.last_resolved += 1;
                        }
                        _ => images.extend(m.images.iter().cloned()),
                    }
                    Some(p)
                }
            };
            self.spans.push(ImageSpan {
                path,
                range: start..images.len(),
                resolved,
            });
        }
        self.memo = Some(memo);
        images
    }

    /// After the resolution: keep each memo file's images as resolved, for
    /// the next load in the same context, when the resolution added no
    /// diagnostic (`before`: the diagnostics before it). Files that came
    /// resolved are kept as they were.
    pub(super) fn keep_resolved(&mut self, t: &Tree, before: usize) {
        let (Some(ctx), Some(memo)) = (self.resolution_context, self.memo.as_deref_mut()) else {
            return;
        };
        if self.d.items.len() != before || self.d.has_errors() {
            return;
        }
        for span in self.spans.iter().filter(|s| !s.resolved) {
            let Some(m) = span.path.as_ref().and_then(|p| memo.files.get_mut(p)) else {
                continue;
            };
            m.resolved = Some((ctx, t.images[span.range.clone()].to_vec()));
        }
    }

    /// Which images of the load's list came resolved from the memo (empty:
    /// none).
    pub(super) fn came_resolved(&self, n: usize) -> Vec<bool> {
        if !self.spans.iter().any(|s| s.resolved) {
            return Vec::new();
        }
        let mut out = vec![false; n];
        for s in self.spans.iter().filter(|s| s.resolved) {
            out[s.range.clone()].iter_mut().for_each(|b| *b = true);
        }
        out
    }

    /// What an image's load reads besides its file: the options (the
    /// environment, the identity setting, the load's time) and the
    /// `execution.*` values.
    fn memo_key(&self) -> blake3::Hash {
        let mut h = blake3::Hasher::new();
        h.update(b"csis-image-memo-v1\0");
        h.update(format!("{:?}\0{:?}\0{:?}", self.opts, self.env, self.execution).as_bytes());
        h.finalize()
    }

    pub(super) fn load_image(&mut self, mut it: Item) -> Option<Image> {
        let (name, _) = self.head(&it.node, &it.path, false)?;
        self.decrypt(&mut it.node, &it.path, &["name", "type"]);
        if it.node.get("undeclare").is_some() {
            it.node.remove("undeclare");
        }
        // bash `script:` lines are literal
        self.render_this(&mut it.node, &it.path, &["script"], true);
        if let Some(pp) = it.node.get("parent_policy") {
            let v = pp.scalar_text().unwrap_or_default();
            if v != "pinned" && v != "follow" {
                self.d.error_hint(
                    &pp.loc,
                    &join_path(&it.path, "parent_policy"),
                    format!("unknown parent_policy `{v}`"),
                    "parent_policy is `pinned` or `follow`",
                );
                return None;
            }
        }
        let model: ImageModel = self.typed(&it.node, &it.path)?;
        let rnodes: &[Node] = it
            .node
            .get("runtimes")
            .and_then(|r| r.as_seq())
            .unwrap_or(&[]);
        let mnodes: &[Node] = it
            .node
            .get("modifications")
            .and_then(|r| r.as_seq())
            .unwrap_or(&[]);
        if model.runtimes.is_empty() {
            self.d.error_hint(
                &it.node.loc,
                &join_path(&it.path, "runtimes"),
                "an image needs at least one runtime entry",
                "add `runtimes: [{image_builder: <name>}]`",
            );
        }
        let runtimes = model
            .runtimes
            .iter()
            .enumerate()
            .map(|(i, e)| ImageRuntime {
                entry: e.clone(),
                label: e.name.clone().unwrap_or_else(|| e.image_builder.clone()),
                image_builder: None,
                runtime: None,
                origin: Origin::of(
                    rnodes.get(i).unwrap_or(&it.node),
                    format!("{}.runtimes[{i}]", it.path),
                ),
            })
            .collect();
        let mods = model
            .modifications
            .iter()
            .enumerate()
            .map(|(i, m)| ResolvedMod {
                item: Arc::new(m.clone()),
                builder: String::new(),
                kind: ModKind::Ansible,
                origin: Origin::of(
                    mnodes.get(i).unwrap_or(&it.node),
                    format!("{}.modifications[{i}]", it.path),
                ),
            })
            .collect();
        Some(Image {
            name: normalize_name(&name),
            display: name,
            model: Arc::new(model),
            parent: Parent::Os(String::new()),
            primary_builder: None,
            runtimes,
            mods,
            origin: Origin::of(&it.node, it.path),
            root: None,
        })
    }
}
