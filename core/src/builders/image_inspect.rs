//! The image inspections of an upgrade: one short Job per image, as the image checks of a
//! migration (`image_check`), each reporting what the image is ([`crate::inspect`]). The images
//! the server runs are inspected too, not read from a record: an installation of an earlier
//! version of this tool has none, and the image is the truth (the reference's §8.2 and
//! uyuni-tools `4e934486`: inspect the image of the existing Deployment, which works when the
//! server is stopped).

use k8s_openapi::api::batch::v1::Job;

use crate::builders::hardening::JobRoot;
use crate::builders::job::{Identity, ScriptJob, script_job};
use crate::catalogue::{components, products, steps};
use crate::params::ServerParams;
use crate::scripts::image_inspect;

/// Which image a Job inspects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    RunningServer,
    RunningDatabase,
    Server,
    Database,
}

impl Role {
    pub const ALL: [Role; 4] = [
        Role::RunningServer,
        Role::RunningDatabase,
        Role::Server,
        Role::Database,
    ];

    pub fn step(self) -> &'static str {
        match self {
            Role::RunningServer => steps::INSPECT_RUNNING_SERVER,
            Role::RunningDatabase => steps::INSPECT_RUNNING_DB,
            Role::Server => steps::INSPECT_SERVER,
            Role::Database => steps::INSPECT_DB,
        }
    }

    /// A server image: its inspection also reports which kind it is (`ca_copy`), which decides
    /// the server Deployment's mounts on that image (`crate::resolve::salt_ca_mount`).
    pub fn is_server(self) -> bool {
        matches!(self, Role::RunningServer | Role::Server)
    }

    fn reports(self) -> &'static str {
        if self.is_server() {
            "its release and whether it copies the CA into the Salt file root"
        } else {
            "its release and PostgreSQL version"
        }
    }

    fn what(self) -> &'static str {
        match self {
            Role::RunningServer => "the server image the server runs",
            Role::RunningDatabase => "the database image the server runs",
            Role::Server => "the server image to upgrade to",
            Role::Database => "the database image to upgrade to",
        }
    }
}

/// An upgrade's check of the database upgrade image before a PostgreSQL major upgrade from
/// `from` to `to` (`core/scripts/image-check-db-upgrade.sh`, as a migration checks it): the
/// image has `pg_upgrade` of `to` and the binaries of `from`, or the Job fails with its verdict
/// (`UNSUPPORTED: …`), before anything of the server's is written.
pub fn database_upgrade_check(params: &ServerParams, from: u32, to: u32) -> Job {
    let image = params.spec.image.database_upgrade.as_str();
    script_job(
        params,
        &ScriptJob {
            step: steps::CHECK_DB_UPGRADE,
            description: format!(
                "check that the database upgrade image {image} upgrades PostgreSQL {from} to {to}"
            ),
            component: components::UPGRADE,
            image,
            script: crate::scripts::image_check::render_database_upgrade_between(
                image, from, to, "",
            ),
            claims: Vec::new(),
            tmpfs_tmp: false,
            env: Vec::new(),
            extra_volumes: Vec::new(),
            service_account: None,
            security_context: None,
            produces: None,
            identity: Identity::Spec,
            // The same script as the migration's check of this image, read-only as that one.
            root: JobRoot::ReadOnly,
        },
    )
}

/// The inspection Job of `image` in its `role`. Its identity is its whole spec: another image
/// is another inspection.
pub fn job(params: &ServerParams, role: Role, image: &str) -> Job {
    script_job(
        params,
        &ScriptJob {
            step: role.step(),
            description: format!("inspect {} ({image}): {}", role.what(), role.reports()),
            component: components::UPGRADE,
            image,
            script: if role.is_server() {
                image_inspect::render_server(image, "")
            } else {
                image_inspect::render(image, "")
            },
            claims: Vec::new(),
            tmpfs_tmp: false,
            env: Vec::new(),
            extra_volumes: Vec::new(),
            service_account: None,
            security_context: None,
            produces: Some(products::INSPECTION),
            identity: Identity::Spec,
            root: JobRoot::ReadOnly,
        },
    )
}
