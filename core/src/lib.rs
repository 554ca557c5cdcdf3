//! The pure core of kubectl-uyuni.
//!
//! Everything here is synchronous and free of I/O, clocks and environment: the caller (the
//! `effects` and `plugin` packages) observes the cluster, reads files and the clock, and hands
//! the values in. In return the core says what to do next as plain data (a [`plan::Plan`]).
//!
//! The modules, bottom to top: each uses only those above it in this list, so the crate reads
//! from the names up to the planner (`tests/layers.rs` keeps it so).
//! - names and plain values: the [`catalogue`] of object names, components, step ids, in-pod
//!   paths and data keys; [`labels`]; [`object`]; [`secret`] values and masking; [`shell`]
//!   quoting; [`image`]s; PostgreSQL versions [`pg`]; release versions and the order of upgrades [`release`]; what an image inspection reported [`inspect`]; the `kubectl` command lines printed for the
//!   user [`kubectl`]; [`permission`]s; the one-writer Lease [`lock`]; the [`volumes`] and
//!   [`ports`] catalogues; SSH key checks [`ssh`]; certificate checks [`certs`]; the tz database's names [`timezone`];
//! - what the user asked for, validated once: [`params`]; the flags earlier runs recorded
//!   [`record`]; the dry run's ssh to the source [`probe`];
//! - what was seen in the cluster: [`observed`]; what a wait makes of the pods, Jobs and
//!   Deployments it watches: [`verdict`]; whether the claims can be provisioned: StorageClasses
//!   [`storage`], and admitted: ResourceQuotas and LimitRanges [`quota`]; the server's settings whichever command they come from: [`settings`]; every fact decided once from these, the preflight results included:
//!   [`resolve`];
//! - job scripts: [`scripts`], and the data-sync Job's status lines [`sync_progress`]; one builder per Kubernetes object: [`builders`]; the data plane
//!   and the data sync's order, for the dry run: [`dataplane`];
//! - the check before any write that needs the builders' pods: Pod Security [`pod_security`];
//! - the planner, its steps and phases: [`plan`](mod@plan);
//! - the pure model of each step's effect: [`simulate`](mod@simulate); the outage report [`outage`]; the
//!   dry-run [`preview`](mod@preview); the permissions a plan needs [`access`]; printable output (YAML, diffs)
//!   [`render`]; what `status` reports and which Jobs `logs` reads: [`status`]; the least-privilege rules
//!   `rbac` prints per command: [`rbac`].

pub mod access;
pub mod builders;
pub mod catalogue;
pub mod certs;
pub mod dataplane;
pub mod image;
pub mod inspect;
pub mod kubectl;
pub mod labels;
pub mod lock;
pub mod object;
pub mod observed;
pub mod operation;
pub mod outage;
pub mod params;
pub mod permission;
pub mod pg;
pub mod plan;
pub mod pod_security;
pub mod ports;
pub mod preview;
pub mod probe;
pub mod quota;
pub mod rbac;
pub mod record;
pub mod release;
pub mod render;
pub mod resolve;
pub mod scripts;
pub mod secret;
pub mod settings;
pub mod shell;
pub mod simulate;
pub mod ssh;
pub mod status;
pub mod storage;
pub mod sync_progress;
pub mod timezone;
pub mod verdict;
pub mod volumes;

pub use object::{Kind, Object, ObjectRef};
pub use observed::{ExtractedData, Observation, Observed};
pub use params::{MigrateArgs, MigrateParams, ParamsError, ServerSpec};
pub use plan::{Action, JobWait, Op, Plan, PlanError, Step, plan};
pub use preview::preview;
pub use simulate::simulate;
