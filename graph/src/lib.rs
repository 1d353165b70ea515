//! Pictures of a csis build graph that a person reads at a glance.
//!
//! The input is a plain [`Graph`]: nodes (a series on a runtime, with its
//! current build, release, revocation, test and pin marks and, when due,
//! the reason and the changed fields) and edges (`follow`, `pinned`,
//! other). This crate knows nothing of the configuration tree or of
//! `meta-state/`; the caller gathers those into the model.
//!
//! [`layout`] draws the layers; [`render`] writes html (one self-contained
//! page with pan, zoom, a filter and a detail panel), svg, dot, mermaid or
//! json.

pub mod layout;
mod model;
mod render;

pub use model::*;
pub use render::{dot, html, json, mermaid, svg};
