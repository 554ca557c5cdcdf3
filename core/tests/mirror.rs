//! `--mirror-claim`: the user's claim holding a local mirror is checked before anything is
//! written, mounted at /mirror in the server with `MIRROR_PATH`, and never written.

use crate::common;

use uyuni_core::object::{Kind, ObjectRef};
use uyuni_core::{MigrateParams, Object, Op, ParamsError, PlanError, plan, preview};

fn params(claim: &str) -> Result<MigrateParams, ParamsError> {
    let mut args = common::args_with_ssh(&common::private_key("fixture-private-key"));
    args.spec.mirror_claim = Some(claim.into());
    MigrateParams::from_args(&args)
}

#[test]
fn a_missing_mirror_claim_stops_the_run_before_any_write() {
    let params = params("my-mirror").expect("valid");
    let err = plan(&params, &common::empty_cluster()).expect_err("missing claim");
    assert!(matches!(err, PlanError::MirrorClaimMissing { .. }), "{err}");
    assert!(err.to_string().contains("my-mirror"), "{err}");
}

#[test]
fn the_mirror_claim_is_mounted_in_the_server_and_never_written() {
    let params = params("my-mirror").expect("valid");
    let mut observed = common::empty_cluster();
    observed.insert(common::namespace());
    let mut claim = common::pvc_of(&common::params(), "var-cache");
    claim.metadata.name = Some("my-mirror".into());
    observed.insert(Object::PersistentVolumeClaim(claim));
    let first = plan(&params, &observed).expect("plan");
    let step = first
        .steps
        .iter()
        .find(|s| s.id == "mirror-claim")
        .expect("step");
    assert_eq!(step.op, Op::Unchanged);

    let preview = preview(&params, &observed).expect("preview");
    let mirror = ObjectRef::new(Kind::PersistentVolumeClaim, "my-mirror");
    assert!(
        preview.executed.iter().all(|s| s.target != mirror),
        "the claim was written"
    );
    let server = preview
        .executed
        .iter()
        .filter_map(|s| s.action.object())
        .find_map(|o| match o {
            Object::Deployment(d) if d.metadata.name.as_deref() == Some("uyuni") => Some(d),
            _ => None,
        })
        .expect("server Deployment");
    let pod = server.spec.and_then(|s| s.template.spec).expect("pod");
    let volume = pod
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.name == "mirror")
        .expect("mirror volume");
    assert_eq!(
        volume
            .persistent_volume_claim
            .map(|c| c.claim_name)
            .as_deref(),
        Some("my-mirror")
    );
    let container = &pod.containers[0];
    assert!(
        container
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == "mirror" && m.mount_path == "/mirror")
    );
    assert!(
        container
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "MIRROR_PATH" && e.value.as_deref() == Some("/mirror"))
    );
}

#[test]
fn without_the_flag_the_server_has_no_mirror() {
    let params = common::params();
    let preview = preview(&params, &common::empty_cluster()).expect("preview");
    let text = serde_json::to_string(&preview.final_plan).expect("json")
        + &format!("{:?}", preview.executed);
    assert!(!text.contains("MIRROR_PATH"));
}

#[test]
fn mirror_claim_names_are_validated() {
    assert!(matches!(
        params("Bad_Name"),
        Err(ParamsError::MirrorClaim(_))
    ));
    assert!(
        matches!(params("srv-www"), Err(ParamsError::MirrorClaim(_))),
        "one of the server's own claims"
    );
}

#[test]
fn a_source_mirror_without_the_claim_is_said_at_the_end() {
    let mut observed = common::after_sync(&common::params());
    let Some(Object::Secret(mut data)) = observed.get(Kind::Secret, common::DATA_SECRET).cloned()
    else {
        panic!("extracted data");
    };
    data.data.get_or_insert_default().insert(
        uyuni_core::scripts::data_keys::MIRROR.into(),
        k8s_openapi::ByteString(b"/srv/mirror".to_vec()),
    );
    observed.insert(Object::Secret(data));
    let notes = uyuni_core::plan::exposure_notes(&common::params(), &observed);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("/srv/mirror") && n.contains("--mirror-claim")),
        "{notes:?}"
    );
    let with_claim = params("my-mirror").expect("valid");
    let notes = uyuni_core::plan::exposure_notes(&with_claim, &observed);
    assert!(
        !notes.iter().any(|n| n.contains("--mirror-claim")),
        "{notes:?}"
    );
}
