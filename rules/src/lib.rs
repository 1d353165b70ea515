//! csis-rules: the configuration tree (loading, templating, strict typed
//! models, validation) and the rules that compile it into graph nodes.

/// Tree -> graph nodes. Owned by the graph-compile work (issue 3): keep this
/// line when editing lib.rs.
pub mod compile;
