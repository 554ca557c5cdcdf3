//! The data-sync script's test world: stubs on PATH, a fake source tree, the local root and the
//! pod's files, and a run of the script under bash with its parameters in the environment. Shared by the script's tests
//! (`tests/data_sync_script.rs`) and its benchmark (`benches/data_sync.rs`).
#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use uyuni_core::scripts::data_sync::{DataSyncScript, ScriptPaths, SyncVolume, text};
use uyuni_core::volumes::{CATALOGUE, VolumeRole};

pub const STUBS: &[(&str, &str)] = &[
    ("ssh", include_str!("stubs/ssh")),
    ("rsync", include_str!("stubs/rsync")),
    ("curl", include_str!("stubs/curl")),
    ("rpm", include_str!("stubs/rpm")),
    ("openssl", include_str!("stubs/openssl")),
    ("spacewalk-service", include_str!("stubs/spacewalk-service")),
    ("systemctl", include_str!("stubs/systemctl")),
    ("sudo", include_str!("stubs/sudo")),
    ("timedatectl", include_str!("stubs/timedatectl")),
    ("spacewalk-sql", include_str!("stubs/spacewalk-sql")),
];

/// The password of the fake source: inner spaces, `#`, quotes and `$` must survive (D30).
pub const DB_PASSWORD: &str = "p@ss word #1 'q' \"d\" $HOME";
pub const REPORT_DB_PASSWORD: &str = "r3p #x = y";
pub const CA_CERT: &str = "-----BEGIN CERTIFICATE-----\nDEPLOYED-CA\n-----END CERTIFICATE-----\n";
pub const OTHER_CA_CERT: &str =
    "-----BEGIN CERTIFICATE-----\nOLD-BUILD-CA\n-----END CERTIFICATE-----\n";
pub const CA_KEY: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nCA-KEY-SECRET-TEXT\n-----END ENCRYPTED PRIVATE KEY-----\n";
pub const SERVER_CERT: &str =
    "-----BEGIN CERTIFICATE-----\nSERVER-CERT\n-----END CERTIFICATE-----\n";
pub const SERVER_KEY: &str =
    "-----BEGIN PRIVATE KEY-----\nSERVER-KEY-SECRET-TEXT\n-----END PRIVATE KEY-----\n";
pub const JOB_NAME: &str = "uyuni-data-sync-20250101";

pub fn production_volumes() -> Vec<SyncVolume> {
    CATALOGUE
        .iter()
        .filter(|v| v.role != VolumeRole::Migration)
        .map(SyncVolume::of)
        .collect()
}

pub fn script(prepare: bool, user: &str, paths: ScriptPaths) -> DataSyncScript {
    DataSyncScript {
        source_fqdn: "uyuni.example.com".to_owned(),
        ssh_user: user.to_owned(),
        prepare,
        compress: false,
        volumes: production_volumes(),
        data_secret: "uyuni-migration-data".to_owned(),
        db_host: "db".to_owned(),
        report_db_host: "reportdb".to_owned(),
        paths,
    }
}

/// One test world: stubs on PATH, the fake source, the local root and the pod's files.
pub struct World {
    pub _dir: tempfile::TempDir,
    pub base: PathBuf,
    pub src: PathBuf,
    pub root: PathBuf,
    pub state: PathBuf,
    pub scratch: PathBuf,
    /// Where the mounted key, config and known_hosts are.
    pub ssh_dir: PathBuf,
}

pub fn write(path: &Path, content: &str) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(path, content).expect("write");
}

pub fn rel(base: &Path, path: &str) -> PathBuf {
    base.join(path.trim_start_matches('/'))
}

impl World {
    /// `matching_ca`: whether the source's ssl-build holds the deployed CA.
    pub fn new(matching_ca: bool) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().to_path_buf();
        let bin = base.join("bin");
        fs::create_dir_all(&bin).expect("bin");
        for (name, text) in STUBS {
            let path = bin.join(name);
            fs::write(&path, text).expect("stub");
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        let w = World {
            src: base.join("src"),
            root: base.join("root"),
            state: base.join("state"),
            scratch: base.join("scratch"),
            ssh_dir: base.join("ssh"),
            base,
            _dir: dir,
        };
        w.build_source(matching_ca);
        w.build_local();
        w
    }

    /// The same world without the rsync stub: the script's rsync is the real one, and the ssh
    /// stub runs its remote side locally on the fake source tree.
    pub fn with_real_rsync(matching_ca: bool) -> World {
        let w = World::new(matching_ca);
        fs::remove_file(w.base.join("bin/rsync")).expect("rm rsync stub");
        w
    }

