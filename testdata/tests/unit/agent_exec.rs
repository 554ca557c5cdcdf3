use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::json;
use uyuni_testdata::agent::exec::{
    argv, exit_code, exit_reason, mount_env_name, mounts, wants_execution,
};

fn container(v: serde_json::Value) -> Container {
    serde_json::from_value(v).expect("container")
}

#[test]
fn argv_is_command_then_args_and_needs_a_command() {
    let c = container(json!({"name": "m", "command": ["sh", "-c"], "args": ["echo hi"]}));
    assert_eq!(argv(&c).expect("argv"), ["sh", "-c", "echo hi"]);
    let none = container(json!({"name": "m", "args": ["x"]}));
    let e = argv(&none).expect_err("no command");
    assert!(
        e.contains("no command specified") && e.contains("\"m\""),
        "{e}"
    );
}

#[test]
fn mount_variables_and_execute_annotation() {
    assert_eq!(
        mount_env_name("work-dir.1"),
        "UYUNI_SANDBOX_MOUNT_WORK_DIR_1"
    );
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "annotations": {"uyuni.test/execute": "true"}},
        "spec": {"containers": [], "volumes": [
            {"name": "scratch", "emptyDir": {}},
            {"name": "cfg", "configMap": {"name": "x"}}]}
    }))
    .expect("pod");
    assert!(wants_execution(&pod));
    let c = container(json!({"name": "m", "volumeMounts": [
        {"name": "scratch", "mountPath": "/s"}, {"name": "cfg", "mountPath": "/c"}]}));
    let m = mounts(&pod, &c, Path::new("/sb/p"));
    assert_eq!(
        m,
        [(
            "UYUNI_SANDBOX_MOUNT_SCRATCH".to_owned(),
            PathBuf::from("/sb/p/volumes/scratch")
        )]
    );
    let plain: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}})).expect("pod");
    assert!(!wants_execution(&plain));
}

#[test]
fn exit_codes_of_signals() {
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
    assert_eq!(exit_code(ExitStatus::from_raw(15)), 143);
    assert_eq!(exit_code(ExitStatus::from_raw(9)), 137);
    assert_eq!(exit_reason(0), "Completed");
    assert_eq!(exit_reason(143), "Error");
}
