//! Field paths (`runtime_builders[0].credentials.profile_nme`), built
//! while descending a node tree.

/// A field path, built as a linked list while descending (no allocation
/// unless an error is reported).
#[derive(Clone, Copy)]
pub enum FieldPath<'a> {
    Root(&'a str),
    Key(&'a FieldPath<'a>, &'a str),
    Index(&'a FieldPath<'a>, usize),
}

impl FieldPath<'_> {
    pub fn render(&self) -> String {
        let mut s = String::new();
        self.render_into(&mut s);
        s
    }
    fn render_into(&self, s: &mut String) {
        match self {
            FieldPath::Root(r) => s.push_str(r),
            FieldPath::Key(p, k) => {
                p.render_into(s);
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            FieldPath::Index(p, i) => {
                p.render_into(s);
                s.push('[');
                s.push_str(&i.to_string());
                s.push(']');
            }
        }
    }
}

/// Join a rendered path and a key.
pub fn join_path(base: &str, key: &str) -> String {
    if base.is_empty() {
        key.to_string()
    } else {
        format!("{base}.{key}")
    }
}
