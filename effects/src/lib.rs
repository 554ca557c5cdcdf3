//! The client side of kubectl-uyuni: connects to the cluster, observes what the planner asked
//! for, and carries out exactly one [`uyuni_core::Step`] of a plan. It decides nothing: `uyuni_core::plan`
//! does.
//!
//! Where to find things:
//! - building the client from kubeconfig and flags: [`connect`](mod@connect);
//! - the snapshot the planner reads: [`observe`](mod@observe) (once, directly, for the dry
//!   run; from watches kept in `cache`, turn after turn, for the migrate loop's [`Observer`]);
//! - carrying out a step, one function per action: [`execute`](mod@execute), with server-side
//!   apply in `apply`, the Job wait (log streaming, pod failures) in [`job`] and the
//!   Deployment's in [`deployment`], a deletion and its wait until the object is gone in
//!   `delete`; what the waits read, the observer's stores or a watch of
//!   their own, in `watch`;
//! - the record of the server's specification, read before the flags are validated:
//!   [`record`];
//! - retries of transient API failures: [`retry`]; errors: [`error`]; progress events:
//!   [`progress`];
//! - the namespace's Lease, one writer at a time: [`lease`];
//! - the pods and container logs `status` and `logs` read: [`logs`].

// Errors end a command and are built once; a larger `Err` costs nothing that matters, while
// boxing every variant would make them clumsier to match on. (Big sources are boxed anyway.)
#![allow(clippy::result_large_err)]

pub mod access;
pub mod connect;
mod custom;
mod delete;
pub mod deployment;
pub mod dry_run;
pub mod error;
pub mod execute;
pub mod inspect;
pub mod job;
pub mod lease;
pub mod logs;
pub mod observe;
pub mod operation;
pub mod progress;
pub mod record;
pub mod report;
pub mod retry;

pub mod apply;
mod cache;
mod watch;

pub use apply::Prior;
pub use connect::{ClientOptions, Connection, connect};
pub use error::{EffectsError, Target, Verb};
pub use execute::{Executed, Version, execute, execute_step};
pub use observe::{Observer, observe, observe_with_progress};
pub use progress::{NoProgress, Progress, ProgressEvent};
