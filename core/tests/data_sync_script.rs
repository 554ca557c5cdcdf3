//! Tests of the data-sync script: the quoting helper, its parameters, ShellCheck, and runs of
//! the script under bash against stub commands (`core/tests/data_sync_script/stubs/`), a fake
//! source tree and a temporary directory standing in for the volumes.

use crate::common;
#[path = "data_sync_script/world.rs"]
mod world;

use world::*;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use proptest::prelude::*;
use uyuni_core::scripts::data_keys;
use uyuni_core::scripts::data_sync::{
    DataSyncScript, SCRIPT, ScriptPaths, SyncVolume, WORK_DIR, shell_quote, text,
};
use uyuni_core::volumes::{CATALOGUE, MIGRATION_VOLUME};

fn bash_printf(quoted: &str) -> Vec<u8> {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("printf %s {quoted}"))
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "{out:?}");
    out.stdout
}

// ---------------------------------------------------------------------------------------------
// Quoting

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn shell_quote_round_trips_through_bash(s in "[^\\x00]*") {
        prop_assert_eq!(bash_printf(&shell_quote(&s)), s.as_bytes().to_vec());
    }

    #[test]
    fn shell_quote_round_trips_shell_metacharacters(s in "[ '\"$`\\\\;&|<>(){}*?#!~\\n\\t a-z]{0,24}") {
        prop_assert_eq!(bash_printf(&shell_quote(&s)), s.as_bytes().to_vec());
    }
}

#[test]
fn shell_quote_examples() {
    assert_eq!(shell_quote(""), "''");
    assert_eq!(shell_quote("a b"), "'a b'");
    assert_eq!(shell_quote("it's"), r"'it'\''s'");
    assert_eq!(
        bash_printf(&shell_quote("$(touch /x)`id`")),
        b"$(touch /x)`id`"
    );
}

// ---------------------------------------------------------------------------------------------
// The script and its parameters

#[test]
fn production_paths_are_the_shared_constants() {
    let p = ScriptPaths::production();
    assert_eq!(p, ScriptPaths::default());
    assert_eq!(p.local_root, "");
    assert_eq!(p.ssh_private_key, uyuni_core::scripts::SSH_PRIVATE_KEY_PATH);
    assert_eq!(p.ssh_config, uyuni_core::scripts::SSH_CONFIG_PATH);
    assert_eq!(p.ssh_known_hosts, uyuni_core::scripts::SSH_KNOWN_HOSTS_PATH);
    assert_eq!(p.scratch_dir, uyuni_core::scripts::SECRET_SCRATCH_DIR);
    assert_eq!(
        p.service_account_dir,
        "/var/run/secrets/kubernetes.io/serviceaccount"
    );
    let migration = CATALOGUE
        .iter()
        .find(|v| v.name == MIGRATION_VOLUME)
        .expect("migration volume");
    assert_eq!(migration.mount_path, WORK_DIR);
    // The script names its working directory itself: the same one.
    assert!(SCRIPT.contains(&format!("\nWORK_DIR=$LOCAL_ROOT{WORK_DIR}\n")));
}

fn env_of(script: &DataSyncScript) -> BTreeMap<&'static str, String> {
    script.env().into_iter().collect()
}

#[test]
fn every_volume_is_synced_in_order_database_included() {
    let env = env_of(&script(false, "root", ScriptPaths::production()));
    let records: Vec<Vec<&str>> = env["SYNC_VOLUMES"]
        .lines()
        .map(|l| l.split('\t').collect())
        .collect();
    let volumes = production_volumes();
    assert_eq!(records.len(), volumes.len());
    for (v, record) in volumes.iter().zip(&records) {
        let links =
            if ["/var/cache", "/var/spacewalk", "/var/lib/pgsql/data"].contains(&v.path.as_str()) {
                "-L"
            } else {
                "-l"
            };
        // The copy while the source serves is always quick; once it is stopped, the
        // database is compared by content.
        let (stopped, need) = if v.database {
            ("checksum", "required")
        } else {
            ("quick", "optional")
        };
        // Configuration-sized volumes share one rsync; the bulk ones have one each.
        let copy = if v.bulk { "alone" } else { "batch" };
        assert_eq!(
            record,
            &[
                v.name.as_str(),
                v.path.as_str(),
                links,
                need,
                "quick",
                stopped,
                copy
            ],
            "{}",
            v.path
        );
    }
    assert!(
        env["SYNC_VOLUMES"]
            .ends_with("\nvar-pgsql\t/var/lib/pgsql/data\t-L\trequired\tquick\tchecksum\talone")
    );
    let batch: Vec<&str> = volumes
        .iter()
        .filter(|v| !v.bulk)
        .map(|v| v.name.as_str())
        .collect();
    let alone: Vec<&str> = volumes
        .iter()
        .filter(|v| v.bulk)
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(
        alone,
        [
            "var-search",
            "var-cache",
            "var-spacewalk",
            "var-log",
            "srv-www",
            "var-pgsql"
        ]
    );
    assert_eq!(batch.len(), 20, "{batch:?}");
    assert!(SCRIPT.contains("compare=(--checksum)"));
    assert!(SCRIPT.contains("--delete -f \"merge $WORK_DIR/exclude_list\""));
    assert!(SCRIPT.contains("\"${RSYNC[@]}\" --info=progress2 --stats \"$@\""));
    assert!(SCRIPT.contains("RSYNC+=(--trust-sender -e \"$RSYNC_RSH\")"));
}

#[test]
fn final_reads_and_catches_up_while_serving_then_stops_services_and_postgresql_before_the_copy() {
    let text = SCRIPT;
    let at = |what: &str| text.find(what).unwrap_or_else(|| panic!("{what}"));
    let start = at("on_source 'systemctl start postgresql.service'");
    let distros = at("spacewalk-sql --select-mode -");
    let filter = at("} >\"$WORK_DIR/exclude_list\"");
    let catch_up = at("  copy_volumes serving\n");
    let stop = at("on_source 'spacewalk-service stop'");
    let stop_pg = at("on_source 'systemctl stop postgresql.service'");
    let db = at("  copy_volumes stopped\n");
    assert!(
        start < distros
            && distros < filter
            && filter < catch_up
            && catch_up < stop
            && stop < stop_pg
            && stop_pg < db
    );
    // PostgreSQL is not started again once the outage began.
    assert_eq!(
        text.matches("systemctl start postgresql.service").count(),
        1
    );
}

#[test]
fn the_mode_and_compression_are_parameters() {
    let prepare = env_of(&script(true, "root", ScriptPaths::production()));
    let final_ = env_of(&script(false, "root", ScriptPaths::production()));
    assert_eq!(prepare["SYNC_MODE"], "prepare");
    assert_eq!(final_["SYNC_MODE"], "final");
    assert_eq!(final_["COMPRESS"], "false");
    let mut compressed = script(false, "root", ScriptPaths::production());
    compressed.compress = true;
    assert_eq!(env_of(&compressed)["COMPRESS"], "true");
    // Production needs no prefix: the variable is left out.
    assert!(!final_.contains_key("LOCAL_ROOT"));
}

#[test]
fn values_reach_the_script_verbatim_and_are_never_code() {
    // Hostile values travel in the environment, never in the text: the script is the same
    // and each value arrives as it was given.
    let mut s = script(false, "ad'min", ScriptPaths::production());
    s.source_fqdn = "evil.example.com; touch /tmp/pwned $(id)".to_owned();
    s.db_host = "db'; rm -rf /".to_owned();
    s.report_db_host = "report db".to_owned();
    s.volumes.push(SyncVolume {
        name: "odd".to_owned(),
        path: "/srv/it's here".to_owned(),
        database: false,
        bulk: true,
    });
    let env = env_of(&s);
    assert_eq!(env["SOURCE_FQDN"], s.source_fqdn);
    assert_eq!(env["SSH_USER"], "ad'min");
    assert_eq!(env["DB_HOST"], s.db_host);
    assert_eq!(env["REPORT_DB_HOST"], "report db");
    assert!(
        env["SYNC_VOLUMES"].ends_with("\nodd\t/srv/it's here\t-l\toptional\tquick\tquick\talone"),
        "{}",
        env["SYNC_VOLUMES"]
    );
    let text = text();
    // The code, not the comments (which say why there is neither).
    let code: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    assert!(!code.iter().any(|l| {
        l.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .any(|w| w == "eval")
    }));
    assert!(!code.iter().any(|l| l.contains("set -x")));
    let check = Command::new("bash")
        .arg("-n")
        .arg("-c")
        .arg(&text)
        .output()
        .expect("bash runs");
    assert!(check.status.success(), "{check:?}");
}