    /// Moves the SSH material into directory `name` of the world.
    pub fn move_ssh_dir(&mut self, name: &str) {
        let to = self.base.join(name);
        fs::rename(&self.ssh_dir, &to).expect("rename ssh dir");
        self.ssh_dir = to;
    }

    pub fn src(&self, path: &str, content: &str) {
        write(&rel(&self.src, path), content);
    }

    pub fn build_source(&self, matching_ca: bool) {
        self.src("/etc/uyuni-release", "Uyuni release 2024.08\n");
        self.src(
            "/etc/rhn/rhn.conf",
            &format!(
                "# rhn.conf of the source\n\
                 db_backend = postgresql\n\
                 db_user = spacewalk\n\
                 db_password =  {DB_PASSWORD}  \t\n\
                 db_name = susemanager\n\
                 db_host = localhost\n\
                 db_port = 5432\n\
                 db_ssl_enabled = 1\n\
                 #db_password = commented out\n\
                 report_db_user = pythia_susemanager\n\
                 report_db_password={REPORT_DB_PASSWORD}\n\
                 report_db_host = localhost\n\
                 server.jabber_server = uyuni.example.com\n\
                 server.susemanager.fromdir = /srv/mirror\n"
            ),
        );
        self.src(
            "/etc/rhn/taskomatic.conf",
            "JAVA_OPTS=-agentlib:jdwp=transport=dt_socket,address=localhost:8001,server=y\n",
        );
        self.src(
            "/etc/tomcat/conf.d/options.conf",
            "JAVA_OPTS=\"--add-modules java.annotation,com.sun.xml.bind: -XX:-UseConcMarkSweepGC -Xmx1G\"\n",
        );
        self.src("/etc/tomcat/server.xml", "<Host appBase=\"webapps\"/>\n");
        self.src("/etc/tomcat/tomcat.conf", "SOURCE TOMCAT CONF\n");
        self.src(
            "/etc/apache2/vhosts.d/vhost-ssl.conf",
            "DocumentRoot \"/srv/www/htdocs\"\n",
        );
        self.src("/etc/apache2/httpd.conf", "SOURCE HTTPD CONF\n");
        self.src("/etc/sysconfig/noreplace.conf", "SOURCE NOREPLACE\n");
        self.src(
            "/etc/cobbler/settings.d/zz-uyuni.settings",
            "server: uyuni.example.com\nclient_use_localhost: true\n",
        );
        self.src(
            "/var/lib/cobbler/collections/distros/sles15.json",
            "{\"kernel\": \"/srv/install/sles15/boot/linux\", \"initrd\": \"/srv/install/sles15/boot/initrd\"}\n",
        );
        self.src(
            "/var/lib/cobbler/snippets/spacewalk/1/my_snippet",
            "snippet\n",
        );
        self.src("/srv/install/sles15/boot/linux", "kernel\n");
        self.src("/var/lib/pgsql/data/PG_VERSION", "14\n");
        self.src("/var/lib/pgsql/data/base/1/1259", "table\n");
        self.src("/var/spacewalk/packages/1/p.rpm", "rpm\n");
        self.src("/var/cache/zypp/raw/x", "zypp cache\n");
        self.src("/var/cache/rhn/keep", "cache\n");
        self.src("/root/.mgr-sync", "secret mgr-sync\n");
        self.src(
            "/root/ssl-build/RHN-ORG-TRUSTED-SSL-CERT",
            if matching_ca { CA_CERT } else { OTHER_CA_CERT },
        );
        self.src("/root/ssl-build/RHN-ORG-PRIVATE-SSL-KEY", CA_KEY);
        self.src(
            "/etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT",
            CA_CERT,
        );
        self.src("/etc/pki/trust/anchors/custom-ca.pem", "CUSTOM CA\n");
        self.src("/usr/share/pki/trust/anchors/other-ca.pem", "OTHER CA\n");
        self.src(
            "/usr/share/pki/trust/anchors/RHN-ORG-TRUSTED-SSL-CERT",
            CA_CERT,
        );
        self.src("/etc/pki/tls/certs/spacewalk.crt", SERVER_CERT);
        self.src("/etc/pki/tls/private/spacewalk.key", SERVER_KEY);
        self.src("/etc/krb5.conf.d/realm.conf", "[realms]\n");
        self.src(
            "/usr/lib/systemd/system/tomcat.service.d/jmx.conf",
            "[Service]\nEnvironment=JMX\n",
        );
        self.src("/srv/www/htdocs/pub/RHN-ORG-TRUSTED-SSL-CERT", CA_CERT);

        write(&self.state.join("timezone"), "Europe/Berlin\n");
        write(
            &self.state.join("distros.csv"),
            "1-sles15,/srv/install/sles15\n2-gone,/srv/install/gone\n",
        );
        write(
            &self.state.join("rpm.txt"),
            "0,/etc/apache2/httpd.conf\n16,/etc/sysconfig/noreplace.conf\n0,/usr/bin/x\n0,/etc/not-local.conf\n",
        );
        write(&self.state.join("is-active/hub-xmlrpc-api.service"), "");
        write(&self.state.join("is-enabled/tftp.socket"), "");
    }

