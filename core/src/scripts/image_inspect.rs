//! The image inspection's script (`core/scripts/image-inspect.sh`): run in each image an upgrade
//! involves, it reports the image's product, release and PostgreSQL major (and a server image's
//! kind, `ca_copy`) as `key=value` lines
//! in its container's termination message ([`crate::inspect`]). Kubernetes copies the file at
//! `terminationMessagePath` (default `/dev/termination-log`, policy `File`) into the container's
//! `state.terminated.message`, at most 4096 bytes (k8s.io/api core/v1 `Container`
//! `TerminationMessagePath`).

use super::JobScript;

pub const SCRIPT: &str = include_str!("../../scripts/image-inspect.sh");

/// The kubelet's default termination message path.
pub const TERMINATION_LOG: &str = "/dev/termination-log";

/// The inspection of `image`.
pub fn render(image: &str, local_root: &str) -> JobScript {
    JobScript::new(
        SCRIPT,
        vec![
            ("IMAGE", image.to_owned()),
            ("TERMINATION_LOG", TERMINATION_LOG.to_owned()),
        ],
        local_root,
    )
}

/// The inspection of server image `image`: also which kind of server image it is, as the
/// server image check reports it (`ca_copy`), for the server Deployment an upgrade writes.
pub fn render_server(image: &str, local_root: &str) -> JobScript {
    let mut script = render(image, local_root);
    script.env.extend([
        ("INIT_DIR", super::image_check::SERVER_INIT_DIR.to_owned()),
        ("SALT_CA_FILE", super::image_check::SALT_CA_FILE.to_owned()),
    ]);
    script
}
