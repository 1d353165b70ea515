//! Templates as the original renders them (minijinja): `this`, `this.parent`,
//! `ENV`, `execution.*`, and an item's own kind (`image`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use minijinja::value::{Enumerator, Object, ObjectRepr};
use minijinja::{Environment, UndefinedBehavior, Value as JValue};

use csis_schema::yaml::{Node, Value};

/// The values of `execution.*` in templates.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Execution {
    /// `dateformat` applied to the load time.
    pub timestamp: String,
    /// `YYYY-MM-DD`.
    pub date: String,
    pub dateformat: String,
}

/// The most work (minijinja's fuel: about one unit per instruction) one
/// template may take; a template in a configuration file that needs more
/// is refused, not run for ever.
pub const TEMPLATE_FUEL: u64 = 100_000;

/// The most text one template may render to.
pub const MAX_RENDERED: usize = 1 << 20;

/// A writer that refuses to hold more than [`MAX_RENDERED`] bytes.
#[derive(Default)]
struct Bounded {
    buf: Vec<u8>,
    over: bool,
}

impl std::io::Write for Bounded {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + b.len() > MAX_RENDERED {
            self.over = true;
            return Err(std::io::Error::other("rendered text too large"));
        }
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Does this string need rendering?
pub fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

/// What the templates of one load read from outside the tree: the
/// environment variables they looked up, and the `execution.*` fields (the
/// load time). The no-op fast path of `csis build` keys on these, so a tree
/// whose templates read `ENV.USER` is re-read when `USER` changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateReads {
    /// `ENV` keys looked up (present or not).
    pub env_keys: BTreeSet<String>,
    /// The whole of `ENV` was read (iterated, printed or serialized).
    pub env_all: bool,
    /// `execution.*` fields read (`timestamp`, `date`, `dateformat`), or
    /// `*` when the whole of `execution` was.
    pub execution: BTreeSet<String>,
}

/// A map scope that records which keys templates read.
#[derive(Debug)]
struct Probe {
    values: BTreeMap<String, JValue>,
    reads: Arc<Mutex<TemplateReads>>,
    /// true: `ENV`; false: `execution`.
    env: bool,
}

impl Probe {
    fn note(&self, key: Option<&str>) {
        let mut r = self.reads.lock().unwrap_or_else(|p| p.into_inner());
        match (self.env, key) {
            (true, Some(k)) => {
                r.env_keys.insert(k.to_string());
            }
            (true, None) => r.env_all = true,
            (false, k) => {
                r.execution.insert(k.unwrap_or("*").to_string());
            }
        }
    }
}

impl Object for Probe {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &JValue) -> Option<JValue> {
        let k = key.as_str()?;
        self.note(Some(k));
        self.values.get(k).cloned()
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        self.note(None);
        Enumerator::Values(
            self.values
                .keys()
                .map(|k| JValue::from(k.as_str()))
                .collect(),
        )
    }
}

/// The scopes shared by every rendering of one load.
pub struct Renderer {
    env: Environment<'static>,
    base: BTreeMap<String, JValue>,
    reads: Arc<Mutex<TemplateReads>>,
}

impl Renderer {
    pub fn new(env_vars: &BTreeMap<String, String>, execution: &Execution) -> Renderer {
        Self::with_reads(env_vars, execution, Default::default())
    }

    /// A renderer with new scopes that adds to this one's [`TemplateReads`].
    pub fn renew(&self, env_vars: &BTreeMap<String, String>, execution: &Execution) -> Renderer {
        Self::with_reads(env_vars, execution, self.reads.clone())
    }