#[test]
fn hostile_database_hosts_reach_rhn_conf_as_they_are() {
    let w = World::new(true);
    let mut s = script(false, "root", w.paths());
    s.db_host = "db'; touch \"$HOME/pwned\" $(id)".to_owned();
    s.report_db_host = "report db".to_owned();
    let out = w.run_script(&s);
    assert_success(&out);
    let conf = w.read_local("/etc/rhn/rhn.conf");
    assert!(
        conf.contains(&format!("\ndb_host = {}\n", s.db_host)),
        "{conf}"
    );
    assert!(conf.contains("\nreport_db_host = report db\n"), "{conf}");
    assert!(!w.base.join("pwned").exists());
}

#[test]
fn secret_keys_are_the_shared_ones() {
    for key in [
        data_keys::TIMEZONE,
        data_keys::PG_VERSION,
        data_keys::DB_USER,
        data_keys::DB_PASSWORD,
        data_keys::DB_NAME,
        data_keys::DB_PORT,
        data_keys::REPORT_DB_USER,
        data_keys::REPORT_DB_PASSWORD,
        data_keys::HAS_HUBXMLRPC,
        data_keys::DEBUG,
        data_keys::TFTP,
        data_keys::FQDN,
        data_keys::CA_CERT,
        data_keys::CA_KEY,
        data_keys::SERVER_CERT,
        data_keys::SERVER_KEY,
        data_keys::OUTAGE_STARTED_AT,
        data_keys::SERVICES_STOPPED_AT,
        data_keys::MIRROR,
    ] {
        assert!(
            SCRIPT.contains(&format!("[{}]=", shell_quote(key))),
            "{key}"
        );
    }
    assert!(SCRIPT.contains(&format!(
        "printf '{{\"data\":{{\"%s\":\"%s\"' {}",
        shell_quote(data_keys::JOB)
    )));
}

/// Item 3 of issue 11: what changes between migrations is the Job's environment, never its
/// script, so a Job's command line is the same text for every server.
#[test]
fn two_data_sync_jobs_with_different_parameters_run_the_same_text() {
    use uyuni_core::builders::data_sync::data_sync_job;
    let command = |job: &k8s_openapi::api::batch::v1::Job| {
        let pod = job.spec.as_ref().and_then(|s| s.template.spec.as_ref());
        let container = &pod.expect("pod").containers[0];
        (
            container.command.clone().expect("command"),
            container.env.clone().expect("env"),
        )
    };
    let a = common::params();
    let mut b = common::params();
    b.source_fqdn = "other.example.org".to_owned();
    b.ssh_user = "admin".to_owned();
    b.prepare = !a.prepare;
    b.compress = !a.compress;
    let (command_a, env_a) = command(&data_sync_job(&a));
    let (command_b, env_b) = command(&data_sync_job(&b));
    assert_eq!(command_a, command_b);
    assert_eq!(command_a[..2], ["bash", "-c"]);
    assert_eq!(command_a[2], text());
    assert_ne!(env_a, env_b);
    let value = |env: &[k8s_openapi::api::core::v1::EnvVar], name: &str| {
        env.iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
            .unwrap_or_else(|| panic!("{name}"))
    };
    assert_eq!(value(&env_b, "SOURCE_FQDN"), "other.example.org");
    assert_eq!(value(&env_b, "SSH_USER"), "admin");
}

// ---------------------------------------------------------------------------------------------
// ShellCheck

#[test]
fn shellcheck_is_clean() {
    common::shellcheck_file("data-sync.sh");
}

#[test]
fn the_job_runs_the_shared_helpers_then_the_file() {
    assert_eq!(text(), format!("{}\n{}", uyuni_core::scripts::LIB, SCRIPT));
}

// ---------------------------------------------------------------------------------------------
// Runs under bash with stubs

fn position(log: &[String], pred: impl Fn(&str) -> bool) -> Option<usize> {
    log.iter().position(|l| pred(l))
}

fn decoded_data(patch: &str) -> BTreeMap<String, String> {
    let json: serde_json::Value = serde_json::from_str(patch).expect("patch is JSON");
    let data = json
        .get("data")
        .and_then(|d| d.as_object())
        .expect("data object");
    data.iter()
        .map(|(k, v)| {
            let b64 = v.as_str().expect("string value");
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .expect("base64");
            (k.clone(), String::from_utf8(bytes).expect("utf-8"))
        })
        .collect()
}

fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "script failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn assert_no_secrets(out: &Output) {
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for secret in [
        DB_PASSWORD,
        "p@ss word",
        REPORT_DB_PASSWORD,
        "CA-KEY-SECRET-TEXT",
        "SERVER-KEY-SECRET-TEXT",
        "TOKEN",
    ] {
        assert!(
            !all.contains(secret),
            "{secret:?} leaked into the output:\n{all}"
        );
    }
}

