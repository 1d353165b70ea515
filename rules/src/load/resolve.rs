//! Resolution: every class indexed by name, then every reference of the
//! configuration's entries resolved to the canonical name it names (state
//! backends, image builders, runtimes, executables), each class in its own
//! function; the series (OS builders and images) follow in
//! `resolve_series`.

use super::{is_absent, known, Loader};
use crate::tree::*;
use csis_schema::yaml::join_path;

impl Loader<'_> {
    pub(super) fn resolve(&mut self, t: &mut Tree) {
        let before = self.d.items.len();
        t.executables_by_name = self.index_of(&t.executables);
        t.runtimes_by_name = self.index_of(&t.runtimes);
        t.state_backends_by_name = self.index_of(&t.state_backends);
        t.os_builders_by_name = self.index_of(&t.os_builders);
        t.image_builders_by_name = self.index_of(&t.image_builders);
        t.mod_builders_by_name = self.index_of(&t.mod_builders);
        t.images_by_name = self.index_of(&t.images);
        self.check_shared_namespace(t);
        self.resolve_runtimes(t);
        self.resolve_image_builders(t);
        self.resolve_mod_builders(t);
        self.resolve_os_builders(t);
        // the images a kept file gives resolved are neither resolved nor
        // checked again (`ImageMemo`)
        let kept = self.came_resolved(t.images.len());
        self.resolve_images(t, &kept);
        t.set_chain_roots();
        for (i, img) in t.images.iter().enumerate() {
            let (Parent::Os(p) | Parent::Image(p)) = &img.parent;
            // a name copied once per parent, not once per child
            match t.kids.get_mut(p) {
                Some(v) => v.push(i),
                None => {
                    t.kids.insert(p.clone(), vec![i]);
                }
            }
        }
        self.check_cycles(t);
        if !self.d.has_errors() {
            self.check_series_on_runtimes(t, &kept);
        }
        self.keep_resolved(t, before);
    }

    /// Resolve an `image_builder:` reference to (canonical builder, canonical runtime).
    pub(super) fn resolve_builder_ref(
        &mut self,
        t: &Tree,
        name: &str,
        at: &Origin,
    ) -> (Option<String>, Option<String>) {
        // where an error is: the entry's `image_builder` (made only then)
        let field = || {
            (
                at.field("image_builder"),
                join_path(&at.path, "image_builder"),
            )
        };
        match t.image_builders_by_name.get(name) {
            Some(b) => {
                let ib = &t.image_builders[b];
                let rt = (!ib.runtime.is_empty()).then(|| ib.runtime.clone());
                (Some(ib.name.clone()), rt)
            }
            None if self.unused_image_builders.contains(&normalize_name(name)) => (None, None),
            None if is_absent(name) => {
                let (loc, path) = field();
                self.d.error_hint(
                    loc,
                    &path,
                    "`image_builder: default` but no image builder has is_default: true",
                    "name the image builder, or mark one is_default: true",
                );
                (None, None)
            }
            None => {
                let (loc, path) = field();
                self.d.error_hint(
                    loc,
                    &path,
                    format!("image builder `{name}` is not declared"),
                    known(
                        "image builders",
                        t.image_builders.iter().map(|b| b.display.as_str()),
                    ),
                );
                (None, None)
            }
        }
    }

    /// An image and an OS builder share the `source_image` namespace: no image
    /// has the name of an OS builder.
    pub(super) fn check_shared_namespace(&mut self, t: &Tree) {
        for img in &t.images {
            if let Some(o) = t.os_builders_by_name.map.get(&img.name) {
                let os = &t.os_builders[*o];
                self.d.error_hint(
                    img.origin.field("name"),
                    &join_path(&img.origin.path, "name"),
                    format!("image `{}` has the name of an OS builder", img.display),
                    format!(
                        "`source_image: {}` would be ambiguous; the OS builder is at {}",
                        img.display,
                        os.origin.display()
                    ),
                );
            }
        }
    }

    /// Each runtime's state backend (named, else the default) and executable
    /// (named, else `docker` for a docker runtime where declared); its default
    /// image builder must be declared.
    pub(super) fn resolve_runtimes(&mut self, t: &mut Tree) {
        for i in 0..t.runtimes.len() {
            let rt = &t.runtimes[i];
            let path = rt.origin.path.clone();
            let o = rt.origin.clone();
            let sc = rt.common.state_configuration.clone();
            let mut backend = None;
            if !is_absent(&sc) {
                match t.state_backends_by_name.get(&sc) {
                    Some(b) => backend = Some(t.state_backends[b].name.clone()),
                    None if self.unused_backends.contains(&normalize_name(&sc)) => {}
                    None => self.d.error_hint(
                        o.field("state_configuration"),
                        &join_path(&path, "state_configuration"),
                        format!("state_configuration `{sc}` names no declared state backend"),
                        known(
                            "state backends",
                            t.state_backends.iter().map(|b| b.display.as_str()),
                        ),
                    ),
                }
            } else if let Some(b) = t.state_backends_by_name.default {
                backend = Some(t.state_backends[b].name.clone());
            }
            let dib = rt.common.default_image_builder.clone();
            if !is_absent(&dib)
                && t.image_builders_by_name.get(&dib).is_none()
                && !self.unused_image_builders.contains(&normalize_name(&dib))
            {
                self.d.error_hint(
                    o.field("default_image_builder"),
                    &join_path(&path, "default_image_builder"),
                    format!("default_image_builder `{dib}` names no declared image builder"),
                    known(
                        "image builders",
                        t.image_builders.iter().map(|b| b.display.as_str()),
                    ),
                );
            }
            let mut exe = None;
            match &rt.common.executable {
                Some(e) => {
                    if exe_declared(t, e) {
                        exe = Some(normalize_name(e));
                    } else {
                        self.d.error_hint(
                            o.field("executable"),
                            &join_path(&path, "executable"),
                            format!("executable '{e}' is not declared in cfg/executables.yml"),
                            format!("declare `- name: {e}` with its `binary` under executables:"),
                        );
                    }
                }
                // the type's own executable, when the tree declares it
                None => {
                    let default = rt.kind.model().default_executable;
                    exe = default.filter(|e| exe_declared(t, e)).map(Into::into);
                }
            }
            let rt = &mut t.runtimes[i];
            rt.state_backend = backend;
            rt.executable = exe;
        }
    }

    /// Each image builder's runtime (of a type its kind bakes on) and
    /// executable.
    pub(super) fn resolve_image_builders(&mut self, t: &mut Tree) {
        for i in 0..t.image_builders.len() {
            let ib = &t.image_builders[i];
            let path = ib.origin.path.clone();
            let o = ib.origin.clone();
            let rname = ib.model.runtime.clone();
            let mut runtime = String::new();
            match t.runtimes_by_name.get(&rname) {
                Some(r) => {
                    let rt = &t.runtimes[r];
                    if !ib.kind.runtime_types().contains(&rt.type_name()) {
                        self.d.error_hint(
                            o.field("runtime"),
                            &join_path(&path, "runtime"),
                            format!(
                                "image builder type {} cannot bake on runtime `{}` of type {}",
                                ib.kind.as_str(),
                                rt.display,
                                rt.type_name()
                            ),
                            format!(
                                "{} bakes on {} runtimes",
                                ib.kind.as_str(),
                                ib.kind.runtime_types().join("/")
                            ),
                        );
                    }
                    runtime = rt.name.clone();
                }
                None if self.unused_runtimes.contains(&normalize_name(&rname)) => {
                    self.d.error(o.field("runtime"), &join_path(&path, "runtime"), format!("image builder type {} cannot bake on runtime `{rname}` (a runtime type csis does not implement yet)", ib.kind.as_str()));
                }
                None if is_absent(&rname) => self.d.error_hint(
                    o.field("runtime"),
                    &join_path(&path, "runtime"),
                    "`runtime: default` but no runtime has is_default: true",
                    "name the runtime, or mark one runtime is_default: true",
                ),
                None => self.d.error_hint(
                    o.field("runtime"),
                    &join_path(&path, "runtime"),
                    format!("runtime `{rname}` is not declared"),
                    known("runtimes", t.runtimes.iter().map(|r| r.display.as_str())),
                ),
            }
            let mut exe = None;
            if let Some(e) = &ib.model.executable {
                if exe_declared(t, e) {
                    exe = Some(normalize_name(e));
                } else {
                    self.d.error_hint(
                        o.field("executable"),
                        &join_path(&path, "executable"),
                        format!("executable '{e}' is not declared in cfg/executables.yml"),
                        format!("declare `- name: {e}` under executables:"),
                    );
                }
            }
            let ib = &mut t.image_builders[i];
            ib.runtime = runtime;
            ib.executable = exe;
        }
    }

    /// Each mod builder's executable.
    pub(super) fn resolve_mod_builders(&mut self, t: &mut Tree) {
        for i in 0..t.mod_builders.len() {
            let mb = &t.mod_builders[i];
            let mut exe = None;
            if let Some(e) = &mb.model.executable {
                if exe_declared(t, e) {
                    exe = Some(normalize_name(e));
                } else {
                    self.d.error_hint(
                        mb.origin.field("executable"),
                        &join_path(&mb.origin.path, "executable"),
                        format!("executable '{e}' is not declared in cfg/executables.yml"),
                        format!("declare `- name: {e}` under executables:"),
                    );
                }
            }
            t.mod_builders[i].executable = exe;
        }
    }
}

/// Is `name` a declared executable?
fn exe_declared(t: &Tree, name: &str) -> bool {
    t.executables_by_name
        .map
        .contains_key(&normalize_name(name))
}
