//! Name indexes: every class of entry is found by its name or one of its
//! aliases (normalized), and at most one entry per class is its default.
//! [`Declared`] says how an entry of a class is named, so that one
//! function builds every class's index and refuses duplicates.

use super::Loader;
use crate::groups::{Group, GroupBuilder, StorageBuilder};
use crate::tree::*;
use csis_schema::yaml::join_path;

/// An entry of a class the load indexes by name.
pub(super) trait Declared {
    /// The class, as diagnostics name it (`image builder`).
    const CLASS: &'static str;
    /// The name as declared.
    fn declared_name(&self) -> &str;
    fn aliases(&self) -> &[String];
    /// `is_default: true`.
    fn is_default(&self) -> bool;
    fn origin(&self) -> &Origin;
}

/// A shared entry is named as the entry.
impl<T: Declared> Declared for std::sync::Arc<T> {
    const CLASS: &'static str = T::CLASS;
    fn declared_name(&self) -> &str {
        (**self).declared_name()
    }
    fn aliases(&self) -> &[String] {
        (**self).aliases()
    }
    fn is_default(&self) -> bool {
        (**self).is_default()
    }
    fn origin(&self) -> &Origin {
        (**self).origin()
    }
}

macro_rules! declared {
    ($ty:ty, $class:literal, |$e:ident| $name:expr, $aliases:expr, $default:expr) => {
        impl Declared for $ty {
            const CLASS: &'static str = $class;
            fn declared_name(&self) -> &str {
                let $e = self;
                $name
            }
            fn aliases(&self) -> &[String] {
                let $e = self;
                &$aliases[..]
            }
            // (an executable is never a default: its `$e` goes unread)
            #[allow(unused_variables)]
            fn is_default(&self) -> bool {
                let $e = self;
                $default
            }
            fn origin(&self) -> &Origin {
                &self.origin
            }
        }
    };
}

declared!(
    ExecutableEntry,
    "executable",
    |e| e.model.name.as_str(),
    e.model.aliases,
    false
);
declared!(
    RuntimeEntry,
    "runtime",
    |e| e.display.as_str(),
    e.common.aliases,
    e.common.is_default
);
declared!(
    StateBackend,
    "state backend",
    |e| e.display.as_str(),
    e.common.aliases,
    e.common.is_default
);
declared!(
    OsBuilder,
    "OS builder",
    |e| e.display.as_str(),
    e.model.aliases,
    e.model.is_default
);
declared!(
    ImageBuilder,
    "image builder",
    |e| e.display.as_str(),
    e.model.aliases,
    e.model.is_default
);
declared!(
    ModBuilder,
    "mod builder",
    |e| e.display.as_str(),
    e.model.aliases,
    e.model.is_default
);
declared!(
    Image,
    "image",
    |e| e.display.as_str(),
    e.model.aliases,
    e.model.is_default
);
declared!(
    GroupBuilder,
    "group builder",
    |e| e.display.as_str(),
    e.model.aliases,
    e.model.is_default
);
declared!(
    StorageBuilder,
    "storage builder",
    |e| e.display.as_str(),
    e.model.aliases,
    e.model.is_default
);
declared!(
    Group,
    "group",
    |e| e.display.as_str(),
    e.model.aliases,
    e.model.is_default
);

impl Loader<'_> {
    /// The name index of one class of entries.
    pub(super) fn index_of<T: Declared>(&mut self, items: &[T]) -> Index {
        self.index(
            T::CLASS,
            items
                .iter()
                .map(|e| (e.declared_name(), e.aliases(), e.is_default(), e.origin())),
        )
    }
}

impl Loader<'_> {
    /// Build a name index for a class; refuse duplicate names/aliases and a
    /// second default.
    fn index<'a>(
        &mut self,
        class: &str,
        items: impl Iterator<Item = (&'a str, &'a [String], bool, &'a Origin)>,
    ) -> Index {
        let mut ix = Index::default();
        ix.map.reserve(items.size_hint().0);
        // each entry's origin, for the message of a later duplicate (the
        // names are in `ix.map`: no second map, no copy of an origin)
        let mut origins: Vec<&Origin> = Vec::with_capacity(items.size_hint().0);
        for (i, (name, aliases, is_default, origin)) in items.enumerate() {
            origins.push(origin);
            for (j, n) in std::iter::once(name)
                .chain(aliases.iter().map(String::as_str))
                .enumerate()
            {
                let key = normalized(n);
                if key.is_empty() {
                    continue;
                }
                if let Some(prev) = ix.map.get(&*key).map(|&p| origins[p]) {
                    let what = if j == 0 { "name" } else { "alias" };
                    let path = if j == 0 {
                        join_path(&origin.path, "name")
                    } else {
                        format!("{}.aliases[{}]", origin.path, j - 1)
                    };
                    self.d.error_hint(
                        &origin.loc,
                        &path,
                        format!("duplicate {class} {what} `{n}`"),
                        format!("`{n}` is already declared at {}", prev.display()),
                    );
                    continue;
                }
                ix.map.insert(key.into_owned(), i);
            }
            if is_default {
                if let Some(d) = ix.default {
                    let _ = d;
                    self.d.error_hint(
                        &origin.loc,
                        &join_path(&origin.path, "is_default"),
                        format!("a second default {class}: `{name}`"),
                        "at most one entry per class may have is_default: true",
                    );
                } else {
                    ix.default = Some(i);
                }
            }
        }
        ix
    }
}