#[test]
fn final_run_with_the_uyuni_ca() {
    let w = World::new(true);
    let out = w.run(false, "admin");
    assert_success(&out);
    assert_no_secrets(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.trim_end().ends_with("DONE"), "{stdout}");
    assert!(stdout.contains("Synchronizing /var/lib/cobbler (var-cobbler: quick (size+mtime))\n"));
    assert!(stdout.contains("Synchronizing /var/lib/pgsql/data (var-pgsql: checksum)\n"));
    assert!(stdout.contains("skipping /var/lib/rhn/search"));
    assert!(stdout.contains("found the Uyuni CA key"));
    assert!(!stdout.contains("third-party"));

    // What it called.
    let log = w.log();
    let remote = |cmd: &str| position(&log, |l| l == format!("remote {cmd}"));
    let sw_stop = remote("spacewalk-service stop").expect("services stopped");
    let pg_start = remote("systemctl start postgresql.service").expect("pg started");
    let sql = remote("spacewalk-sql --select-mode -").expect("distros query");
    let pg_stop = remote("systemctl stop postgresql.service").expect("pg stopped");
    let hub = remote("systemctl is-active --quiet hub-xmlrpc-api.service").expect("hub query");
    let db_catch_up = position(&log, |l| {
        l.starts_with("rsync ") && l.contains(":/var/lib/pgsql/data/ ")
    })
    .expect("database caught up");
    let db_copy = position(&log, |l| {
        l.starts_with("rsync ") && l.contains(":/var/lib/pgsql/data/ ") && l.contains("--checksum")
    })
    .expect("database copied");
    assert!(hub < sw_stop, "the hub is asked before the services stop");
    // Everything that can happen while the source serves happens before the stop.
    assert!(
        pg_start < sql
            && sql < db_catch_up
            && db_catch_up < sw_stop
            && sw_stop < pg_stop
            && pg_stop < db_copy,
        "{log:?}"
    );
    // The source's configuration directories of steps 10 to 13 too (only read from the
    // source; no later copy undoes them), not in the window.
    for dir in [
        ":/srv/install/sles15/ ",
        ":/var/lib/cobbler/snippets/spacewalk/1/ ",
        ":/etc/tomcat/conf.d/ ",
        ":/etc/krb5.conf.d/ ",
    ] {
        let copy = position(&log, |l| l.starts_with("rsync ") && l.contains(dir))
            .unwrap_or_else(|| panic!("{dir} copied: {log:?}"));
        assert!(db_catch_up < copy && copy < sw_stop, "{dir}: {log:?}");
    }
    // Every source command went through sudo -n, every ssh call had the mounted material.
    for l in log.iter().filter(|l| l.starts_with("remote-raw ")) {
        assert!(l.starts_with("remote-raw sudo -n "), "{l}");
    }
    let key = w.base.join("ssh/id");
    for l in log.iter().filter(|l| l.starts_with("ssh-args ")) {
        assert!(l.contains(&format!("-i {}", key.display())), "{l}");
        assert!(
            l.contains(&format!("-F {}", w.base.join("ssh/config").display())),
            "{l}"
        );
        assert!(l.contains(&format!(
            "-o UserKnownHostsFile={}",
            w.base.join("ssh/known_hosts").display()
        )));
        assert!(
            l.contains("-o StrictHostKeyChecking=yes -o BatchMode=yes"),
            "{l}"
        );
        assert!(l.ends_with(" admin@uyuni.example.com"), "{l}");
    }
    for l in log.iter().filter(|l| l.starts_with("rsync ")) {
        assert!(l.contains("--rsync-path=sudo -n rsync"), "{l}");
        assert!(l.contains(&format!("-e ssh -i '{}'", key.display())), "{l}");
        assert!(l.contains("-a --trust-sender"), "{l}");
    }
    let db_rsync = &log[db_copy];
    assert!(
        db_rsync.contains(" --info=progress2 --stats -L --checksum --delete -f merge "),
        "{db_rsync}"
    );
    // The configuration-sized volumes, var-cobbler among them, are copied by one rsync.
    let cobbler = log
        .iter()
        .find(|l| l.starts_with("rsync ") && l.contains(":/var/lib/cobbler/. "))
        .expect("cobbler synced");
    assert!(
        cobbler.contains(
            " --info=progress2 --stats -R --no-implied-dirs --out-format=uyuni-file %i %l %n -l --delete "
        ),
        "{cobbler}"
    );
    assert!(cobbler.contains(" :/etc/rhn/. "), "{cobbler}");
    assert!(
        !log.iter()
            .any(|l| l.starts_with("rsync ") && l.contains("--checksum") && l != db_rsync),
        "only the database is copied with checksums: {log:?}"
    );
    assert!(log.iter().any(|l| l == "local spacewalk-service enable"));
    // TFTP is recorded, before the services stop, never enabled in the server container.
    let tftp = remote("systemctl is-enabled --quiet tftp.socket").expect("tftp query");
    assert!(tftp < sw_stop, "TFTP is asked before the services stop");
    assert!(
        !log.iter().any(|l| l.starts_with("local systemctl")),
        "{log:?}"
    );
    assert!(
        !log.iter()
            .any(|l| l.starts_with("local sudo") || l.starts_with("local timedatectl"))
    );
    let sql_in = fs::read_to_string(w.state.join("sql.in")).expect("sql");
    assert!(sql_in.contains("FROM rhnKickstartableTree GROUP BY base_path"));

    // What it wrote.
    assert!(
        !w.local("/var/lib/uyuni-tools/stale-RHN-ORG-PRIVATE-SSL-KEY")
            .exists()
    );
    let excludes = w.read_local("/var/lib/uyuni-tools/exclude_list");
    assert!(excludes.contains("-/ /srv/install/sles15\nP/ /srv/www/distributions/1-sles15\n"));
    assert!(!excludes.contains("gone"));
    assert!(excludes.contains("-/ /etc/apache2/httpd.conf\n"));
    assert!(!excludes.contains("noreplace.conf"));
    assert!(!excludes.contains("not-local"));
    assert!(excludes.contains("-/ /var/cache/zypp/**\n"));
    assert_eq!(
        w.read_local("/etc/apache2/httpd.conf"),
        "IMAGE HTTPD CONF\n"
    );
    assert_eq!(
        w.read_local("/etc/sysconfig/noreplace.conf"),
        "SOURCE NOREPLACE\n"
    );
    assert!(!w.local("/root/.mgr-sync").exists());
    assert!(!w.local("/var/cache/zypp/raw/x").exists());
    assert_eq!(w.read_local("/var/lib/pgsql/data/base/1/1259"), "table\n");
    assert_eq!(w.read_local("/var/spacewalk/packages/1/p.rpm"), "rpm\n");
    // Distributions and cobbler.
    assert_eq!(
        w.read_local("/srv/www/distributions/1-sles15/boot/linux"),
        "kernel\n"
    );
    let distro = w.read_local("/var/lib/cobbler/collections/distros/sles15.json");
    assert!(distro.contains("\"/srv/www/distributions/1-sles15/boot/linux\""));
    assert!(!distro.contains("/srv/install/"));
    // Snippets are not nested into themselves (D50).
    assert!(
        w.local("/var/lib/cobbler/snippets/spacewalk/1/my_snippet")
            .exists()
    );
    assert!(!w.local("/var/lib/cobbler/snippets/spacewalk/1/1").exists());
    // Tomcat, taskomatic, apache.
    let options = w.read_local("/etc/tomcat/conf.d/options.conf");
    assert_eq!(options, "JAVA_OPTS=\"  -Xmx1G\"\n");
    assert!(
        w.read_local("/etc/tomcat/server.xml")
            .contains("/usr/share/susemanager/www/tomcat/webapps")
    );
    assert!(
        w.read_local("/etc/apache2/vhosts.d/vhost-ssl.conf")
            .contains("DocumentRoot \"/usr/share/susemanager/www/htdocs\"")
    );
    assert!(
        w.read_local("/etc/rhn/taskomatic.conf")
            .contains("address=*:8001")
    );
    assert!(w.local("/etc/rhn/krb5.conf.d/realm.conf").exists());
    assert!(w.local("/etc/sysconfig/tomcat/systemd/jmx.conf").exists());
    // Custom CAs in /etc/rhn/ca, not the Uyuni CA.
    assert_eq!(w.read_local("/etc/rhn/ca/custom-ca.pem"), "CUSTOM CA\n");
    assert_eq!(w.read_local("/etc/rhn/ca/other-ca.pem"), "OTHER CA\n");
    assert!(
        !w.local("/etc/rhn/ca/LOCAL-RHN-ORG-TRUSTED-SSL-CERT")
            .exists()
    );
    assert!(!w.local("/etc/rhn/ca/RHN-ORG-TRUSTED-SSL-CERT").exists());
    let pub_link = fs::read_link(w.local("/srv/www/htdocs/pub/RHN-ORG-TRUSTED-SSL-CERT"))
        .expect("pub symlink");
    assert_eq!(
        pub_link,
        Path::new("/etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT")
    );
    // The CA key left the volume; the scratch dir is empty again.
    assert!(!w.local("/root/ssl-build").exists());
    assert_eq!(fs::read_dir(&w.scratch).expect("scratch").count(), 0);
    // rhn.conf.
    let conf = w.read_local("/etc/rhn/rhn.conf");
    for line in [
        "db_host = db",
        "report_db_host = reportdb",
        "db_ssl_enabled = 0",
        "report_db_ssl_enabled = 0",
        "server.no_ssl = 1",
        "java.hostname = uyuni.example.com",
        "server.susemanager.fromdir = /mirror",
    ] {
        assert_eq!(
            conf.lines().filter(|l| *l == line).count(),
            1,
            "{line} in\n{conf}"
        );
    }
    assert!(
        conf.contains(&format!("db_password =  {DB_PASSWORD}  \t\n")),
        "untouched"
    );
    let settings = w.read_local("/etc/cobbler/settings.d/zz-uyuni.settings");
    assert_eq!(
        settings.matches("client_use_localhost").count(),
        1,
        "{settings}"
    );

    // What it sent: first the clearing, then one patch with everything.
    let patches = w.patches();
    assert_eq!(patches.len(), 2, "{patches:?}");
    assert_eq!(patches[0].trim(), "{\"data\":null}");
    let mut data = decoded_data(&patches[1]);
    // The outage's times (a_final_run_records_when_it_stopped_the_source_… checks them).
    for key in [data_keys::OUTAGE_STARTED_AT, data_keys::SERVICES_STOPPED_AT] {
        assert!(data.remove(key).is_some(), "{key} recorded");
    }
    let expected: BTreeMap<String, String> = [
        (data_keys::JOB, JOB_NAME),
        (data_keys::TIMEZONE, "Europe/Berlin"),
        (data_keys::PG_VERSION, "14"),
        (data_keys::DB_USER, "spacewalk"),
        (data_keys::DB_PASSWORD, DB_PASSWORD),
        (data_keys::DB_NAME, "susemanager"),
        (data_keys::DB_PORT, "5432"),
        (data_keys::REPORT_DB_USER, "pythia_susemanager"),
        (data_keys::REPORT_DB_PASSWORD, REPORT_DB_PASSWORD),
        (data_keys::HAS_HUBXMLRPC, "true"),
        (data_keys::DEBUG, "true"),
        (data_keys::TFTP, "true"),
        (data_keys::MIRROR, "/srv/mirror"),
        (data_keys::FQDN, "uyuni.example.com"),
        (data_keys::CA_CERT, CA_CERT),
        (data_keys::CA_KEY, CA_KEY),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(data, expected);
    let curl = log.iter().find(|l| l.starts_with("curl ")).expect("curl");
    assert!(curl.contains("-sS --fail --cacert"), "{curl}");
    assert!(
        curl.contains("-H Content-Type: application/merge-patch+json -X PATCH"),
        "{curl}"
    );
    assert!(curl.contains("-o /dev/null https://10.43.0.1:443/api/v1/namespaces/uyuni/secrets/uyuni-migration-data"), "{curl}");

    // A second run changes nothing in the edited files.
    let before: Vec<String> = [
        "/etc/rhn/rhn.conf",
        "/etc/cobbler/settings.d/zz-uyuni.settings",
        "/etc/tomcat/conf.d/options.conf",
        "/etc/rhn/taskomatic.conf",
        "/var/lib/cobbler/collections/distros/sles15.json",
    ]
    .iter()
    .map(|p| w.read_local(p))
    .collect();
    w.clear_log();
    let again = w.run(false, "admin");
    assert_success(&again);
    let after: Vec<String> = [
        "/etc/rhn/rhn.conf",
        "/etc/cobbler/settings.d/zz-uyuni.settings",
        "/etc/tomcat/conf.d/options.conf",
        "/etc/rhn/taskomatic.conf",
        "/var/lib/cobbler/collections/distros/sles15.json",
    ]
    .iter()
    .map(|p| w.read_local(p))
    .collect();
    assert_eq!(before, after);
    let mut again_data = decoded_data(&w.patches()[1]);
    for key in [data_keys::OUTAGE_STARTED_AT, data_keys::SERVICES_STOPPED_AT] {
        assert!(again_data.remove(key).is_some(), "{key} recorded");
    }
    assert_eq!(again_data, expected);
}

#[test]
fn rhn_conf_edits_are_idempotent_on_an_already_edited_file() {
    // The source already carries the edits (for example a re-migration): nothing is repeated.
    let w = World::new(true);
    let conf = fs::read_to_string(rel(&w.src, "/etc/rhn/rhn.conf")).expect("conf");
    w.src(
        "/etc/rhn/rhn.conf",
        &format!("{conf}server.no_ssl = 1\ndb_host = db\njava.hostname = other.example.com\n"),
    );
    let out = w.run(false, "root");
    assert_success(&out);
    let conf = w.read_local("/etc/rhn/rhn.conf");
    assert_eq!(conf.matches("server.no_ssl").count(), 1, "{conf}");
    // Every db_host line is set, not only the first.
    assert_eq!(
        conf.lines().filter(|l| l.starts_with("db_host")).count(),
        2,
        "{conf}"
    );
    assert!(
        conf.lines()
            .filter(|l| l.starts_with("db_host"))
            .all(|l| l == "db_host = db")
    );
    assert!(conf.contains("java.hostname = other.example.com\n"));
    assert!(!conf.contains("java.hostname = uyuni.example.com"));
    let data = decoded_data(&w.patches()[1]);
    assert_eq!(data[data_keys::FQDN], "other.example.com");
}

#[test]
fn prepare_run_keeps_the_services_running() {
    let w = World::new(true);
    let out = w.run(true, "root");
    assert_success(&out);
    let log = w.log();
    assert!(
        log.iter()
            .any(|l| l == "remote systemctl start postgresql.service")
    );
    assert!(!log.iter().any(|l| l == "remote spacewalk-service stop"));
    assert!(!log.iter().any(|l| l.starts_with("remote systemctl stop")));
    // As root: no sudo anywhere.
    assert!(!log.iter().any(|l| l.contains("sudo")));
    assert_eq!(w.read_local("/var/lib/pgsql/data/PG_VERSION"), "14\n");
    // The database is copied like every other volume while PostgreSQL runs: the final run's
    // checksum pass follows. Only the measure of what that pass would move compares
    // checksums, without copying.
    let checksums: Vec<&String> = log.iter().filter(|l| l.contains("--checksum")).collect();
    assert_eq!(checksums.len(), 1, "{log:?}");
    assert!(
        checksums[0].contains("--dry-run") && checksums[0].contains(":/var/lib/pgsql/data/ "),
        "{checksums:?}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Synchronizing /var/lib/pgsql/data (var-pgsql: quick (size+mtime))\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  var-pgsql: quick (size+mtime)\n"),
        "{stdout}"
    );
}

