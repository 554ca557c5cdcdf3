//! The pure core of kubectl-uyuni.
//!
//! Everything here is synchronous and free of I/O, clocks and environment: the caller (the
//! `effects` and `plugin` packages) observes the cluster, reads files and the clock, and hands
//! the values in. In return the core says what to do next as plain data (a [`plan::Plan`]).
//!
//! Where to find things:
//! - validated parameters: [`params`]; the volume catalogue: [`volumes`]; images: [`image`];
//! - what was seen in the cluster: [`observed`]; the objects it is made of: [`object`];
//! - the planner and its steps: [`plan`]; the pure model of each step's effect: [`simulate`];
//! - one builder per Kubernetes object: [`builders`]; job scripts: [`scripts`];
//! - printable output (YAML, diffs, masking of secrets): [`render`]; the `kubectl` command
//!   lines printed for the user: [`kubectl`];
//! - checks before any write: SSH keys [`ssh`], StorageClasses [`storage`];
//! - what a wait makes of the pods, Jobs and Deployments it watches: [`verdict`].

pub mod access;
pub mod builders;
pub mod dataplane;
pub mod image;
pub mod kubectl;
pub mod labels;
pub mod object;
pub mod observed;
pub mod outage;
pub mod params;
pub mod pg;
pub mod phase;
pub mod plan;
pub mod pod_security;
pub mod ports;
pub mod preview;
pub mod render;
pub mod scripts;
pub mod secret;
pub mod simulate;
pub mod ssh;
pub mod storage;
pub mod verdict;
pub mod volumes;

pub use object::{Kind, Object, ObjectRef};
pub use observed::{ExtractedData, Observation, Observed};
pub use params::{MigrateArgs, MigrateParams, ParamsError};
pub use plan::{Action, JobWait, Op, Plan, PlanError, Step, plan};
pub use preview::preview;
pub use simulate::simulate;
