use serde_json::json;
use uyuni_testdata::golden::{
    GoldenDir, abbreviate_scripts, extract_objects, loose_files, script_marker,
};

#[test]
fn multi_line_scripts_become_markers_and_short_commands_stay() {
    let job = json!({"spec": {"template": {"spec": {
        "initContainers": [{"name": "init", "command": ["bash"], "args": ["-c", "a\nb\n"]}],
        "containers": [
            {"name": "main", "command": ["bash", "-c", "echo one\necho two\necho three\n"]},
            {"name": "probe", "command": ["sh", "-c", "pg_isready"]},
        ],
    }}}});
    let out = abbreviate_scripts(&job);
    let spec = &out["spec"]["template"]["spec"];
    assert_eq!(
        spec["containers"][0]["command"][2],
        script_marker("main", "echo one\necho two\necho three\n")
    );
    assert!(
        spec["containers"][0]["command"][2]
            .as_str()
            .is_some_and(|m| m.starts_with("<script main, sha256:") && m.ends_with(", 3 lines>"))
    );
    assert_eq!(spec["containers"][1]["command"][2], "pg_isready");
    assert_eq!(
        spec["initContainers"][0]["args"][1],
        script_marker("init", "a\nb\n")
    );
}

#[test]
fn a_stale_file_fails_the_check_and_the_update_removes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut golden = GoldenDir::new("scenario");
    golden.file("steps.txt", "1. create\n2. run\n");
    let problems = golden
        .compare(dir.path(), false)
        .expect_err("nothing on disk");
    assert!(problems.contains("steps.txt is missing"), "{problems}");

    golden.compare(dir.path(), true).expect("update");
    std::fs::write(dir.path().join("job-old.yaml"), "kind: Job\n").expect("write");
    let problems = golden.compare(dir.path(), false).expect_err("stale file");
    assert!(
        problems.contains("job-old.yaml is no longer produced") && !problems.contains("steps.txt"),
        "{problems}"
    );

    let mut changed = GoldenDir::new("scenario");
    changed.file("steps.txt", "1. create\n2. wait\n");
    let problems = changed.compare(dir.path(), false).expect_err("changed");
    assert!(
        problems.contains("-2. run\n+2. wait"),
        "a unified diff: {problems}"
    );

    changed.compare(dir.path(), true).expect("update");
    assert!(
        !dir.path().join("job-old.yaml").exists(),
        "the update removes it"
    );
    changed.compare(dir.path(), false).expect("up to date");
}

#[test]
fn a_file_outside_the_scenario_directories_fails_until_removed() {
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(root.path().join("scenario")).expect("mkdir");
    loose_files(root.path(), false).expect("only directories");
    std::fs::write(root.path().join("preview-empty-cluster.txt"), "old\n").expect("write");
    let problems = loose_files(root.path(), false).expect_err("a loose file");
    assert!(problems.contains("preview-empty-cluster.txt"), "{problems}");
    loose_files(root.path(), true).expect("update");
    loose_files(root.path(), false).expect("removed");
    assert!(root.path().join("scenario").is_dir());
}

#[test]
fn a_changed_script_changes_its_marker() {
    assert_ne!(script_marker("c", "a\n"), script_marker("c", "b\n"));
}

#[test]
fn nested_objects_are_replaced_by_their_file_names() {
    let mut plan = json!({"steps": [
        {"id": "ns", "action": {"apply": {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "uyuni"}}}},
        {"id": "wait", "action": {"wait": {"kind": "Namespace", "name": "uyuni"}}},
    ]});
    let objects = extract_objects(&mut plan);
    assert_eq!(objects.len(), 1);
    assert_eq!(
        plan["steps"][0]["action"]["apply"],
        "file namespace-uyuni.yaml"
    );
    assert_eq!(plan["steps"][1]["action"]["wait"]["name"], "uyuni");
}
