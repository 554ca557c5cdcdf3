//! Checks the planner makes before any write: the StorageClasses the claims need, and the SSH
//! key pair reused from Secret uyuni-migration-key.

use crate::common;

use uyuni_core::storage::{StorageClassInfo, StorageError};
use uyuni_core::{Kind, Object, PlanError, plan};

fn class(name: &str, default: bool) -> StorageClassInfo {
    StorageClassInfo {
        name: name.into(),
        default,
    }
}

#[test]
fn without_a_default_class_claims_that_name_none_are_refused() {
    let params = common::params();
    let mut observed = common::empty_cluster();
    observed.storage_classes = Some(vec![class("local-path", false), class("fast", false)]);
    match plan(&params, &observed) {
        Err(PlanError::Storage(StorageError::NoDefault { claims, found })) => {
            assert!(claims.iter().any(|c| c == "var-pgsql"), "{claims:?}");
            assert_eq!(found, ["local-path", "fast"]);
        }
        other => panic!("not refused: {other:?}"),
    }
    let text = plan(&params, &observed).expect_err("refused").to_string();
    assert!(
        text.contains("--volumes-class") && text.contains("local-path, fast"),
        "{text}"
    );
}

#[test]
fn a_default_class_or_a_named_existing_class_is_enough() {
    let params = common::params();
    let mut observed = common::empty_cluster();
    observed.storage_classes = Some(vec![class("local-path", true)]);
    assert!(plan(&params, &observed).is_ok());

    let mut args = common::args_with_ssh(&common::private_key("k"));
    args.spec.volumes_class = Some("fast".into());
    let fast = uyuni_core::MigrateParams::from_args(&args).expect("valid");
    observed.storage_classes = Some(vec![class("fast", false)]);
    assert!(plan(&fast, &observed).is_ok());
}

#[test]
fn a_class_that_does_not_exist_is_refused_naming_it() {
    let mut args = common::args_with_ssh(&common::private_key("k"));
    args.spec.volume_classes = vec!["var-pgsql=ssd".into()];
    let params = uyuni_core::MigrateParams::from_args(&args).expect("valid");
    let mut observed = common::empty_cluster();
    observed.storage_classes = Some(vec![class("local-path", true)]);
    match plan(&params, &observed) {
        Err(PlanError::Storage(StorageError::Missing { class, claims, .. })) => {
            assert_eq!(class, "ssd");
            assert!(claims.contains(&"var-pgsql".to_owned()), "{claims:?}");
        }
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn existing_claims_are_not_checked_and_unlistable_classes_are_a_warning() {
    let params = common::params();
    // A resumed run: every claim exists already (bound), and the default class is gone.
    let mut observed = common::after_sync(&params);
    observed.storage_classes = Some(Vec::new());
    for claim in &params.spec.volumes {
        assert!(observed.contains(Kind::PersistentVolumeClaim, &claim.name));
    }
    let upgraded = uyuni_core::builders::database::upgraded_claim(&params);
    observed.insert(Object::PersistentVolumeClaim(
        uyuni_core::builders::pvc::pvc(common::NAMESPACE, &upgraded),
    ));
    assert!(plan(&params, &observed).is_ok());
    assert_eq!(uyuni_core::storage::unchecked_warning(&observed), None);

    let mut unknown = common::empty_cluster();
    unknown.storage_classes = None;
    assert!(
        plan(&params, &unknown).is_ok(),
        "not allowed to list: not blocked"
    );
    assert!(uyuni_core::storage::unchecked_warning(&unknown).is_some());
}

#[test]
fn a_reused_secret_whose_public_key_is_of_another_pair_is_refused() {
    let mut args = common::args_with_ssh(&common::private_key("k"));
    args.ssh_key_private = None;
    args.ssh_key_public = None;
    let params = uyuni_core::MigrateParams::from_args(&args).expect("valid");
    let mut observed = common::empty_cluster();
    let other_public =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl other\n";
    observed.insert(Object::Secret(
        uyuni_core::builders::migration::ssh_key_secret(
            common::NAMESPACE,
            &uyuni_core::params::SshKeyPair {
                private: uyuni_core::secret::SecretString::new(common::private_key("k")),
                public: other_public.into(),
            },
        ),
    ));
    let err = plan(&params, &observed).expect_err("mismatched pair refused");
    let text = err.to_string();
    assert!(
        text.contains("key `key.pub` does not belong to the private key"),
        "{text}"
    );
    // The matching pair is reused.
    observed.insert(Object::Secret(
        uyuni_core::builders::migration::ssh_key_secret(
            common::NAMESPACE,
            &uyuni_core::params::SshKeyPair {
                private: uyuni_core::secret::SecretString::new(common::private_key("k")),
                public: common::PUBLIC_KEY.into(),
            },
        ),
    ));
    assert!(plan(&params, &observed).is_ok());
}
