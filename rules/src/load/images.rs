//! Images (`images:`): templates with the image as `this` and `image`,
//! the strict model, its runtime entries and modifications as the
//! resolution fills them in.

use super::{Item, Loader};
use crate::tree::*;
use csis_schema::model::*;
use csis_schema::yaml::{join_path, Node};

impl Loader<'_> {
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
                item: m.clone(),
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
            model,
            parent: Parent::Os(String::new()),
            primary_builder: None,
            runtimes,
            mods,
            origin: Origin::of(&it.node, it.path),
        })
    }
}