#[test]
fn third_party_certificates_are_sent_instead_of_the_ca_key() {
    let w = World::new(false);
    let out = w.run(false, "root");
    assert_success(&out);
    assert_no_secrets(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("found a third-party server certificate"));
    assert!(!stdout.contains("found the Uyuni CA key"));
    let data = decoded_data(&w.patches()[1]);
    assert!(!data.contains_key(data_keys::CA_KEY));
    assert_eq!(data[data_keys::CA_CERT], CA_CERT);
    assert_eq!(data[data_keys::SERVER_CERT], SERVER_CERT);
    assert_eq!(data[data_keys::SERVER_KEY], SERVER_KEY);
    // Never onto a volume: neither the key nor the certificate is under the local root.
    let found = Command::new("grep")
        .args(["-rl", "SERVER-KEY-SECRET-TEXT"])
        .arg(&w.root)
        .output()
        .expect("grep");
    assert!(
        found.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&found.stdout)
    );
    assert!(!w.local("/root/ssl-build").exists());
    assert_eq!(fs::read_dir(&w.scratch).expect("scratch").count(), 0);
}

#[test]
fn optional_values_are_left_out_and_flags_are_false() {
    let w = World::new(true);
    fs::remove_file(w.state.join("is-active/hub-xmlrpc-api.service")).expect("rm");
    fs::remove_file(w.state.join("is-enabled/tftp.socket")).expect("rm");
    fs::remove_file(rel(&w.src, "/etc/rhn/taskomatic.conf")).expect("rm");
    fs::remove_file(rel(&w.src, "/etc/tomcat/conf.d/options.conf")).expect("rm");
    let conf = fs::read_to_string(rel(&w.src, "/etc/rhn/rhn.conf")).expect("conf");
    let conf: String = conf
        .lines()
        .filter(|l| {
            !l.starts_with("server.jabber_server")
                && !l.starts_with("report_db_password")
                && !l.starts_with("db_port")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    w.src("/etc/rhn/rhn.conf", &conf);
    let out = w.run(false, "root");
    assert_success(&out);
    let data = decoded_data(&w.patches()[1]);
    assert_eq!(data[data_keys::HAS_HUBXMLRPC], "false");
    assert_eq!(data[data_keys::DEBUG], "false");
    assert_eq!(data[data_keys::TFTP], "false");
    assert_eq!(data[data_keys::REPORT_DB_PASSWORD], "");
    assert_eq!(data[data_keys::DB_PORT], "5432");
    assert!(!data.contains_key(data_keys::FQDN));
}

#[test]
fn tftp_is_recorded_from_the_source_and_not_served_by_the_server() {
    // A link an earlier version of the script made in the sockets volume.
    let stale = "/etc/systemd/system/sockets.target.wants/tftp.socket";
    for (enabled, active, expected) in [
        (true, false, "true"),
        (false, true, "true"),
        (false, false, "false"),
    ] {
        let w = World::new(true);
        if !enabled {
            fs::remove_file(w.state.join("is-enabled/tftp.socket")).expect("rm");
        }
        if active {
            write(&w.state.join("is-active/tftp.socket"), "");
        }
        write(&w.local(stale), "");
        let out = w.run(false, "root");
        assert_success(&out);
        let data = decoded_data(&w.patches()[1]);
        assert_eq!(
            data[data_keys::TFTP],
            expected,
            "enabled={enabled} active={active}"
        );
        assert!(!w.local(stale).exists(), "the stale link is removed");
        assert!(
            !w.log().iter().any(|l| l.contains("enable tftp")),
            "{:?}",
            w.log()
        );
    }
}

#[test]
fn the_sources_mirror_directory_is_reported_and_rhn_conf_points_at_the_mount() {
    let w = World::new(true);
    let out = w.run(false, "root");
    assert_success(&out);
    let data = decoded_data(&w.patches()[1]);
    assert_eq!(data[data_keys::MIRROR], "/srv/mirror");
    assert!(
        w.read_local("/etc/rhn/rhn.conf")
            .lines()
            .any(|l| l == "server.susemanager.fromdir = /mirror")
    );

    // Without a mirror on the source: empty, and rhn.conf gets no fromdir.
    let w = World::new(true);
    let conf = fs::read_to_string(rel(&w.src, "/etc/rhn/rhn.conf")).expect("conf");
    let conf: String = conf
        .lines()
        .filter(|l| !l.starts_with("server.susemanager.fromdir"))
        .map(|l| format!("{l}\n"))
        .collect();
    w.src("/etc/rhn/rhn.conf", &conf);
    let out = w.run(false, "root");
    assert_success(&out);
    let data = decoded_data(&w.patches()[1]);
    assert_eq!(data[data_keys::MIRROR], "");
    assert!(!w.read_local("/etc/rhn/rhn.conf").contains("fromdir"));
}

#[test]
fn missing_database_credentials_fail() {
    let w = World::new(true);
    let conf = fs::read_to_string(rel(&w.src, "/etc/rhn/rhn.conf")).expect("conf");
    let conf: String = conf
        .lines()
        .filter(|l| !l.starts_with("db_password"))
        .map(|l| format!("{l}\n"))
        .collect();
    w.src("/etc/rhn/rhn.conf", &conf);
    let out = w.run(false, "root");
    assert_fails(&out, "/etc/rhn/rhn.conf has no db_password");
    assert_eq!(w.patches().len(), 1);
    // Synced, but removed on the way out all the same.
    assert!(w.log().iter().any(|l| l.contains(":/root/. ")));
    assert!(!w.local("/root/ssl-build").exists());
    assert_eq!(fs::read_dir(&w.scratch).expect("scratch").count(), 0);
}

fn assert_fails(out: &Output, message: &str) {
    assert!(!out.status.success(), "the script should fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(message),
        "{message:?} not in stderr:\n{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("DONE"));
}

#[test]
fn source_without_release_file_fails() {
    let w = World::new(true);
    fs::remove_file(rel(&w.src, "/etc/uyuni-release")).expect("rm");
    let out = w.run(false, "root");
    assert_fails(
        &out,
        "neither /etc/susemanager-release nor /etc/uyuni-release exists",
    );
    let log = w.log();
    assert!(!log.iter().any(|l| l == "remote spacewalk-service stop"));
    assert!(!log.iter().any(|l| l.starts_with("rsync ")));
}

#[test]
fn ssh_failure_fails() {
    let w = World::new(true);
    write(&w.state.join("ssh_fail"), "");
    let out = w.run(false, "root");
    assert_fails(&out, "ssh to uyuni.example.com failed");
    assert!(!w.log().iter().any(|l| l.starts_with("rsync ")));
    // The Secret was cleared before: no old data looks fresh.
    assert_eq!(w.patches().len(), 1);
}

#[test]
fn rsync_failure_fails() {
    let w = World::new(true);
    write(&w.state.join("rsync_fail"), "");
    let out = w.run(false, "root");
    assert_fails(&out, "rsync failed with exit code 12");
    assert_eq!(w.patches().len(), 1);
}

#[test]
fn curl_failure_fails() {
    let w = World::new(true);
    write(&w.state.join("curl_fail"), "");
    let out = w.run(false, "root");
    assert_fails(&out, "could not update Secret uyuni-migration-data");
    // It failed at the start, before touching the source.
    assert!(!w.log().iter().any(|l| l.starts_with("ssh-args ")));
}

#[test]
fn failing_final_patch_fails_and_leaves_no_key_behind() {
    let w = World::new(true);
    // Let the clearing pass, then fail the data patch.
    let curl = w.base.join("bin/curl");
    let text = fs::read_to_string(&curl).expect("curl stub");
    fs::write(
        &curl,
        text.replace(
            "if [ -e \"$FAKE_STATE/curl_fail\" ]; then",
            "if [ -e \"$FAKE_STATE/curl_fail\" ] || [ \"$n\" -ge 1 ]; then",
        ),
    )
    .expect("curl stub");
    let out = w.run(false, "root");
    assert_fails(&out, "could not update Secret uyuni-migration-data");
    assert_no_secrets(&out);
    assert!(!w.local("/root/ssl-build").exists());
    assert_eq!(fs::read_dir(&w.scratch).expect("scratch").count(), 0);
}

#[test]
fn missing_environment_fails_before_anything() {
    let w = World::new(true);
    let out = Command::new("bash")
        .arg("-c")
        .arg(text())
        .env_clear()
        .envs(script(false, "root", w.paths()).env())
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", w.base.join("bin").display()),
        )
        .env("FAKE_SRC", &w.src)
        .env("FAKE_STATE", &w.state)
        .env("FAKE_LOG", w.state.join("log"))
        .output()
        .expect("bash");
    assert_fails(&out, "NAMESPACE is not set");
    assert!(w.log().is_empty());
}

#[test]
fn missing_ssh_config_uses_dev_null() {
    let w = World::new(true);
    fs::remove_file(w.base.join("ssh/config")).expect("rm");
    let out = w.run(false, "root");
    assert_success(&out);
    let log = w.log();
    assert!(
        log.iter()
            .filter(|l| l.starts_with("ssh-args "))
            .all(|l| l.contains("-F /dev/null"))
    );
    assert!(
        log.iter()
            .filter(|l| l.starts_with("rsync "))
            .all(|l| l.contains("-F '/dev/null'"))
    );
}

// ---------------------------------------------------------------------------------------------
// Runs with the real rsync

/// Sets the modification time of `path` to 2026-01-01 00:00:00 plus `nanos`.
fn set_mtime(path: &Path, nanos: u32) {
    let t = std::time::UNIX_EPOCH + std::time::Duration::new(1_767_225_600, nanos);
    fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(t))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Rewrites a source file with content of the same size and a modification time in the same
/// second, as PostgreSQL may do to a data file while a `--prepare` copy runs.
fn rewrite_in_the_same_second(w: &World, path: &str, content: &str) {
    let file = rel(&w.src, path);
    assert_eq!(
        fs::metadata(&file).expect("source file").len(),
        content.len() as u64
    );
    fs::write(&file, content).expect("rewrite");
    set_mtime(&file, 900_000_000);
}

#[test]
fn the_final_run_copies_the_database_with_checksums_and_reports_each_mode() {
    let w = World::with_real_rsync(true);
    let table = "/var/lib/pgsql/data/base/1/1259";
    let package = "/var/spacewalk/packages/1/p.rpm";
    w.src(table, "table v1\n");
    w.src(package, "rpm v1\n");
    set_mtime(&rel(&w.src, table), 100_000_000);
    set_mtime(&rel(&w.src, package), 100_000_000);

    let out = w.run(true, "root");
    assert_success(&out);
    assert_eq!(w.read_local(table), "table v1\n");

    // Why: a quick pass (size and mtime, to the second) takes the rewritten file for unchanged.
    rewrite_in_the_same_second(&w, table, "table v2\n");
    rewrite_in_the_same_second(&w, package, "rpm v2\n");
    let out = w.run(true, "root");
    assert_success(&out);
    assert_eq!(
        w.read_local(table),
        "table v1\n",
        "missed by the quick pass"
    );

    // The final run's checksum pass copies it; the other volumes keep the quick check.
    let out = w.run(false, "root");
    assert_success(&out);
    assert_eq!(w.read_local(table), "table v2\n");
    assert_eq!(
        w.read_local(package),
        "rpm v1\n",
        "var-spacewalk was copied in quick mode, as reported"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout
        .split("How each volume was copied")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary in\n{stdout}"));
    assert!(summary.contains("\n  var-pgsql: checksum\n"), "{summary}");
    assert!(
        summary.contains("\n  var-spacewalk: quick (size+mtime)\n"),
        "{summary}"
    );
    assert!(
        summary.contains("\n  var-cobbler: quick (size+mtime)\n"),
        "{summary}"
    );
    // Volumes the fake source does not have are named as skipped.
    assert!(
        summary.contains("\n  srv-susemanager: skipped (not on the source)\n"),
        "{summary}"
    );
    assert!(stdout.trim_end().ends_with("DONE"), "{stdout}");
}

/// Every directory the sync may meet missing on a source: every volume but the database, and
/// the directories of steps 10–15 that the fake source has.
fn optional_source_dirs() -> Vec<String> {
    let mut dirs: Vec<String> = production_volumes()
        .into_iter()
        .filter(|v| !v.database)
        .map(|v| v.path)
        .collect();
    dirs.extend(
        [
            "/srv/install/sles15",
            "/var/lib/cobbler/snippets/spacewalk",
            "/etc/tomcat/conf.d",
            "/etc/krb5.conf.d",
            "/usr/share/pki/trust/anchors",
            "/usr/lib/systemd/system/tomcat.service.d",
        ]
        .map(str::to_owned),
    );
    dirs
}

#[test]
fn a_source_without_the_first_directory_of_the_ca_copy_syncs() {
    // The case rsync's --ignore-missing-args does not cover: a missing DIR/ (code 23).
    let w = World::with_real_rsync(true);
    fs::remove_dir_all(rel(&w.src, "/usr/share/pki/trust/anchors")).expect("rm");
    let out = w.run(false, "root");
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Not on the source, skipping /usr/share/pki/trust/anchors\n"),
        "{stdout}"
    );
    assert_eq!(w.read_local("/etc/rhn/ca/custom-ca.pem"), "CUSTOM CA\n");
    assert!(!w.local("/etc/rhn/ca/other-ca.pem").exists());
    assert!(
        !w.local("/etc/rhn/ca/LOCAL-RHN-ORG-TRUSTED-SSL-CERT")
            .exists()
    );
}

#[test]
fn a_source_missing_every_optional_directory_syncs() {
    let w = World::with_real_rsync(true);
    // What the server cannot do without stays: rhn.conf, the CA and the database.
    let keep = [
        "/etc/rhn/rhn.conf",
        "/etc/uyuni-release",
        "/etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT",
    ]
    .map(|p| (p, fs::read(rel(&w.src, p)).expect("kept file")));
    let dirs = optional_source_dirs();
    for dir in &dirs {
        let path = rel(&w.src, dir);
        if path.exists() {
            fs::remove_dir_all(&path).unwrap_or_else(|e| panic!("{dir}: {e}"));
        }
    }
    for (p, content) in &keep {
        let path = rel(&w.src, p);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, content).expect("restore");
    }
    for dir in &dirs {
        assert!(
            !rel(&w.src, dir).exists() || keep.iter().any(|(p, _)| p.starts_with(dir.as_str())),
            "{dir}"
        );
    }

    let out = w.run(false, "root");
    assert_success(&out);
    assert_no_secrets(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for dir in [
        "/var/lib/cobbler",
        "/var/spacewalk",
        "/srv/www",
        "/root",
        "/etc/tomcat",
        "/usr/share/pki/trust/anchors",
    ] {
        assert!(
            stdout.contains(&format!("Not on the source, skipping {dir}\n")),
            "{dir} in\n{stdout}"
        );
    }
    assert!(stdout.contains("Skipping missing distribution /srv/install/sles15"));
    assert!(stdout.contains("  var-cobbler: skipped (not on the source)\n"));
    assert!(stdout.contains("  var-pgsql: checksum\n"), "{stdout}");
    assert_eq!(w.read_local("/var/lib/pgsql/data/PG_VERSION"), "14\n");
    assert_eq!(decoded_data(&w.patches()[1])[data_keys::PG_VERSION], "14");
}

#[test]
fn a_source_without_a_required_directory_fails_before_stopping_anything() {
    for (path, message) in [
        (
            "/var/lib/pgsql/data",
            "the database directory /var/lib/pgsql/data does not exist on uyuni.example.com",
        ),
        (
            "/etc/rhn/rhn.conf",
            "/etc/rhn/rhn.conf does not exist on uyuni.example.com",
        ),
    ] {
        let w = World::with_real_rsync(true);
        let p = rel(&w.src, path);
        if p.is_dir() {
            fs::remove_dir_all(&p).expect("rm");
        } else {
            fs::remove_file(&p).expect("rm");
        }
        let out = w.run(false, "root");
        assert_fails(&out, message);
        let log = w.log();
        assert!(
            !log.iter().any(|l| l == "remote spacewalk-service stop"),
            "{path}: {log:?}"
        );
        assert!(
            !log.iter().any(|l| l.contains("rsync --server")),
            "{path}: nothing copied: {log:?}"
        );
        assert_eq!(w.patches().len(), 1, "only the clearing patch");
    }
}

#[test]
fn the_ssh_stub_runs_the_real_rsync_on_the_fake_source() {
    // The transport of the tests above: rsync really went through ssh to the fake source.
    let w = World::with_real_rsync(true);
    let out = w.run(false, "admin");
    assert_success(&out);
    let log = w.log();
    assert!(
        log.iter().any(
            |l| l.starts_with("remote-raw sudo -n rsync --server --sender ")
                && l.ends_with(" . /var/lib/pgsql/data/")
        ),
        "{log:?}"
    );
    assert_eq!(w.read_local("/var/lib/pgsql/data/base/1/1259"), "table\n");
    assert_eq!(w.read_local("/etc/rhn/ca/other-ca.pem"), "OTHER CA\n");
}

#[test]
fn ssh_material_in_a_path_with_quotes_and_spaces_reaches_ssh_through_the_real_rsync() {
    // rsync splits its -e command itself (a doubled quote stands for one): the key, config and
    // known_hosts paths must reach ssh whole, from the script's own ssh calls and from rsync's.
    let mut w = World::with_real_rsync(true);
    w.move_ssh_dir("it's an \"ssh\" dir");
    let out = w.run(false, "admin");
    assert_success(&out);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("ssh stub: no such file"));
    let log = w.log();
    assert!(
        log.iter()
            .any(|l| l.starts_with("remote-raw sudo -n rsync --server --sender ")),
        "{log:?}"
    );
    assert_eq!(w.read_local("/var/lib/pgsql/data/base/1/1259"), "table\n");

    // Without the config file: the other branch of RSYNC_RSH, with -F /dev/null.
    fs::remove_file(w.ssh_dir.join("config")).expect("rm config");
    let out = w.run(false, "admin");
    assert_success(&out);
}

/// Connections and sessions of one run, from the ssh stub's log.
fn ssh_counts(log: &[String]) -> (usize, usize, usize) {
    let count = |what: &str| log.iter().filter(|l| *l == what).count();
    let sessions = log.iter().filter(|l| l.starts_with("ssh-args ")).count();
    (count("ssh-connect"), sessions, count("ssh-master-exit"))
}

#[test]
fn one_ssh_connection_serves_every_session_of_a_run_and_is_closed_at_its_end() {
    // Each session used to cost a handshake: ~87 of them in a final run. Now the first opens a
    // shared connection whose socket is in the scratch dir, rsync's sessions included, and the
    // script ends it on exit.
    for prepare in [false, true] {
        let w = World::with_real_rsync(true);
        let out = w.run(prepare, "admin");
        assert_success(&out);
        let log = w.log();
        let (connections, sessions, closed) = ssh_counts(&log);
        assert_eq!(connections, 1, "prepare={prepare}: {log:?}");
        assert!(sessions > 10, "prepare={prepare}: only {sessions} sessions");
        assert!(
            log.iter()
                .any(|l| l.starts_with("remote-raw sudo -n rsync --server")),
            "rsync's sessions go through the stub too: {log:?}"
        );
        assert_eq!(closed, 1, "prepare={prepare}: {log:?}");
        assert_eq!(
            fs::read_dir(&w.scratch).expect("scratch").count(),
            0,
            "no socket left in the scratch dir"
        );
    }
}

#[test]
fn a_failed_run_closes_the_shared_ssh_connection_too() {
    let w = World::new(true);
    fs::remove_file(rel(&w.src, "/etc/uyuni-release")).expect("rm");
    let out = w.run(false, "root");
    assert_fails(
        &out,
        "neither /etc/susemanager-release nor /etc/uyuni-release exists",
    );
    let (connections, _, closed) = ssh_counts(&w.log());
    assert_eq!((connections, closed), (1, 1), "{:?}", w.log());
}

#[test]
fn every_ssh_of_the_script_shares_the_master_connection() {
    // The script's own ssh and rsync's -e carry the same options; the socket is in the
    // scratch dir the Job mounts, under a name short enough for a Unix socket.
    let production = format!("{}/ssh-master", uyuni_core::scripts::SECRET_SCRATCH_DIR);
    assert!(
        production.len() < 100,
        "{production}: too long for a socket"
    );
    let w = World::new(true);
    let out = w.run(false, "root");
    assert_success(&out);
    let socket = format!("ControlPath={}/ssh-master", w.scratch.display());
    let log = w.log();
    let calls: Vec<&String> = log
        .iter()
        .filter(|l| l.starts_with("ssh-args ") || l.starts_with("rsync "))
        .collect();
    assert!(calls.iter().any(|l| l.starts_with("rsync ")), "{log:?}");
    for line in calls {
        for option in ["ControlMaster=auto", "ControlPersist=600", socket.as_str()] {
            assert!(line.contains(option), "{option} missing in {line}");
        }
    }
}

/// An OpenSSH server on 127.0.0.1 for one test, logging each connection and session; the
/// world's SSH material (key, config, known_hosts) is made to reach it as the source.
struct Sshd {
    child: std::process::Child,
    log: PathBuf,
}

impl Sshd {
    /// `None` where the machine has no sshd or the test does not run as root (sshd checks the
    /// login against its own user); in CI both are given (scripts/test.sh installs sshd).
    fn start(w: &World) -> Option<Sshd> {
        let sshd = Path::new("/usr/sbin/sshd");
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if !sshd.exists() || !root {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI needs /usr/sbin/sshd (openssh-server) and root for the real-ssh test"
            );
            eprintln!("skipped: no /usr/sbin/sshd, or not root");
            return None;
        }
        let dir = w.base.join("sshd");
        fs::create_dir_all(&dir).expect("sshd dir");
        // sshd's privilege separation needs its directory.
        fs::create_dir_all("/run/sshd").expect("/run/sshd");
        let keygen = |path: &Path| {
            let _ = fs::remove_file(path);
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(path)
                .output()
                .expect("ssh-keygen runs");
            assert!(out.status.success(), "{out:?}");
        };
        keygen(&dir.join("host_key"));
        keygen(&w.ssh_dir.join("id"));
        let _ = fs::remove_file(w.ssh_dir.join("id.pub"));
        keygen(&dir.join("user_key"));
        fs::copy(dir.join("user_key"), w.ssh_dir.join("id")).expect("key");
        fs::set_permissions(w.ssh_dir.join("id"), fs::Permissions::from_mode(0o600))
            .expect("chmod key");
        fs::copy(dir.join("user_key.pub"), dir.join("authorized_keys")).expect("authorized");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let config = dir.join("sshd_config");
        fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
                 AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nUsePAM no\n\
                 PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nLogLevel VERBOSE\n",
                d = dir.display()
            ),
        )
        .expect("sshd_config");
        let host_key = fs::read_to_string(dir.join("host_key.pub")).expect("host key");
        fs::write(
            w.ssh_dir.join("known_hosts"),
            format!("[127.0.0.1]:{port} {host_key}"),
        )
        .expect("known_hosts");
        fs::write(
            w.ssh_dir.join("config"),
            format!("Host uyuni.example.com\n  HostName 127.0.0.1\n  Port {port}\n"),
        )
        .expect("ssh config");
        let log = dir.join("sshd.log");
        let child = Command::new(sshd)
            .arg("-D")
            .arg("-f")
            .arg(&config)
            .arg("-E")
            .arg(&log)
            .spawn()
            .expect("sshd starts");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "sshd does not listen: {}",
                fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Some(Sshd { child, log })
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Processes whose command line names `needle` (a master connection names its socket).
fn processes_naming(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc").expect("/proc").flatten() {
        if let Ok(cmdline) = fs::read(entry.path().join("cmdline")) {
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains(needle) {
                out.push(text);
            }
        }
    }
    out
}

