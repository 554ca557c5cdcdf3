//! The CA in the Salt file root, by the kind of server image (`ca_copy`): install and migrate
//! take it from the server image check, upgrade (and its rollback) from the inspection of the
//! server image it goes to; the server Deployment mounts `uyuni-ca`'s CA there only for an
//! image that does not copy it at start. A running server written before the tool mounted it is
//! not restarted for it: the next change of its pod template carries the mount.

use uyuni_core::catalogue::names;
use uyuni_core::params::UpgradeParams;
use uyuni_core::plan::Planner;
use uyuni_core::plan::upgrade::live_image;
use uyuni_core::scripts::image_check::SALT_CA_FILE;
use uyuni_core::{Action, Object, Observed, Op, Step};

use crate::common;
use crate::upgrade::{FROM, TO, installed_with_tag, upgrade_to};

/// What the check or inspection Job of `image` reports, its server images of kind
/// `kind(image)` (`none`, `salt-file-root`, or `None`: a report that does not say).
fn report(
    step: &str,
    image: &str,
    kind: &dyn Fn(&str) -> Option<&'static str>,
    pg_major: u32,
) -> String {
    let tag = image.rsplit(':').next().unwrap_or_default();
    let ca_copy = kind(image)
        .map(|k| format!("ca_copy={k}\n"))
        .unwrap_or_default();
    match step {
        "image-check-server" => ca_copy,
        "image-check-db" | "inspect-db" | "inspect-running-db" => format!("pg_major={pg_major}\n"),
        _ => format!("product=uyuni\nrelease={tag}\n{ca_copy}"),
    }
}

/// Runs `params`' plan step by step on the simulated cluster, each check and inspection Job
/// reporting as [`report`] says; returns the steps carried out and the end.
fn run<P: Planner>(
    params: &P,
    start: &Observed,
    kind: &dyn Fn(&str) -> Option<&'static str>,
) -> (Vec<Step>, Observed) {
    run_with(params, start, kind, 18)
}

/// [`run`], the database images reporting PostgreSQL `pg_major`.
pub(crate) fn run_with<P: Planner>(
    params: &P,
    start: &Observed,
    kind: &dyn Fn(&str) -> Option<&'static str>,
    pg_major: u32,
) -> (Vec<Step>, Observed) {
    let reports = |step: &str, image: &str| {
        (step.starts_with("inspect-") || step.starts_with("image-check-"))
            .then(|| report(step, image, kind, pg_major))
    };
    common::run_reporting(params, start, &reports).expect("plans")
}

/// The server Deployment's mount at the Salt file root's CA, if any: (volume, subPath,
/// read-only).
fn salt_ca_mount(observed: &Observed) -> Option<(String, Option<String>, Option<bool>)> {
    let d = observed.deployment(names::SERVER_DEPLOYMENT)?;
    let pod = d.spec.as_ref()?.template.spec.as_ref()?;
    let mount = pod.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == SALT_CA_FILE)?;
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)?;
    Some((
        volume.config_map.as_ref()?.name.clone(),
        mount.sub_path.clone(),
        mount.read_only,
    ))
}

fn mounted() -> Option<(String, Option<String>, Option<bool>)> {
    Some((
        names::CA_CONFIG_MAP.to_owned(),
        Some("ca.crt".to_owned()),
        Some(true),
    ))
}

/// Server images of `tag` do not copy the CA; every other does.
fn copying_but(tag: &'static str) -> impl Fn(&str) -> Option<&'static str> {
    move |image: &str| {
        if image.ends_with(&format!(":{tag}")) {
            Some("none")
        } else {
            Some("salt-file-root")
        }
    }
}

fn step<'a>(plan: &'a uyuni_core::Plan, id: &str) -> &'a Step {
    plan.steps
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("{id} planned"))
}

#[test]
fn install_mounts_the_ca_for_an_image_that_does_not_copy_it_and_not_for_one_that_does() {
    let params = installed_with_tag(FROM);
    let (_, none) = run(&params, &common::empty_cluster(), &|_| Some("none"));
    assert_eq!(salt_ca_mount(&none), mounted());
    let again = params.plan(&none).expect("plans again");
    assert!(again.is_done(), "{:?}", again.next_step());
    let (_, copying) = run(&params, &common::empty_cluster(), &|_| {
        Some("salt-file-root")
    });
    assert_eq!(salt_ca_mount(&copying), None);
    // A check that does not say (a version of this tool before it did): no mount, which
    // cannot stop the server's start.
    let (_, unknown) = run(&params, &common::empty_cluster(), &|_| None);
    assert_eq!(salt_ca_mount(&unknown), None);
}

#[test]
fn migrate_mounts_the_ca_by_what_the_server_image_check_reported() {
    let params = common::params();
    let (_, none) = run(&params, &common::empty_cluster(), &|_| Some("none"));
    assert_eq!(salt_ca_mount(&none), mounted());
    let (_, copying) = run(&params, &common::empty_cluster(), &|_| {
        Some("salt-file-root")
    });
    assert_eq!(salt_ca_mount(&copying), None);
}