    fn with_reads(
        env_vars: &BTreeMap<String, String>,
        execution: &Execution,
        reads: Arc<Mutex<TemplateReads>>,
    ) -> Renderer {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Lenient);
        env.set_fuel(Some(TEMPLATE_FUEL));
        let mut base = BTreeMap::new();
        let vars = env_vars
            .iter()
            .map(|(k, v)| (k.clone(), JValue::from(v.as_str())))
            .collect();
        base.insert(
            "ENV".to_string(),
            JValue::from_object(Probe {
                values: vars,
                reads: reads.clone(),
                env: true,
            }),
        );
        let exec = [
            ("timestamp", &execution.timestamp),
            ("date", &execution.date),
            ("dateformat", &execution.dateformat),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), JValue::from(v.as_str())))
        .collect();
        base.insert(
            "execution".to_string(),
            JValue::from_object(Probe {
                values: exec,
                reads: reads.clone(),
                env: false,
            }),
        );
        Renderer { env, base, reads }
    }

    /// Count `reads` as this renderer's own (a file's, kept from a load
    /// before).
    pub fn add_reads(&self, reads: &TemplateReads) {
        let mut r = self.reads.lock().unwrap_or_else(|p| p.into_inner());
        r.env_keys.extend(reads.env_keys.iter().cloned());
        r.env_all |= reads.env_all;
        r.execution.extend(reads.execution.iter().cloned());
    }

    /// What the templates rendered so far read from outside the tree.
    pub fn reads(&self) -> TemplateReads {
        self.reads.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Render one string with extra scopes (`this`, `image`, `config`, ...).
    pub fn render(&self, text: &str, scopes: &[(&str, &JValue)]) -> Result<String, String> {
        let mut ctx = self.base.clone();
        for (k, v) in scopes {
            ctx.insert((*k).to_string(), (*v).clone());
        }
        let mut out = Bounded::default();
        let rendered = self
            .env
            .template_from_str(text)
            .and_then(|t| t.render_captured_to(ctx, &mut out).map(|_| ()));
        if out.over {
            return Err(format!(
                "template refused: it renders to more than {MAX_RENDERED} bytes"
            ));
        }
        rendered.map(|()| String::from_utf8_lossy(&out.buf).into_owned()).map_err(|e| {
            if e.kind() == minijinja::ErrorKind::OutOfFuel {
                return format!(
                    "template refused: it takes more than {TEMPLATE_FUEL} steps to render (a loop too long?)"
                );
            }
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
        errors: &mut Vec<(csis_schema::yaml::Loc, String, String)>,
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
                    let p = csis_schema::yaml::join_path(path, &e.key);
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

#[cfg(test)]
mod reads_tests {
    use super::*;
    use Execution;

    fn renderer() -> Renderer {
        let env: BTreeMap<String, String> = [("USER", "ann"), ("HOME", "/home/ann")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Renderer::new(
            &env,
            &Execution {
                timestamp: "2026-11-30-101010".into(),
                date: "2026-11-30".into(),
                dateformat: "%Y".into(),
            },
        )
    }

    #[test]
    fn templates_record_the_env_keys_and_execution_fields_they_read() {
        let r = renderer();
        assert_eq!(r.reads(), TemplateReads::default());
        assert_eq!(r.render("{{ ENV.USER }}", &[]).unwrap(), "ann");
        assert_eq!(r.render("{{ ENV['HOME'] }}/x", &[]).unwrap(), "/home/ann/x");
        assert_eq!(r.render("[{{ ENV.NOPE }}]", &[]).unwrap(), "[]");
        assert_eq!(r.render("{{ execution.date }}", &[]).unwrap(), "2026-11-30");
        let reads = r.reads();
        assert_eq!(
            reads
                .env_keys
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            ["HOME", "NOPE", "USER"]
        );
        assert!(!reads.env_all);
        assert_eq!(
            reads
                .execution
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            ["date"]
        );
    }

    #[test]
    fn iterating_env_reads_all_of_it_and_renew_keeps_the_reads() {
        let r = renderer();
        assert_eq!(r.render("{{ ENV.USER }}", &[]).unwrap(), "ann");
        let r2 = r.renew(
            &BTreeMap::new(),
            &Execution {
                timestamp: String::new(),
                date: String::new(),
                dateformat: String::new(),
            },
        );
        let out = r2
            .render("{% for k in ENV %}{{ k }}{% endfor %}", &[])
            .unwrap();
        assert_eq!(out, "");
        let reads = r2.reads();
        assert!(reads.env_all);
        assert!(reads.env_keys.contains("USER"));
        assert!(r.reads().env_all, "one record shared by both renderers");
    }
}
