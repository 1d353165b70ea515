//! What the caller recorded about a node's head: the planner's view of a
//! build record ([`Record`]) and the builds its hashed dependencies were
//! ([`DepBuilds`]).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::fingerprint::Fingerprint;

/// What the caller recorded about a node's head (e.g. the last build of a
/// series on a runtime, from `meta-state/lineage.yaml`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The head's recorded fingerprint; `None` when unrecorded.
    pub fingerprint: Option<Fingerprint>,
    /// The head's stored canonical document ([`Graph::canonical`]), for
    /// field-by-field `--explain`.
    pub canonical: Option<Value>,
    /// The head's opaque build id (AMI id, image id).
    pub build: Option<String>,
    /// The head's age (for update policies).
    pub age: Option<Duration>,
    /// For each hashed dependency name (e.g. `parent`), the build id of the
    /// dependency this head was made from (for [`rules::dep_moved`]).
    pub deps: DepBuilds,
    /// The node's earlier records (builds that are no longer the head but
    /// still stand), newest first, each with its fingerprint, build, age and
    /// deps (no canonical document, no earlier records of its own): what a
    /// rule needs to see that the inputs of today were built before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<Record>,
}

/// The build each hashed dependency of a head was made from, by the
/// dependency's name: a few (most often one, `parent`), sorted by name in a
/// vector (a map allocates a node of eleven entries for one: 2.5 MB for the
/// heads of 5,000 images). Serialized as a map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DepBuilds(Vec<(String, String)>);

impl DepBuilds {
    /// The build the dependency `name` was.
    pub fn get(&self, name: &str) -> Option<&String> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(name))
            .ok()
            .map(|i| &self.0[i].1)
    }
    /// Set the build of the dependency `name`; the one it replaces.
    pub fn insert(&mut self, name: String, build: String) -> Option<String> {
        match self.0.binary_search_by(|(k, _)| k.as_str().cmp(&name)) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, build)),
            Err(i) => {
                self.0.insert(i, (name, build));
                None
            }
        }
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// `(name, build)` by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl FromIterator<(String, String)> for DepBuilds {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        let mut d = DepBuilds::default();
        for (k, v) in iter {
            d.insert(k, v);
        }
        d
    }
}

impl Serialize for DepBuilds {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for DepBuilds {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(BTreeMap::<String, String>::deserialize(d)?
            .into_iter()
            .collect())
    }
}

impl Record {
    /// The newest earlier record whose fingerprint is `fp`.
    pub fn earlier_with(&self, fp: Fingerprint) -> Option<&Record> {
        self.earlier.iter().find(|r| r.fingerprint == Some(fp))
    }
}
