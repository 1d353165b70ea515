//! The values of a module call and how the original lays them out: its
//! module calls are not `terraform fmt` output (one space around `=`,
//! two-space indents, flat maps inline, nested maps one key a line), its
//! configuration blocks use four spaces. A sealed value is never written:
//! it becomes `local.sensitive["<key>"]`, its ciphertext goes to the root's
//! `data "external" "sensitive"` query (decrypted at plan time).

use serde::{Deserialize, Serialize};

/// Module inputs, a map's entries: keys in order.
pub type Attrs = Vec<(String, Hv)>;

/// A value in a module call or a provider block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hv {
    Str(String),
    Num(i64),
    Bool(bool),
    List(Vec<Hv>),
    /// Keys quoted, in this order.
    Map(Vec<(String, Hv)>),
    /// An expression written as is: a reference built by this crate
    /// ([`Hv::remote_output`], [`Hv::var`], [`Hv::reference`]); never a value.
    Ref(String),
    /// An `ENC[age:...]` marker as declared, by reference through the
    /// root's `local.sensitive` (`key` names it there).
    /// `as_key`: the value keys resources (a module's `for_each`, e.g.
    /// group members), which tofu refuses for a sensitive value, so it is
    /// read through `nonsensitive()`: it then shows in plan output and
    /// state (as the original's clear names do), never in a file csis writes.
    Sealed {
        key: String,
        marker: String,
        #[serde(default)]
        as_key: bool,
    },
}

impl Hv {
    pub fn s(v: &str) -> Hv {
        Hv::Str(v.to_string())
    }
    pub fn strs(v: &[String]) -> Hv {
        Hv::List(v.iter().map(|x| Hv::s(x)).collect())
    }
    pub fn var(name: &str) -> Hv {
        Hv::Ref(format!("var.{name}"))
    }
    /// `data.terraform_remote_state.<ws>.outputs.<path>` (path as written:
    /// `storage_data.volume_id`, `group_gids["team"]`).
    pub fn remote_output(workspace_label: &str, path: &str) -> Hv {
        Hv::Ref(format!(
            "data.terraform_remote_state.{workspace_label}.outputs.{path}"
        ))
    }
    /// A reference to an object of this root (`aws_security_group.x.id`).
    pub fn reference(path: &str) -> Hv {
        Hv::Ref(path.to_string())
    }
    fn is_scalar(&self) -> bool {
        !matches!(self, Hv::Map(_))
    }
    /// Every sealed value in this value, in order.
    pub fn sealed(&self, out: &mut Vec<(String, String)>) {
        match self {
            Hv::Sealed { key, marker, .. } => out.push((key.clone(), marker.clone())),
            Hv::List(v) => v.iter().for_each(|x| x.sealed(out)),
            Hv::Map(m) => m.iter().for_each(|(_, x)| x.sealed(out)),
            _ => {}
        }
    }
}

/// An HCL quoted string: escapes, and `${` / `%{` kept literal.
pub fn quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                o.push(c);
                o.push(c);
            }
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A value, inline where the original writes it inline. `indent` is the
/// column of the line that holds it; `top` says it is an attribute's value
/// (a flat map is written inline only there).
pub fn render(v: &Hv, indent: usize, top: bool) -> String {
    match v {
        Hv::Str(s) => quote(s),
        Hv::Num(n) => n.to_string(),
        Hv::Bool(b) => b.to_string(),
        Hv::Ref(r) => r.clone(),
        Hv::Sealed {
            key, as_key: true, ..
        } => format!("nonsensitive(local.sensitive[{}])", quote(key)),
        Hv::Sealed { key, .. } => format!("local.sensitive[{}]", quote(key)),
        Hv::List(items) => {
            let parts: Vec<String> = items.iter().map(|x| render(x, indent, false)).collect();
            format!("[{}]", parts.join(", "))
        }
        Hv::Map(m) if m.is_empty() => "{}".into(),
        Hv::Map(m) if top && m.iter().all(|(_, x)| x.is_scalar()) => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, x)| format!("{} = {}", quote(k), render(x, indent, false)))
                .collect();
            format!("{{ {} }}", parts.join(", "))
        }
        Hv::Map(m) => multiline(m, indent),
    }
}

/// A map, one quoted key a line, two spaces deeper than `indent`.
pub fn multiline(m: &[(String, Hv)], indent: usize) -> String {
    let pad = " ".repeat(indent + 2);
    let mut o = String::from("{\n");
    for (k, x) in m {
        o.push_str(&format!(
            "{pad}{} = {}\n",
            quote(k),
            render(x, indent + 2, false)
        ));
    }
    o.push_str(&" ".repeat(indent));
    o.push('}');
    o
}

/// The attribute lines of a module call: `  key = value`, or with the `=`
/// aligned (the original's group calls).
pub fn attributes(attrs: &[(String, Hv)], aligned: bool) -> String {
    let width = if aligned {
        attrs.iter().map(|(k, _)| k.len()).max().unwrap_or(0)
    } else {
        0
    };
    let mut o = String::new();
    for (k, v) in attrs {
        o.push_str(&format!(
            "  {k:width$} = {}\n",
            render(v, 2, true),
            width = width
        ));
    }
    o
}

/// A name as a terraform label: `-` and `.` become `_` (`team-node-1` ->
/// `team_node_1`, `avery.alpha` -> `avery_alpha`).
pub fn label(name: &str) -> String {
    name.chars()
        .map(|c| if c == '-' || c == '.' { '_' } else { c })
        .collect()
}

/// A user's block label, as the original makes it: every character but a
/// letter, a digit or `_` becomes `_` (`tatum.tango@example.invalid` ->
/// `tatum_tango_example_invalid`).
pub fn user_label(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The text parses as HCL (hcl-rs): a guard before any file is written.
pub fn parse_check(text: &str) -> std::result::Result<(), String> {
    ::hcl::parse(text).map(|_| ()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_escape_and_keep_interpolation_literal() {
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote("${x} %{y}"), r#""$${x} %%{y}""#);
        assert_eq!(quote("line\nnext"), r#""line\nnext""#);
    }

    #[test]
    fn flat_maps_inline_at_the_top_nested_maps_one_key_a_line() {
        let tags = Hv::Map(vec![("a".into(), Hv::s("1")), ("b".into(), Hv::Bool(true))]);
        assert_eq!(render(&tags, 2, true), r#"{ "a" = "1", "b" = true }"#);
        let nested = Hv::Map(vec![(
            "data".into(),
            Hv::Map(vec![("k".into(), Hv::s("v"))]),
        )]);
        assert_eq!(
            render(&nested, 2, true),
            "{\n    \"data\" = {\n      \"k\" = \"v\"\n    }\n  }"
        );
        assert_eq!(render(&Hv::Map(vec![]), 2, true), "{}");
    }

    #[test]
    fn a_sealed_value_is_written_by_reference_only() {
        let v = Hv::List(vec![Hv::Sealed {
            key: "member_team_0".into(),
            marker: "ENC[age:abc]".into(),
            as_key: false,
        }]);
        let out = render(&v, 2, true);
        assert_eq!(out, r#"[local.sensitive["member_team_0"]]"#);
        assert!(!out.contains("ENC["));
    }

    #[test]
    fn aligned_attributes_pad_to_the_longest_key() {
        let a = attributes(
            &[("a".into(), Hv::Num(1)), ("long_key".into(), Hv::Num(2))],
            true,
        );
        assert_eq!(a, "  a        = 1\n  long_key = 2\n");
    }
}
