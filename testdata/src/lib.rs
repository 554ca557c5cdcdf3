//! Fixtures and a simulated Kubernetes cluster for kubectl-uyuni's tests and demos.
//!
//! [`SimCluster`] is an HTTPS server on 127.0.0.1 that speaks enough of the Kubernetes API for
//! the real `kubectl` (1.27 to 1.37) and kube-rs to work against it: discovery (legacy and
//! aggregated), OpenAPI v3 stubs, CRUD with server-side apply and the other patch formats,
//! watches, pod logs, dry-run, and simulated controllers for Jobs, Deployments, PVCs and
//! cert-manager whose behaviour and faults a [`Scenario`] sets.
//!
//! ```no_run
//! # async fn demo() -> Result<(), uyuni_testdata::SimError> {
//! use uyuni_testdata::{SimCluster, SimConfig, scenarios};
//! let sim = SimCluster::start(SimConfig { scenario: scenarios::migration(), ..Default::default() }).await?;
//! println!("KUBECONFIG={}", sim.kubeconfig_path().display());
//! # Ok(()) }
//! ```

pub mod addons;
pub mod agent;
pub mod certs;
pub mod cluster;
mod controllers;
pub mod discovery;
// pub for the unit tests in tests/unit/ (`now_seconds`)
#[doc(hidden)]
pub mod engine;
pub mod golden;
// pub for the unit tests in tests/unit/ (the query and path parsers)
#[doc(hidden)]
pub mod http;
pub mod patch;
// pub for the unit tests in tests/unit/ (`decode`)
#[doc(hidden)]
pub mod protobuf;
pub mod real;
pub mod resources;
mod rng;
pub mod scenario;
pub mod scenarios;
pub mod selectors;
mod sim;
mod store;
mod table;
pub mod validate;

pub use scenario::{
    DeploymentOutcome, DeploymentScript, DropFault, ErrorFault, FailOnce, FaultTarget, Faults,
    JobOutcome, JobScript, PatchSecret, Scenario, SideEffect, Timing, Verb,
};
pub use sim::{Flavour, JobCreated, JobEnd, RequestRecord, SimCluster, SimConfig, SimError};
pub use store::WrittenObject;
pub use validate::check_object;