#[test]
fn with_the_real_ssh_the_sessions_of_a_run_share_one_connection_that_ends_with_it() {
    // The real ssh and sshd, with the script's own options: this machine stands in for the
    // source. It has no Uyuni release file, so the script stops after its first checks (a
    // login check and two file tests) — enough sessions to see them share the connection, and
    // a failed run, which must close the connection too.
    let w = World::new(true);
    fs::remove_file(w.base.join("bin/ssh")).expect("rm ssh stub");
    let Some(sshd) = Sshd::start(&w) else { return };
    let out = w.run(false, "root");
    assert_fails(
        &out,
        "neither /etc/susemanager-release nor /etc/uyuni-release exists",
    );
    // sshd's verbose log: one "Accepted publickey" per connection, one "Starting session" per
    // command run over it.
    let log = sshd.log();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut log = log;
    while !log.contains("Close session") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        log = sshd.log();
    }
    let connections = log.matches("Accepted publickey").count();
    let sessions = log.matches("Starting session: command").count();
    assert_eq!(connections, 1, "{log}");
    assert!(sessions >= 3, "{sessions} sessions: {log}");
    let socket = w.scratch.join("ssh-master");
    assert!(!socket.exists(), "the master's socket is gone");
    assert_eq!(
        processes_naming(&socket.display().to_string()),
        Vec::<String>::new(),
        "no master connection outlives the run"
    );
}

