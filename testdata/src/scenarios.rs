//! Built-in scenarios, shared by the Rust tests and `uyuni-sim serve --scenario builtin:NAME`.

use std::sync::OnceLock;

use crate::scenario::{JobScript, PatchSecret, Scenario, SideEffect};

/// The names `builtin:NAME` accepts.
pub const BUILTIN: &[&str] = &["migration", "default"];

/// A built-in scenario by name.
pub fn builtin(name: &str) -> Option<Scenario> {
    match name {
        "migration" => Some(migration()),
        "default" => Some(Scenario::default()),
        _ => None,
    }
}

/// The source server's CA and its (decrypted) key, generated once per process.
fn source_ca() -> (String, String) {
    static CA: OnceLock<(String, String)> = OnceLock::new();
    CA.get_or_init(|| crate::certs::scenario_ca("uyuni.example.com CA").unwrap_or_default())
        .clone()
}

/// The source server's CA as the data-sync job finds it.
fn source_ca_pem() -> String {
    source_ca().0
}

/// What an encrypted CA key from `rhn-ssl-tool` looks like. The content is not a real key:
/// nothing in the tests decrypts it.
const FAKE_ENCRYPTED_KEY: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----
MIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQIc2ltdWxhdGVkAgIIADAMBggqhkiG
9w0CCQUAMBQGCCqGSIb3DQMHBAhzaW11bGF0ZQSCBMhVeXVuaSBzaW11bGF0ZWQgQ0Ega2V5LCBu
b3QgYSByZWFsIGtleS4gVXl1bmkgc2ltdWxhdGVkIENBIGtleSwgbm90IGEgcmVhbCBrZXkuIFV5
dW5pIHNpbXVsYXRlZCBDQSBrZXksIG5vdCBhIHJlYWwga2V5LiBVeXVuaSBzaW11bGF0ZWQgQ0Eg
-----END ENCRYPTED PRIVATE KEY-----
";

/// The Uyuni volumes the data-sync job copies, with plausible sizes in bytes.
const VOLUMES: &[(&str, u64)] = &[
    ("/var/lib/pgsql/data", 2_147_483_648),
    ("/var/spacewalk", 5_368_709_120),
    ("/var/cache", 268_435_456),
    ("/srv/www/htdocs/pub", 33_554_432),
    ("/etc/rhn", 65_536),
    ("/etc/pki/tls", 32_768),
    ("/root/ssl-build", 262_144),
];

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// rsync `--info=progress2`-like lines for the volumes.
fn sync_log() -> Vec<String> {
    let mut lines = vec![
        "Connecting to uyuni.example.com as root".to_string(),
        "[kubectl-uyuni.io/sync-mode=final] Stopping the source services: spacewalk-service stop"
            .to_string(),
        "[kubectl-uyuni.io/sync-mode=prepare] Copying while the source keeps serving: a prepare copy stops nothing"
            .to_string(),
    ];
    for (volume, size) in VOLUMES {
        lines.push(format!("Synchronizing {volume} ..."));
        for (pct, secs) in [(45u64, 10u64), (100, 22)] {
            let bytes = size * pct / 100;
            let rate = bytes as f64 / secs as f64 / 1_048_576.0;
            lines.push(format!(
                "{:>15} {:>3}% {:>8.2}MB/s    0:00:{:02}",
                thousands(bytes),
                pct,
                rate,
                secs
            ));
        }
    }
    lines.push("Extracting the server configuration".to_string());
    lines.push("Data synchronized".to_string());
    lines
}

