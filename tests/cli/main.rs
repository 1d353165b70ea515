//! The binary's integration tests, one test binary (issue 24, item 5): each
//! file a module, the support modules (`build_support`, `ops_support`,
//! `aws_support`) declared once here. A test runs `csis` as a process
//! (`csis_testkit::csis`), so modules share no state but files and
//! what this process sets for itself (nothing global: no `set_var`).

mod after_docker;
mod aws_deadline;
mod aws_support;
mod build_change;
mod build_convergence;
mod build_failure;
mod build_interrupt;
mod build_noop_stamp;
mod build_parallel;
mod build_support;
mod builds_cli;
mod ci_plan;
mod ci_workflow;
mod cli_cases;
mod cli_streams;
mod emission_aws;
mod fleet_aws;
mod fleet_aws_archive;
mod fleet_aws_drift;
mod fleet_aws_posix;
mod fleet_docker;
mod github_annotations;
mod graph_plan_json;
mod graph_render;
mod graph_watch;
mod identity_export_gids;
mod json_reports;
mod keep_failed_refused;
mod migrating;
mod missing_mod_files;
mod mod_tests;
mod ops_aws;
mod ops_docker;
mod ops_dummy;
mod ops_support;
mod parse_cache;
mod records_hard_to_lose;
mod refusal_cases;
mod refusals;
mod secrets_cli;
mod secrets_never_in_clear;
mod shared_daemon;
mod shared_store;
mod starters;
mod tidy;
mod tree_files;
mod trust_daemon;
mod trust_records;
mod validate_reference;
mod vendor_tag;
