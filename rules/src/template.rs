//! Templates as the original renders them (minijinja): `this`, `this.parent`,
//! `ENV`, `execution.*`, and an item's own kind (`image`).

use std::collections::BTreeMap;

use minijinja::{Environment, UndefinedBehavior, Value as JValue};

use crate::yaml::{Node, Value};

/// Does this string need rendering?
pub fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

/// The scopes shared by every rendering of one load.
pub struct Renderer {
    env: Environment<'static>,
    base: BTreeMap<String, JValue>,
}

impl Renderer {
    pub fn new(
        env_vars: &BTreeMap<String, String>,
        execution: &crate::tree::Execution,
    ) -> Renderer {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Lenient);
        let mut base = BTreeMap::new();
        base.insert(
            "ENV".to_string(),
            JValue::from(minijinja::value::Serde(env_vars)),
        );
        base.insert(
            "execution".to_string(),
            JValue::from(minijinja::value::Serde(execution)),
        );
        Renderer { env, base }
    }

    /// Render one string with extra scopes (`this`, `image`, `config`, ...).
    pub fn render(&self, text: &str, scopes: &[(&str, &JValue)]) -> Result<String, String> {
        let mut ctx = self.base.clone();
        for (k, v) in scopes {
            ctx.insert((*k).to_string(), (*v).clone());
        }
        self.env.render_str(text, ctx).map_err(|e| {
            let mut msg = format!("template error: {}", e.kind());
            if let Some(d) = e.detail() {
                msg.push_str(": ");
                msg.push_str(d);
            }
            msg
        })
    }

    /// Render every templated string below `node` in place, except under keys
    /// in `literal` (e.g. bash `script:` lines). Errors are (node loc, path, message).
    pub fn render_node(
        &self,
        node: &mut Node,
        path: &str,
        scopes: &[(&str, &JValue)],
        literal: &[&str],
        errors: &mut Vec<(crate::yaml::Loc, String, String)>,
    ) {
        match &mut node.value {
            Value::Str(s) if is_template(s) => match self.render(s, scopes) {
                Ok(r) => *s = r,
                Err(e) => errors.push((node.loc.clone(), path.to_string(), e)),
            },
            Value::Seq(items) => {
                for (i, n) in items.iter_mut().enumerate() {
                    self.render_node(n, &format!("{path}[{i}]"), scopes, literal, errors);
                }
            }
            Value::Map(entries) => {
                for e in entries.iter_mut() {
                    if literal.contains(&e.key.as_str()) {
                        continue;
                    }
                    let p = crate::yaml::join_path(path, &e.key);
                    self.render_node(&mut e.value, &p, scopes, literal, errors);
                }
            }
            _ => {}
        }
    }
}

/// A node as a template value.
pub fn to_value(node: &Node) -> JValue {
    JValue::from(minijinja::value::Serde(node))
}