/// The migration's data-sync: runs a few seconds, logs rsync progress, and writes the values
/// it extracted from the source server into Secret `uyuni-migration-data`.
pub fn migration() -> Scenario {
    let data: Vec<(&str, String)> = vec![
        ("job", "$JOB_NAME".to_string()),
        ("timezone", "Europe/Berlin".to_string()),
        ("pg_version", "16".to_string()),
        ("db_user", "spacewalk".to_string()),
        ("db_password", "correct horse battery".to_string()),
        ("db_name", "susemanager".to_string()),
        ("db_port", "5432".to_string()),
        ("report_db_user", "pythia_susemanager".to_string()),
        ("report_db_password", "another one with spaces".to_string()),
        ("has_hubxmlrpc", "false".to_string()),
        ("debug", "false".to_string()),
        ("tftp", "true".to_string()),
        ("fqdn", "uyuni.example.com".to_string()),
        ("ca.crt", source_ca_pem()),
        ("ca.key", FAKE_ENCRYPTED_KEY.to_string()),
    ];
    let mut scenario = Scenario::default();
    let data_sync = JobScript {
        duration_ms: 3000,
        log: sync_log(),
        side_effects: vec![SideEffect::PatchSecret(PatchSecret {
            name: "uyuni-migration-data".to_string(),
            string_data: data.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            at_ms: None,
            create_if_missing: false,
        })],
        ..JobScript::default()
    };
    scenario.jobs.insert("data-sync".to_string(), data_sync);
    // The target images as today's releases are: supported.
    for (step, line) in [
        (
            "image-check-server",
            "SUPPORTED: server image registry.opensuse.org/uyuni/server:latest sets the server up by itself at start",
        ),
        (
            "image-check-db",
            "SUPPORTED: database image registry.opensuse.org/uyuni/server-postgresql:latest runs PostgreSQL 18 with its start-up hooks",
        ),
        (
            "image-check-db-upgrade",
            "SUPPORTED: database upgrade image registry.opensuse.org/uyuni/server-database-migration:latest upgrades PostgreSQL 14 16 to 18",
        ),
    ] {
        let mut script = JobScript::succeed(150, &[line]);
        // The server check reports which kind of image it is, as upstream's newest is: its
        // trust-store script copies the CA into the Salt file root at start.
        if step == "image-check-server" {
            script.termination_message = Some("ca_copy=salt-file-root\n".to_string());
        }
        scenario.jobs.insert(step.to_string(), script);
    }
    // An upgrade's inspections: a server image is Uyuni of the release its tag names (`latest`
    // the newest, as its release file says: `scenario::image_release`), of the
    // kind the server check reports, a database image PostgreSQL 18 (a namespace's scenario
    // sets another major).
    for (step, report) in [
        (
            "inspect-running-server",
            "product=uyuni\nrelease=$IMAGE_RELEASE\nca_copy=salt-file-root\n",
        ),
        (
            "inspect-server",
            "product=uyuni\nrelease=$IMAGE_RELEASE\nca_copy=salt-file-root\n",
        ),
        ("inspect-running-db", "pg_major=18\n"),
        ("inspect-db", "pg_major=18\n"),
    ] {
        let mut script = JobScript::succeed(
            150,
            &["Inspected the image; its report is in the termination message"],
        );
        script.termination_message = Some(report.to_string());
        scenario.jobs.insert(step.to_string(), script);
    }
    scenario.jobs.insert(
        "db-backup".to_string(),
        JobScript::succeed(
            500,
            &[
                "Copying the database (PostgreSQL 18) into the backup volume",
                "Copied 2097152 KiB",
                "DONE",
            ],
        ),
    );
    scenario.jobs.insert(
        "db-restore".to_string(),
        JobScript::succeed(
            500,
            &[
                "Restoring the database from the backup of the images before the upgrade",
                "Copied 2097152 KiB",
                "DONE",
            ],
        ),
    );
    scenario.jobs.insert(
        "db-fixup".to_string(),
        JobScript::succeed(
            300,
            &[
                "The synced database is PostgreSQL 16",
                "Pointing rhn.conf at the db and reportdb Services",
                "Moving the setup marker from /root to /var/spacewalk",
                "DONE",
            ],
        ),
    );
    scenario.jobs.insert(
        "db-upgrade".to_string(),
        JobScript::succeed(
            1000,
            &[
                "Upgrading the database from PostgreSQL 16 to 18",
                "Performing Consistency Checks",
                "Upgrade Complete",
                "Upgrade to PostgreSQL 18 complete; the source volume is left as it was",
            ],
        ),
    );
    // A classic source keeps the DB user's md5 hash; the report user was created with scram.
    scenario.jobs.insert(
        "db-passwords".to_string(),
        JobScript::succeed(
            300,
            &[
                "Starting a temporary PostgreSQL server, reachable only through a socket in this pod",
                "Re-hashed the password of role spacewalk: md5 to scram-sha-256",
                "Role pythia_susemanager already has a scram-sha-256 password; left as it is",
                "Stopping the temporary PostgreSQL server",
                "Re-hashed to scram-sha-256: spacewalk",
                "DONE",
            ],
        ),
    );
    // The CA key Job writes the decrypted key into Secret uyuni-ca.
    scenario.jobs.insert(
        "ca-key".to_string(),
        JobScript::succeed(
            200,
            &[
                "Decrypting the CA key",
                "Writing the CA key into Secret uyuni-ca",
                "DONE",
            ],
        )
        .patching_secret("uyuni-ca", &[("tls.key", source_ca().1.as_str())]),
    );
    scenario.jobs.insert(
        "db-migration-sql".to_string(),
        JobScript::succeed(
            300,
            &[
                "Repointing auto-installable distributions and queueing a system overview update",
                "DONE",
            ],
        ),
    );
    scenario.jobs.insert(
        "db-finalize".to_string(),
        JobScript::succeed(500, &["Reindexing the database", "Database finalized"]),
    );
    scenario
}

/// [`migration`] with server images of the kind before upstream's trust-store script copied the
/// CA into the Salt file root (`ca_copy=none`): the server image check and the inspections of
/// server images say so, and the server Deployment mounts the CA there.
pub fn migration_with_server_images_not_copying_the_ca() -> Scenario {
    let mut scenario = migration();
    for step in [
        "image-check-server",
        "inspect-running-server",
        "inspect-server",
    ] {
        if let Some(script) = scenario.jobs.get_mut(step)
            && let Some(message) = &mut script.termination_message
        {
            *message = message.replace("ca_copy=salt-file-root", "ca_copy=none");
        }
    }
    scenario
}