/// The option letters of the remote `rsync --server` runs of the log (rsync passes `z` there
/// when it compresses).
fn remote_rsync_options(log: &[String]) -> Vec<String> {
    log.iter()
        .filter_map(|l| l.strip_prefix("remote rsync --server --sender "))
        .filter_map(|rest| rest.split(' ').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_copy_is_compressed_only_with_compress() {
    // Through the real rsync: what it asks of the source's rsync says whether it compresses.
    for compress in [false, true] {
        let w = World::with_real_rsync(true);
        let out = w.run_script(&DataSyncScript {
            compress,
            ..script(false, "root", w.paths())
        });
        assert_success(&out);
        let options = remote_rsync_options(&w.log());
        assert!(options.len() > 3, "{options:?}");
        for o in &options {
            // The short options end at the first '.', after which rsync lists its capabilities.
            let short = o.split('.').next().unwrap_or_default();
            assert_eq!(short.contains('z'), compress, "compress={compress}: {o}");
        }
    }
}

#[test]
fn a_final_run_records_when_it_stopped_the_source_and_a_prepare_run_does_not() {
    for prepare in [false, true] {
        let w = World::new(true);
        let out = w.run(prepare, "root");
        assert_success(&out);
        let patches = w.patches();
        let data = decoded_data(patches.last().expect("the data patch"));
        let started = data.get(data_keys::OUTAGE_STARTED_AT);
        let stopped = data.get(data_keys::SERVICES_STOPPED_AT);
        if prepare {
            assert_eq!((started, stopped), (None, None), "{data:?}");
            continue;
        }
        let number =
            |v: Option<&String>| -> i64 { v.expect("recorded").parse().expect("Unix seconds") };
        let (started, stopped) = (number(started), number(stopped));
        assert!(
            started > 1_700_000_000 && started <= stopped,
            "{started} {stopped}"
        );
    }
}

#[test]
fn each_pass_asks_for_every_volume_path_in_one_remote_command() {
    for (prepare, passes) in [(true, 1), (false, 2)] {
        let w = World::with_real_rsync(true);
        let out = w.run(prepare, "root");
        assert_success(&out);
        let log = w.log();
        let probes: Vec<&String> = log
            .iter()
            .filter(|l| l.starts_with("remote stat -L -c %n:%F -- "))
            .collect();
        assert_eq!(probes.len(), passes, "prepare={prepare}: {probes:?}");
        for v in production_volumes() {
            assert!(probes[0].contains(&format!(" {} ", v.path)) || probes[0].ends_with(&v.path));
            // (The database directory is also checked once at the start, as required.)
            assert!(
                v.database
                    || !log
                        .iter()
                        .any(|l| *l == format!("remote test -d {}", v.path)),
                "{} probed on its own",
                v.path
            );
        }
        // The probe of the copy after the stop comes after the stop.
        if !prepare {
            let stop = position(&log, |l| l == "remote spacewalk-service stop").expect("stop");
            let first = position(&log, |l| *l == *probes[0]).expect("first probe");
            let second = log
                .iter()
                .rposition(|l| *l == *probes[1])
                .expect("second probe");
            assert!(first < stop && stop < second);
        }
    }
}

#[test]
fn a_volume_path_that_is_a_file_on_the_source_fails_before_anything_is_stopped() {
    let w = World::new(true);
    fs::remove_dir_all(rel(&w.src, "/var/lib/cobbler")).expect("rm dir");
    write(&rel(&w.src, "/var/lib/cobbler"), "a file\n");
    let out = w.run(false, "root");
    assert_fails(
        &out,
        "/var/lib/cobbler on uyuni.example.com is not a directory",
    );
    assert!(!w.log().iter().any(|l| l == "remote spacewalk-service stop"));
}

/// Volumes are copied a few at a time, never more than `COPY_PARALLEL` at once, each copy's
/// lines marked with its volume.
#[test]
fn volumes_are_copied_side_by_side_up_to_the_bound() {
    let w = World::new(true);
    write(&w.state.join("rsync_concurrency"), "");
    let out = w.run(false, "root");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = fs::read_to_string(w.state.join("concurrency.log")).expect("copies ran");
    let (mut running, mut most) = (0usize, 0usize);
    for line in log.lines() {
        match line {
            "start" => running += 1,
            "end" => running -= 1,
            other => panic!("unexpected line {other:?}"),
        }
        most = most.max(running);
    }
    let bound = usize::try_from(uyuni_core::scripts::data_sync::COPY_PARALLEL).expect("small");
    assert!(most >= 2, "no two copies overlapped:\n{log}");
    assert!(
        most <= bound,
        "{most} copies at once, more than {bound}:\n{log}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    for volume in ["var-spacewalk", "var-pgsql"] {
        assert!(
            stdout.contains(&format!("[{volume}] Synchronizing")),
            "the copy's lines name their volume:\n{stdout}"
        );
    }
}

/// The init container's seed script: an empty volume (or one holding only `lost+found`) gets
/// the image's files, a volume with data is left alone, a path the image lacks is skipped.
#[test]
fn the_seed_script_fills_only_empty_volumes_from_the_image() {
    let root = tempfile::tempdir().expect("tempdir");
    let r = root.path();
    let mk = |p: &str| fs::create_dir_all(r.join(p.trim_start_matches('/'))).expect("mkdir");
    let put = |p: &str, text: &str| write(&r.join(p.trim_start_matches('/')), text);
    put("/etc/apache2/httpd.conf", "from the image\n");
    put("/srv/www/index.html", "image page\n");
    mk("/mnt/etc-apache2/lost+found");
    put("/mnt/srv-www/index.html", "migrated page\n");
    mk("/mnt/var-cobbler");
    let volumes = "etc-apache2\t/etc/apache2\nsrv-www\t/srv/www/\nvar-cobbler\t/var/lib/cobbler\n";
    let out = Command::new("bash")
        .arg("-c")
        .arg(uyuni_core::builders::data_sync::SEED_SCRIPT)
        .env("SEED_VOLUMES", volumes)
        .env("LOCAL_ROOT", r)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |p: &str| fs::read_to_string(r.join(p)).expect("file");
    assert_eq!(read("mnt/etc-apache2/httpd.conf"), "from the image\n");
    assert_eq!(read("mnt/srv-www/index.html"), "migrated page\n");
    assert_eq!(
        fs::read_dir(r.join("mnt/var-cobbler"))
            .expect("dir")
            .count(),
        0
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Seeding volume etc-apache2"), "{stdout}");
    assert!(!stdout.contains("srv-www"), "{stdout}");
}

/// The status lines (`core::sync_progress`): every pass names its volumes, and each volume
/// of it ends done (with what rsync transferred) or skipped; a prepare run measures what the
/// final copy would move and records its estimate in the Secret. Through the real rsync, whose
/// --info=progress2 and --stats output the script turns into these lines.
#[test]
fn a_prepare_run_reports_each_volume_and_records_what_the_final_copy_would_move() {
    use uyuni_core::sync_progress::{self, SyncLine, SyncProgress, VolumeState};
    let w = World::with_real_rsync(true);
    // Big enough for rsync to print progress figures.
    write(
        &rel(&w.src, "/var/spacewalk/packages/big.rpm"),
        &"x".repeat(3 << 20),
    );
    let out = w.run(true, "root");
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let volumes: Vec<String> = production_volumes().into_iter().map(|v| v.name).collect();
    let mut passes = Vec::new();
    let mut progress = SyncProgress::default();
    let mut copied = 0u64;
    for line in stdout.lines() {
        // The copies' figures are lines of their own, never rewritten with carriage returns.
        if line.contains("uyuni-sync:") {
            assert!(!line.contains('\r'), "{line:?}");
        }
        if let Some(SyncLine::Pass { volumes: names, .. }) = sync_progress::parse(line) {
            assert_eq!(names, volumes, "{line}");
            if let Some(previous) = progress.pass.clone() {
                passes.push((previous, progress.counts()));
            }
            copied = 0;
        }
        if let Some(SyncLine::Volume {
            state: VolumeState::Done { bytes, .. },
            ..
        }) = sync_progress::parse(line)
        {
            copied += bytes;
        }
        if line.contains("uyuni-sync:") {
            assert!(progress.update(line), "not a status line: {line}");
        }
    }
    passes.push((progress.pass.clone().expect("a pass"), progress.counts()));
    let names: Vec<&str> = passes.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, ["serving", "measure"]);
    for (pass, counts) in &passes {
        assert_eq!(
            counts.done + counts.skipped,
            volumes.len(),
            "{pass}: {counts:?}"
        );
        assert_eq!(counts.waiting + counts.copying + counts.failed, 0, "{pass}");
    }
    assert!(
        stdout.contains("uyuni-sync: volume=var-spacewalk state=copying bytes="),
        "rsync's figures of a large volume:\n{stdout}"
    );
    // Nothing changed on the source since the copy: nothing is left for the final copy.
    assert_eq!(copied, 0, "the measure pass moves nothing:\n{stdout}");
    let estimate = progress.estimate.expect("the estimate line");
    assert_eq!(estimate.delta_bytes, 0);
    assert!(estimate.copied_bytes >= 3 << 20, "{estimate:?}");
    let data = decoded_data(w.patches().last().expect("the data patch"));
    for (key, value) in [
        (data_keys::DELTA_BYTES, estimate.delta_bytes),
        (data_keys::SCAN_MS, estimate.scan_ms),
        (data_keys::COPIED_BYTES, estimate.copied_bytes),
        (data_keys::COPY_MS, estimate.copy_ms),
        (data_keys::REST_MS, estimate.rest_ms),
    ] {
        assert_eq!(data.get(key), Some(&value.to_string()), "{key}: {data:?}");
    }
    // The measure copies nothing: the summary lists the copy's modes once.
    assert_eq!(
        stdout.matches("  var-pgsql: quick (size+mtime)\n").count(),
        1,
        "{stdout}"
    );
}

/// A final run measures nothing and records no estimate; a failed copy says which volume
/// failed, with rsync's code.
#[test]
fn a_final_run_records_no_estimate_and_a_failed_copy_names_its_volume() {
    let w = World::new(true);
    let out = w.run(false, "root");
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("uyuni-sync: estimate"), "{stdout}");
    assert!(!stdout.contains("pass=measure"), "{stdout}");
    assert!(stdout.contains("uyuni-sync: pass=serving "), "{stdout}");
    assert!(stdout.contains("uyuni-sync: pass=stopped "), "{stdout}");
    let data = decoded_data(w.patches().last().expect("the data patch"));
    assert!(!data.contains_key(data_keys::DELTA_BYTES), "{data:?}");

    let w = World::new(true);
    write(&w.state.join("rsync_fail"), "");
    let out = w.run(true, "root");
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let failed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("state=failed"))
        .collect();
    assert!(!failed.is_empty(), "{stdout}");
    for line in &failed {
        assert!(line.ends_with("code=12"), "{line}");
    }
    // Each failed volume is reported once.
    let mut names: Vec<&str> = failed
        .iter()
        .filter_map(|l| l.split("volume=").nth(1)?.split(' ').next())
        .collect();
    let all = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all, "{failed:?}");
}

