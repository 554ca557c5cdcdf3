//! The image checks (images-today §E.4): one short Job per target image, run before anything
//! else of the migration is written, so that an image the migration cannot use is refused while
//! the source still serves — not hours later, after the final sync stopped it. Each Job runs the
//! image the cluster will run, pulled with the cluster's credentials, so a wrong name or a
//! registry the nodes cannot reach is found then too.

use k8s_openapi::api::batch::v1::Job;

use crate::builders::hardening::JobRoot;
use crate::builders::job::{Identity, ScriptJob, script_job};
use crate::catalogue::{components, products};
use crate::params::ServerParams;
use crate::scripts::image_check as scripts;

pub use crate::catalogue::steps::{
    IMAGE_CHECK_DB as DATABASE_STEP, IMAGE_CHECK_DB_UPGRADE as DATABASE_UPGRADE_STEP,
    IMAGE_CHECK_SERVER as SERVER_STEP,
};

/// The check Jobs of a migration, in the order they run.
pub fn jobs(params: &ServerParams) -> Vec<Job> {
    checks(params, 3, "the migration", scripts::render_database)
}

/// The check Jobs of a fresh server: the server and database images (no PostgreSQL upgrade).
pub fn install_jobs(params: &ServerParams) -> Vec<Job> {
    checks(
        params,
        2,
        "a new server",
        scripts::render_database_for_install,
    )
}

fn checks(
    params: &ServerParams,
    count: usize,
    purpose: &str,
    database: fn(&str, &str) -> crate::scripts::JobScript,
) -> Vec<Job> {
    let images = &params.spec.image;
    [
        (
            SERVER_STEP,
            "server",
            images.server.as_str(),
            scripts::render_server(&images.server, ""),
        ),
        (
            DATABASE_STEP,
            "database",
            images.database.as_str(),
            database(&images.database, ""),
        ),
        (
            DATABASE_UPGRADE_STEP,
            "database upgrade",
            images.database_upgrade.as_str(),
            scripts::render_database_upgrade(&images.database_upgrade, ""),
        ),
    ]
    .into_iter()
    .take(count)
    .map(|(step, role, image, script)| {
        // The server check also reports which kind of image it is (`ca_copy`), the database
        // check its PostgreSQL major (`pg_major`), in the termination message, which the run
        // copies onto the Job.
        let produces =
            (step == SERVER_STEP || step == DATABASE_STEP).then_some(products::INSPECTION);
        script_job(
            params,
            &ScriptJob {
                step,
                description: format!(
                    "check that the {role} image {image} is one {purpose} supports"
                ),
                component: components::MIGRATION,
                image,
                script,
                claims: Vec::new(),
                tmpfs_tmp: false,
                env: Vec::new(),
                extra_volumes: Vec::new(),
                service_account: None,
                security_context: None,
                produces,
                identity: Identity::Spec,
                root: JobRoot::ReadOnly,
            },
        )
    })
    .collect()
}