/// Upgrade takes the kind from the inspection of the image it goes to: from a copying image
/// to one that does not copy, the mount comes with the new image, in the same rollout; the
/// rollback to the copying image takes it away again. A re-run plans nothing either time.
#[test]
fn an_upgrade_mounts_the_ca_for_the_image_it_goes_to_and_a_rollback_for_the_one_it_returns_to() {
    let kind = copying_but(TO);
    let (_, installed) = run(&installed_with_tag(FROM), &common::empty_cluster(), &kind);
    assert_eq!(salt_ca_mount(&installed), None);
    let params = upgrade_to(TO);
    let (steps, upgraded) = run(&params, &installed, &kind);
    assert_eq!(salt_ca_mount(&upgraded), mounted());
    // One write of the server Deployment: the new image and the mount together.
    let writes: Vec<&Step> = steps
        .iter()
        .filter(|s| s.id == "server-deployment" && s.op != Op::Unchanged)
        .collect();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert!(
        live_image(&upgraded, names::SERVER_DEPLOYMENT).is_some_and(|i| i.ends_with(TO)),
        "the new image"
    );
    assert!(params.plan(&upgraded).expect("plans").is_done());

    let back = UpgradeParams {
        rollback: true,
        ..params.clone()
    };
    let (_, rolled_back) = run(&back, &upgraded, &kind);
    assert!(
        live_image(&rolled_back, names::SERVER_DEPLOYMENT).is_some_and(|i| i.ends_with(FROM)),
        "the image before"
    );
    assert_eq!(salt_ca_mount(&rolled_back), None);
    assert!(back.plan(&rolled_back).expect("plans").is_done());
}

#[test]
fn an_upgrade_from_an_image_that_does_not_copy_the_ca_to_one_that_does_drops_the_mount() {
    let kind = copying_but(FROM);
    let (_, installed) = run(&installed_with_tag(FROM), &common::empty_cluster(), &kind);
    assert_eq!(salt_ca_mount(&installed), mounted());
    let params = upgrade_to(TO);
    let (_, upgraded) = run(&params, &installed, &kind);
    assert_eq!(salt_ca_mount(&upgraded), None);
    assert!(params.plan(&upgraded).expect("plans").is_done());
    // And back: the rollback's image does not copy it, so the mount returns.
    let back = UpgradeParams {
        rollback: true,
        ..params
    };
    let (_, rolled_back) = run(&back, &upgraded, &kind);
    assert_eq!(salt_ca_mount(&rolled_back), mounted());
}

/// The server Deployment as a version of this tool before the mount wrote it: the same, less
/// the CA volume and its mount.
fn without_mount(observed: &Observed) -> Observed {
    let mut observed = observed.clone();
    let mut d = observed
        .deployment(names::SERVER_DEPLOYMENT)
        .expect("the server")
        .clone();
    let pod = d
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .expect("pod");
    let volume = uyuni_core::builders::server::SALT_CA_VOLUME;
    pod.containers[0]
        .volume_mounts
        .get_or_insert_default()
        .retain(|m| m.name != volume);
    pod.volumes
        .get_or_insert_default()
        .retain(|v| v.name != volume);
    observed.insert(Object::Deployment(d));
    observed
}

/// A server that runs an image that does not copy the CA, written before the tool mounted it:
/// a re-run plans nothing for it (its pods are not restarted because the tool learned this);
/// the next change of its pod template, an upgrade's image, carries the mount.
#[test]
fn a_running_server_without_the_mount_is_kept_until_its_template_changes() {
    let kind = copying_but_none();
    let install = installed_with_tag(FROM);
    let (_, installed) = run(&install, &common::empty_cluster(), &kind);
    assert_eq!(salt_ca_mount(&installed), mounted());
    let before = without_mount(&installed);
    assert_eq!(salt_ca_mount(&before), None);
    let again = install.plan(&before).expect("plans");
    let server = step(&again, "server-deployment");
    assert_eq!(server.op, Op::Unchanged, "{}", server.reason);
    assert!(server.reason.contains("CA mounted"), "{}", server.reason);
    assert!(again.is_done(), "{:?}", again.next_step());
    // A change outside its template (the replica count) writes the form it runs, its pods
    // left alone.
    let mut scaled = before.clone();
    let mut d = scaled
        .deployment(names::SERVER_DEPLOYMENT)
        .expect("server")
        .clone();
    d.spec.as_mut().expect("spec").replicas = Some(3);
    scaled.insert(Object::Deployment(d));
    let plan = install.plan(&scaled).expect("plans");
    let server = step(&plan, "server-deployment");
    let Action::Apply(object) = &server.action else {
        panic!("the replicas are written: {server:?}")
    };
    let mut written = scaled.clone();
    written.insert((**object).clone());
    assert_eq!(salt_ca_mount(&written), None, "its pods left alone");
    assert_eq!(
        written
            .deployment(names::SERVER_DEPLOYMENT)
            .and_then(|d| d.spec.as_ref())
            .and_then(|s| s.replicas),
        Some(1)
    );
    // An upgrade changes the template: the mount comes with it.
    let (_, upgraded) = run(&upgrade_to(TO), &before, &kind);
    assert_eq!(salt_ca_mount(&upgraded), mounted());
}

/// Every server image does not copy the CA.
fn copying_but_none() -> impl Fn(&str) -> Option<&'static str> {
    |_: &str| Some("none")
}
