//! The rules that turn a loaded tree into build-graph nodes (resolve, emit,
//! bake, retag, release, dispose) with their fingerprint inputs.
//! Owned by the graph-compile work (issue 3); the loader does not write here.
