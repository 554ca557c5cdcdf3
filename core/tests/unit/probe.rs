use crate::unit::ssh::keygen;
use uyuni_core::params::MigrateParams;
use uyuni_core::probe::{
    PROBE_LIMIT_SECONDS, ProbeFiles, ProbeUnavailable, SSH_BATCH_OPTIONS, SourceProbe, source_probe,
};
use uyuni_core::shell::quote as shell_quote;
use uyuni_core::volumes::VolumeRole;

fn probe_files() -> ProbeFiles {
    ProbeFiles {
        private_key: Some("/home/me/.ssh/id_migrate".into()),
        known_hosts: Some("/home/me/known hosts".into()),
        config: None,
    }
}

fn args_text(probe: &SourceProbe) -> Vec<String> {
    probe
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn the_probe_runs_du_over_the_copied_trees_like_the_job_would() {
    let params = MigrateParams::from_args(&crate::unit::params::args()).expect("valid");
    let probe = source_probe(&params, &probe_files()).expect("files given");
    assert_eq!(probe.program, "ssh");
    assert_eq!(probe.timeout_seconds, PROBE_LIMIT_SECONDS);
    let args = args_text(&probe);
    assert_eq!(
        args[..12],
        [
            "-i",
            "/home/me/.ssh/id_migrate",
            "-o",
            "UserKnownHostsFile=\"/home/me/known hosts\"",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
            "-F",
            "/dev/null",
        ]
    );
    assert_eq!(args[12], "root@uyuni.example.com");
    let remote = &args[13];
    assert_eq!(args.len(), 14);
    assert!(remote.starts_with("du -s -b '/"), "{remote}");
    assert!(remote.ends_with(" 2>/dev/null; true"), "{remote}");
    assert!(remote.contains("'/var/lib/pgsql/data'"), "{remote}");
    for volume in &params.spec.volumes {
        let quoted = shell_quote(volume.mount_path.trim_end_matches('/'));
        assert_eq!(
            remote.contains(&quoted),
            volume.role != VolumeRole::Migration,
            "{}",
            volume.mount_path
        );
    }
}

#[test]
fn the_probe_uses_sudo_and_the_given_config() {
    let mut a = crate::unit::params::args();
    a.ssh_user = "admin".into();
    let params = MigrateParams::from_args(&a).expect("valid");
    let files = ProbeFiles {
        config: Some("/home/me/.ssh/config".into()),
        ..probe_files()
    };
    let args = args_text(&source_probe(&params, &files).expect("files given"));
    let f = args.iter().position(|a| a == "-F").expect("-F");
    assert_eq!(args[f + 1], "/home/me/.ssh/config");
    assert_eq!(args[args.len() - 2], "admin@uyuni.example.com");
    assert!(args[args.len() - 1].starts_with("sudo -n du -s -b "));
}

#[test]
fn the_probe_needs_the_key_and_known_hosts_files_and_puts_no_secret_in_argv() {
    let (private, public) = keygen("ed25519", "");
    let mut a = crate::unit::params::args();
    a.ssh_key_private = Some(uyuni_core::params::FileInput {
        path: "/home/me/.ssh/id_migrate".into(),
        content: uyuni_core::secret::SecretString::new(private.clone()),
    });
    a.ssh_key_public = Some(uyuni_core::params::FileInput {
        path: "/home/me/.ssh/id_migrate.pub".into(),
        content: uyuni_core::secret::SecretString::new(public),
    });
    let params = MigrateParams::from_args(&a).expect("valid");
    for files in [
        ProbeFiles::default(),
        ProbeFiles {
            known_hosts: None,
            ..probe_files()
        },
        ProbeFiles {
            private_key: None,
            ..probe_files()
        },
    ] {
        assert_eq!(
            source_probe(&params, &files),
            Err(ProbeUnavailable::NoSshFiles)
        );
    }
    let args = args_text(&source_probe(&params, &probe_files()).expect("files given"));
    let key_body = private.lines().nth(1).expect("a key line");
    assert!(args.iter().all(|a| !a.contains(key_body)), "{args:?}");
}

#[test]
fn the_data_sync_script_uses_the_same_batch_options() {
    // core/scripts/data-sync.sh: the ssh command and rsync's remote shell, each a line of
    // its own with every batch option.
    let script = uyuni_core::scripts::data_sync::SCRIPT;
    for option in SSH_BATCH_OPTIONS {
        let option = format!("-o {option}");
        let lines = script
            .lines()
            .filter(|l| !l.trim_start().starts_with('#') && l.contains(&option))
            .count();
        assert!(
            lines >= 2,
            "{option}: in the ssh and the rsync command lines"
        );
    }
}