    pub fn build_local(&self) {
        // The image's version of an RPM-owned config file, seeded by the init container.
        write(
            &rel(&self.root, "/etc/apache2/httpd.conf"),
            "IMAGE HTTPD CONF\n",
        );
        write(
            &rel(&self.root, "/etc/sysconfig/noreplace.conf"),
            "IMAGE NOREPLACE\n",
        );
        // Left over by an earlier run (D31).
        write(
            &rel(
                &self.root,
                "/var/lib/uyuni-tools/stale-RHN-ORG-PRIVATE-SSL-KEY",
            ),
            "old\n",
        );
        write(&self.base.join("ssh/id"), "KEY\n");
        write(&self.base.join("ssh/config"), "");
        write(
            &self.base.join("ssh/known_hosts"),
            "uyuni.example.com ssh-ed25519 AAAA\n",
        );
        write(&self.base.join("sa/token"), "TOKEN\n");
        write(&self.base.join("sa/ca.crt"), "CLUSTER CA\n");
        fs::create_dir_all(&self.scratch).expect("scratch");
    }

    pub fn paths(&self) -> ScriptPaths {
        let s = |p: PathBuf| p.to_string_lossy().into_owned();
        ScriptPaths {
            local_root: s(self.root.clone()),
            ssh_private_key: s(self.ssh_dir.join("id")),
            ssh_config: s(self.ssh_dir.join("config")),
            ssh_known_hosts: s(self.ssh_dir.join("known_hosts")),
            scratch_dir: s(self.scratch.clone()),
            service_account_dir: s(self.base.join("sa")),
        }
    }

    pub fn local(&self, path: &str) -> PathBuf {
        rel(&self.root, path)
    }

    pub fn read_local(&self, path: &str) -> String {
        fs::read_to_string(self.local(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    pub fn run(&self, prepare: bool, user: &str) -> Output {
        self.run_script(&script(prepare, user, self.paths()))
    }

    pub fn run_script(&self, script: &DataSyncScript) -> Output {
        self.run_script_with(script, &[])
    }

    /// The same, with variables of `extra` set over the script's own.
    pub fn run_script_with(&self, script: &DataSyncScript, extra: &[(&str, &str)]) -> Output {
        let path = format!(
            "{}:{}",
            self.base.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Command::new("bash")
            .arg("-c")
            .arg(text())
            .env_clear()
            .envs(script.env())
            .env("PATH", path)
            .env("HOME", &self.base)
            .env("LC_ALL", "C")
            .env("NAMESPACE", "uyuni")
            .env("JOB_NAME", JOB_NAME)
            .env("KUBERNETES_SERVICE_HOST", "10.43.0.1")
            .env("KUBERNETES_SERVICE_PORT", "443")
            .env("FAKE_SRC", &self.src)
            .env("FAKE_STATE", &self.state)
            .env("FAKE_LOG", self.state.join("log"))
            .envs(extra.iter().copied())
            .output()
            .expect("bash runs")
    }

    pub fn log(&self) -> Vec<String> {
        fs::read_to_string(self.state.join("log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub fn clear_log(&self) {
        let _ = fs::remove_file(self.state.join("log"));
        for entry in fs::read_dir(&self.state).expect("state").flatten() {
            if entry.file_name().to_string_lossy().starts_with("patch.") {
                fs::remove_file(entry.path()).expect("rm patch");
            }
        }
    }

    /// The bodies curl sent, in order.
    pub fn patches(&self) -> Vec<String> {
        (0..)
            .map(|n| self.state.join(format!("patch.{n}")))
            .take_while(|p| p.exists())
            .map(|p| fs::read_to_string(p).expect("patch"))
            .collect()
    }
}