/// The configuration-sized volumes are copied by one rsync per pass, the bulk ones by one each
/// (issue 15's profile: an rsync costs tens of milliseconds whatever it moves), and the shared
/// copy keeps what a copy of each would do: stale files go, the directories above the volumes
/// keep their own modes, a volume whose path is a symlink to a directory arrives with the
/// directory's files, and each volume reports its own bytes. Through the real rsync: the ssh
/// stub logs each remote `rsync --server` it starts. (The filter's absolute rules cannot match
/// here, where the source is under a temporary directory: the rsync stub's tests cover them.)
#[test]
fn configuration_sized_volumes_share_one_rsync_per_pass() {
    use uyuni_core::sync_progress::{self, SyncLine, VolumeState};
    let w = World::with_real_rsync(true);
    // srv-tftpboot moved to another disk, its path a symlink.
    let tftp = rel(&w.src, "/srv/tftpboot");
    if tftp.exists() {
        fs::remove_dir_all(&tftp).expect("rm");
    }
    w.src("/srv/tftp-disk/pxelinux.0", "boot\n");
    std::os::unix::fs::symlink("tftp-disk", &tftp).expect("symlink");
    let present = |bulk: bool| -> Vec<SyncVolume> {
        production_volumes()
            .into_iter()
            .filter(|v| v.bulk == bulk && rel(&w.src, &v.path).is_dir())
            .collect()
    };
    let (bulk, small) = (present(true), present(false));
    assert!(bulk.len() >= 2 && small.len() >= 3, "{bulk:?} {small:?}");
    // A stale local file inside a batch volume, and the mode of /etc.
    write(&w.local("/etc/rhn/stale.conf"), "left by an earlier copy\n");
    w.src("/etc/rhn/sized.conf", &"s".repeat(1000));
    fs::set_permissions(w.local("/etc"), fs::Permissions::from_mode(0o751)).expect("chmod");

    let out = w.run(true, "root");
    assert_success(&out);
    let log = w.log();
    let copies: Vec<&String> = log
        .iter()
        .filter(|l| l.starts_with("remote rsync --server --sender "))
        .collect();
    // The copy pass and the measure pass: a batch and the bulk volumes, each.
    let names = |l: &str, v: &SyncVolume| l.split(' ').any(|word| word == format!("{}/.", v.path));
    let batches = copies
        .iter()
        .filter(|l| small.iter().all(|v| names(l, v)))
        .count();
    assert_eq!(
        batches, 2,
        "one rsync for all the small volumes: {copies:#?}"
    );
    for v in &bulk {
        let own = copies
            .iter()
            .filter(|l| l.ends_with(&format!(" {}/", v.path)))
            .count();
        assert_eq!(own, 2, "{}: {copies:#?}", v.path);
    }
    for v in &small {
        let shared = copies.iter().filter(|l| names(l, v)).count();
        assert_eq!(
            shared, 2,
            "{} is in each batch and in no other copy",
            v.path
        );
    }
    // Steps 10 to 15 copy a few directories of their own after the passes.
    let volume_copies = 2 * (1 + bulk.len());
    assert!(copies.len() <= volume_copies + 6, "{copies:#?}");

    assert!(!w.local("/etc/rhn/stale.conf").exists());
    assert_eq!(w.read_local("/etc/rhn/sized.conf").len(), 1000);
    assert_eq!(w.read_local("/srv/tftpboot/pxelinux.0"), "boot\n");
    let mode = fs::metadata(w.local("/etc"))
        .expect("/etc")
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o751,
        "the directory above the volumes is left alone"
    );

    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut done = BTreeMap::new();
    for line in stdout.lines() {
        // The copy pass's figures, before the measure pass starts.
        if line.contains("pass=measure") {
            break;
        }
        if let Some(SyncLine::Volume {
            volume,
            state: VolumeState::Done { bytes, .. },
        }) = sync_progress::parse(line)
        {
            done.insert(volume, bytes);
        }
    }
    let etc_rhn = done.get("etc-rhn").copied().expect("etc-rhn done");
    assert!(etc_rhn >= 1000, "etc-rhn's own bytes: {done:?}");
    let etc_tomcat = done.get("etc-tomcat").copied().expect("etc-tomcat done");
    assert!(etc_tomcat < 1000, "etc-tomcat's own bytes: {done:?}");
    for v in small.iter().chain(&bulk) {
        assert!(
            done.contains_key(&v.name),
            "{} reported done: {done:?}",
            v.name
        );
    }
}

/// Each pass starts the database's copy first: the largest copy, and once the source is
/// stopped the longest (by content), so the other copies run beside it, not before it. One
/// copy at a time here (`COPY_PARALLEL=1`), so that the log's order is the start order.
#[test]
fn each_pass_starts_with_the_database() {
    let w = World::with_real_rsync(true);
    let out = w.run_script_with(&script(false, "root", w.paths()), &[("COPY_PARALLEL", "1")]);
    assert_success(&out);
    let log = w.log();
    let passes: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("remote stat -L -c %n:%F -- "))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(passes.len(), 2, "catch-up and stopped: {log:#?}");
    for start in passes {
        let first = log[start..]
            .iter()
            .find(|l| l.starts_with("remote rsync --server --sender "))
            .expect("a copy");
        assert!(first.ends_with(" /var/lib/pgsql/data/"), "{first}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let after_stop = stdout
        .split("uyuni-sync: pass=stopped")
        .nth(1)
        .expect("the stopped pass");
    let first = after_stop
        .lines()
        .find(|l| l.contains("state=copying"))
        .expect("a copy");
    assert_eq!(first, "uyuni-sync: volume=var-pgsql state=copying");
}
