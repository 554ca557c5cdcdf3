//! The strict simulation, through the real `kubectl`: one invalid object per rule the real API
//! server enforces on the kinds we write. Each is refused with kubectl's exit code 1 and
//! Kubernetes' own message, and nothing is stored; valid objects of every kind pass.
//!
//! The messages are upstream's (pkg/apis/core/validation/validation.go,
//! pkg/apis/apps/validation/validation.go, pkg/apis/batch/validation/validation.go,
//! staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go in kubernetes/kubernetes).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use uyuni_testdata::{SimCluster, SimConfig, Timing};

use super::{Kubectl, kubectl_on_path};

/// kubectl 1.37 when `UYUNI_KUBECTL_137` names it, else the `kubectl` on PATH.
fn kubectl_bin() -> Option<PathBuf> {
    match std::env::var_os("UYUNI_KUBECTL_137").filter(|v| !v.is_empty()) {
        Some(bin) => Some(PathBuf::from(bin)),
        None => kubectl_on_path(),
    }
}

struct Strict {
    sim: SimCluster,
    k: Kubectl,
    dir: tempfile::TempDir,
    files: std::cell::Cell<u32>,
}

impl Strict {
    /// A simulated cluster reporting `minor`, with namespace `uyuni`; `None` when kubectl
    /// tests are skipped.
    fn start(minor: u32) -> Option<Strict> {
        let bin = kubectl_bin()?;
        let sim = SimCluster::start_blocking(SimConfig {
            server_minor: minor,
            scenario: uyuni_testdata::Scenario {
                timing: Timing {
                    pvc_bind_ms: 5,
                    ..Timing::default()
                },
                ..uyuni_testdata::Scenario::default()
            },
            ..SimConfig::default()
        })
        .expect("sim starts");
        sim.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "uyuni"}}))
            .expect("namespace");
        let k = Kubectl::new(bin, &sim);
        Some(Strict {
            sim,
            k,
            dir: tempfile::tempdir().expect("tempdir"),
            files: std::cell::Cell::new(0),
        })
    }

    fn write(&self, yaml: &str) -> String {
        let n = self.files.get();
        self.files.set(n + 1);
        let path = self.dir.path().join(format!("m{n}.yaml"));
        std::fs::write(&path, yaml).expect("write manifest");
        path.to_str().expect("utf-8 path").to_string()
    }

    fn apply_args(&self, extra: &[&str], yaml: &str) -> (i32, String, String) {
        let file = self.write(yaml);
        let mut args = vec!["apply"];
        args.extend_from_slice(extra);
        args.extend(["-f", file.as_str()]);
        self.k.code(&args)
    }

    fn apply_ok(&self, yaml: &str) -> String {
        let (code, out, err) = self.apply_args(&[], yaml);
        assert_eq!(code, 0, "kubectl apply failed:\n{out}\n{err}\n---\n{yaml}");
        out
    }

    /// kubectl apply fails with exit code 1 and says each of `expected`.
    fn refuses(&self, extra: &[&str], yaml: &str, expected: &[&str]) {
        let (code, out, err) = self.apply_args(extra, yaml);
        assert_eq!(code, 1, "expected a refusal:\n{out}\n{err}\n---\n{yaml}");
        for e in expected {
            assert!(err.contains(e), "kubectl did not say {e:?}:\n{err}");
        }
    }
}

/// Applies `yaml` (one object, `api_version`/`kind`/`name`) on a fresh cluster: refused with
/// every message in `expected`, and not stored.
fn rejected(yaml: &str, api_version: &str, kind: &str, name: &str, expected: &[&str]) {
    rejected_at(33, yaml, api_version, kind, name, expected);
}

fn rejected_at(
    minor: u32,
    yaml: &str,
    api_version: &str,
    kind: &str,
    name: &str,
    expected: &[&str],
) {
    let Some(t) = Strict::start(minor) else {
        return;
    };
    t.refuses(&[], yaml, expected);
    let ns = (kind != "Namespace").then_some("uyuni");
    assert!(
        t.sim.get(api_version, kind, ns, name).is_none(),
        "{kind} {name} was stored"
    );
}

/// A Deployment `uyuni` whose first container has `container` spliced in (indented YAML
/// lines) and whose pod spec has `pod` spliced in.
fn deployment(container: &str, pod: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: uyuni
  namespace: uyuni
spec:
  selector:
    matchLabels: {{app: uyuni}}
  template:
    metadata:
      labels: {{app: uyuni}}
    spec:
{pod}      containers:
      - name: uyuni
        image: registry.opensuse.org/uyuni/server:latest
{container}"
    )
}

fn job(restart_policy: &str, command: &str) -> String {
    format!(
        "apiVersion: batch/v1
kind: Job
metadata:
  name: data-sync
  namespace: uyuni
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: {restart_policy}
      containers:
      - name: sync
        image: registry.opensuse.org/uyuni/server:latest
        command: [bash, -c, '{command}']
"
    )
}

fn service(ports: &str) -> String {
    format!(
        "apiVersion: v1
kind: Service
metadata:
  name: uyuni-tcp
  namespace: uyuni
spec:
  selector: {{app: uyuni}}
  ports:
{ports}"
    )
}

fn pvc(spec: &str) -> String {
    format!(
        "apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: var-pgsql
  namespace: uyuni
spec:
{spec}"
    )
}

fn config_map(name: &str, metadata: &str) -> String {
    format!(
        "apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  namespace: uyuni
{metadata}data:
  fqdn: uyuni.example.com
"
    )
}

// ---------------------------------------------------------------------------------------------
// Names, labels, annotations

#[test]
fn object_names_are_dns_subdomains() {
    rejected(
        &config_map("Uyuni_Config", ""),
        "v1",
        "ConfigMap",
        "Uyuni_Config",
        &[
            "ConfigMap \"Uyuni_Config\" is invalid: metadata.name: Invalid value: \
             \"Uyuni_Config\": a lowercase RFC 1123 subdomain must consist of lower case \
             alphanumeric characters, '-' or '.', and must start and end with an alphanumeric \
             character (e.g. 'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ],
    );
}

#[test]
fn service_names_are_dns1035_labels() {
    // A DNS-1123 subdomain, and even label, but Service names must start with a letter.
    rejected(
        &service("  - {name: https, port: 443}\n").replace("uyuni-tcp", "443-web"),
        "v1",
        "Service",
        "443-web",
        &[
            "Service \"443-web\" is invalid: metadata.name: Invalid value: \"443-web\": a \
             DNS-1035 label must consist of lower case alphanumeric characters or '-', start \
             with an alphabetic character, and end with an alphanumeric character (e.g. \
             'my-name',  or 'abc-123', regex used for validation is \
             '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ],
    );
}

#[test]
fn namespace_names_are_dns1123_labels() {
    rejected(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: uyuni.example\n",
        "v1",
        "Namespace",
        "uyuni.example",
        &[
            "Namespace \"uyuni.example\" is invalid: metadata.name: Invalid value: \
             \"uyuni.example\": must not contain dots",
        ],
    );
}

#[test]
fn label_keys_are_qualified_names() {
    rejected(
        &config_map(
            "uyuni-config",
            "  labels:\n    app.kubernetes.io/part of: uyuni\n",
        ),
        "v1",
        "ConfigMap",
        "uyuni-config",
        &[
            "ConfigMap \"uyuni-config\" is invalid: metadata.labels: Invalid value: \
             \"app.kubernetes.io/part of\": name part must consist of alphanumeric characters, \
             '-', '_' or '.', and must start and end with an alphanumeric character (e.g. \
             'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
             '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ],
    );
}

#[test]
fn label_values_are_at_most_63_characters() {
    let long = "a".repeat(64);
    rejected(
        &config_map(
            "uyuni-config",
            &format!("  labels:\n    app.kubernetes.io/component: {long}\n"),
        ),
        "v1",
        "ConfigMap",
        "uyuni-config",
        &[&format!(
            "metadata.labels: Invalid value: \"{long}\": must be no more than 63 characters"
        )],
    );
}

#[test]
fn annotation_keys_are_qualified_names() {
    rejected(
        &config_map(
            "uyuni-config",
            "  annotations:\n    kubectl-uyuni.io/step/attempt: \"1\"\n",
        ),
        "v1",
        "ConfigMap",
        "uyuni-config",
        &[
            "metadata.annotations: Invalid value: \"kubectl-uyuni.io/step/attempt\": a \
             qualified name must consist of alphanumeric characters, '-', '_' or '.', and must \
             start and end with an alphanumeric character",
            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Containers and their ports

#[test]
fn container_names_are_dns1123_labels() {
    let yaml = deployment("", "").replace("- name: uyuni\n", "- name: Uyuni_Server\n");
    rejected(
        &yaml,
        "apps/v1",
        "Deployment",
        "uyuni",
        &[
            "The Deployment \"uyuni\" is invalid: spec.template.spec.containers[0].name: \
             Invalid value: \"Uyuni_Server\": a lowercase RFC 1123 label must consist of",
        ],
    );
}

#[test]
fn container_names_are_unique_across_init_and_regular_containers() {
    let init = "      initContainers:
      - name: uyuni
        image: registry.opensuse.org/uyuni/server:latest
";
    rejected(
        &deployment("", init),
        "apps/v1",
        "Deployment",
        "uyuni",
        &[
            "The Deployment \"uyuni\" is invalid: spec.template.spec.initContainers[0].name: \
             Duplicate value: \"uyuni\"",
        ],
    );
}

#[test]
fn container_port_names_are_unique_within_a_container() {
    // What today's port catalogue writes for the Java exporters (issue 10, defect 1).
    let ports = "        ports:
        - {containerPort: 443, name: https}
        - {containerPort: 80, name: http}
        - {containerPort: 5556, name: jmx}
        - {containerPort: 5557, name: jmx}
";
    rejected(
        &deployment(ports, ""),
        "apps/v1",
        "Deployment",
        "uyuni",
        &["The Deployment \"uyuni\" is invalid: \
             spec.template.spec.containers[0].ports[3].name: Duplicate value: \"jmx\""],
    );
}

#[test]
fn container_port_names_are_iana_service_names() {
    let ports = "        ports:
        - {containerPort: 4505, name: salt-publish-port}
        - {containerPort: 8080, name: \"8080\"}
        - {containerPort: 8001, name: Debug--Tomcat}
";
    rejected(
        &deployment(ports, ""),
        "apps/v1",
        "Deployment",
        "uyuni",
        &[
            "spec.template.spec.containers[0].ports[0].name: Invalid value: \
             \"salt-publish-port\": must be no more than 15 characters",
            "spec.template.spec.containers[0].ports[1].name: Invalid value: \"8080\": must \
             contain at least one letter (a-z)",
            "spec.template.spec.containers[0].ports[2].name: Invalid value: \"Debug--Tomcat\": \
             must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            "spec.template.spec.containers[0].ports[2].name: Invalid value: \"Debug--Tomcat\": \
             must not contain consecutive hyphens",
        ],
    );
}

#[test]
fn container_ports_are_in_range() {
    let ports = "        ports:\n        - {containerPort: 70000}\n";
    rejected(
        &deployment(ports, ""),
        "apps/v1",
        "Deployment",
        "uyuni",
        &[
            "spec.template.spec.containers[0].ports[0].containerPort: Invalid value: 70000: \
             must be between 1 and 65535, inclusive",
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Volumes and mounts

#[test]
fn volume_names_are_unique() {
    let pod = "      volumes:
      - {name: data, emptyDir: {}}
      - {name: data, persistentVolumeClaim: {claimName: var-spacewalk}}
";
    rejected(
        &deployment("", pod),
        "apps/v1",
        "Deployment",
        "uyuni",
        &["spec.template.spec.volumes[1].name: Duplicate value: \"data\""],
    );
}

#[test]
fn volume_names_are_dns1123_labels() {
    let pod = "      volumes:\n      - {name: var_pgsql, emptyDir: {}}\n";
    rejected(
        &deployment("", pod),
        "apps/v1",
        "Deployment",
        "uyuni",
        &[
            "spec.template.spec.volumes[0].name: Invalid value: \"var_pgsql\": a lowercase \
             RFC 1123 label must consist of",
        ],
    );
}

#[test]
fn mount_paths_are_unique_per_container() {
    let pod = "      volumes:
      - {name: a, emptyDir: {}}
      - {name: b, emptyDir: {}}
";
    let mounts = "        volumeMounts:
        - {name: a, mountPath: /srv/www}
        - {name: b, mountPath: /srv/www}
";
    rejected(
        &deployment(mounts, pod),
        "apps/v1",
        "Deployment",
        "uyuni",
        &[
            "spec.template.spec.containers[0].volumeMounts[1].mountPath: Invalid value: \
             \"/srv/www\": must be unique",
        ],
    );
}

#[test]
fn every_mount_names_a_volume() {
    let mounts = "        volumeMounts:\n        - {name: uyuni-cert, mountPath: /etc/pki/tls}\n";
    rejected(
        &deployment(mounts, ""),
        "apps/v1",
        "Deployment",
        "uyuni",
        &["spec.template.spec.containers[0].volumeMounts[0].name: Not found: \"uyuni-cert\""],
    );
}

#[test]
fn sub_paths_are_relative() {
    let pod = "      volumes:\n      - {name: cert, secret: {secretName: uyuni-cert}}\n";
    let mounts = "        volumeMounts:
        - {name: cert, mountPath: /etc/pki/tls/certs/spacewalk.crt, subPath: /tls.crt}
        - {name: cert, mountPath: /etc/pki/tls/private/spacewalk.key, subPath: ../tls.key}
";
    // Upstream reports both at `volumeMounts.subPath`, without the item's index.
    rejected(
        &deployment(mounts, pod),
        "apps/v1",
        "Deployment",
        "uyuni",
        &[
            "spec.template.spec.containers[0].volumeMounts.subPath: Invalid value: \
             \"/tls.crt\": must be a relative path",
            "spec.template.spec.containers[0].volumeMounts.subPath: Invalid value: \
             \"../tls.key\": must not contain '..'",
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Environment and probes

#[test]
fn env_var_names_before_kubernetes_1_32_are_c_identifier_like() {
    let env = "        env:\n        - {name: 1ST_RUN, value: \"yes\"}\n";
    rejected_at(
        31,
        &deployment(env, ""),
        "apps/v1",
        "Deployment",
        "uyuni",
        &[
            "spec.template.spec.containers[0].env[0].name: Invalid value: \"1ST_RUN\": a valid \
             environment variable name must consist of alphabetic characters, digits, '_', \
             '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or \
             'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is \
             '[-._a-zA-Z][-._a-zA-Z0-9]*')",
        ],
    );
}

#[test]
fn env_var_names_from_kubernetes_1_32_are_printable_ascii_without_equals() {
    let env = "        env:\n        - {name: \"UYUNI=FQDN\", value: x}\n";
    rejected(
        &deployment(env, ""),
        "apps/v1",
        "Deployment",
        "uyuni",
        &[
            "spec.template.spec.containers[0].env[0].name: Invalid value: \"UYUNI=FQDN\": a \
             valid environment variable name must consist only of printable ASCII characters \
             other than '='",
        ],
    );
}

#[test]
fn probes_have_exactly_one_handler() {
    let probes = "        livenessProbe:
          exec: {command: [pg_isready]}
          tcpSocket: {port: 5432}
        readinessProbe:
          periodSeconds: 10
";
    rejected(
        &deployment(probes, ""),
        "apps/v1",
        "Deployment",
        "uyuni",
        &[
            "spec.template.spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not \
             specify more than 1 handler type",
            "spec.template.spec.containers[0].readinessProbe: Required value: must specify a \
             handler type",
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Deployments

#[test]
fn deployment_selector_is_required() {
    let yaml = deployment("", "").replace("  selector:\n    matchLabels: {app: uyuni}\n", "");
    rejected(
        &yaml,
        "apps/v1",
        "Deployment",
        "uyuni",
        &[
            "The Deployment \"uyuni\" is invalid: ",
            "spec.selector: Required value",
            // A missing selector selects nothing, so the template's labels do not match either.
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"uyuni\"}: \
             `selector` does not match template `labels`",
        ],
    );
}

#[test]
fn deployment_selector_matches_the_template_labels() {
    let yaml = deployment("", "").replace(
        "    matchLabels: {app: uyuni}",
        "    matchLabels: {app: uyuni, app.kubernetes.io/component: server}",
    );
    rejected(
        &yaml,
        "apps/v1",
        "Deployment",
        "uyuni",
        &[
            "The Deployment \"uyuni\" is invalid: spec.template.metadata.labels: Invalid \
             value: map[string]string{\"app\":\"uyuni\"}: `selector` does not match template \
             `labels`",
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Services

#[test]
fn service_port_names_are_unique() {
    rejected(
        &service("  - {name: salt, port: 4505}\n  - {name: salt, port: 4506}\n"),
        "v1",
        "Service",
        "uyuni-tcp",
        &["Service \"uyuni-tcp\" is invalid: spec.ports[1].name: Duplicate value: \"salt\""],
    );
}

#[test]
fn service_port_names_are_required_when_there_are_several() {
    rejected(
        &service("  - {name: salt-publish, port: 4505}\n  - {port: 4506}\n"),
        "v1",
        "Service",
        "uyuni-tcp",
        &["Service \"uyuni-tcp\" is invalid: spec.ports[1].name: Required value"],
    );
}

#[test]
fn service_port_protocols_are_tcp_udp_or_sctp() {
    rejected(
        &service("  - {name: https, port: 443, protocol: HTTPS}\n"),
        "v1",
        "Service",
        "uyuni-tcp",
        &[
            "Service \"uyuni-tcp\" is invalid: spec.ports[0].protocol: Unsupported value: \
             \"HTTPS\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
        ],
    );
}

#[test]
fn service_ports_are_in_range() {
    rejected(
        &service("  - {name: https, port: 70000, targetPort: 443}\n"),
        "v1",
        "Service",
        "uyuni-tcp",
        &[
            "Service \"uyuni-tcp\" is invalid: spec.ports[0].port: Invalid value: 70000: must \
             be between 1 and 65535, inclusive",
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Jobs

#[test]
fn job_restart_policy_is_never_or_on_failure() {
    rejected(
        &job("Always", "true"),
        "batch/v1",
        "Job",
        "data-sync",
        &[
            "The Job \"data-sync\" is invalid: spec.template.spec.restartPolicy: Unsupported \
             value: \"Always\": supported values: \"OnFailure\", \"Never\"",
        ],
    );
}

#[test]
fn job_template_is_immutable() {
    let Some(t) = Strict::start(33) else {
        return;
    };
    t.apply_ok(&job("Never", "rsync -a src/ dst/"));
    t.refuses(
        &[],
        &job("Never", "rsync -a --checksum src/ dst/"),
        &[
            "The Job \"data-sync\" is invalid: spec.template: Invalid value: \
             core.PodTemplateSpec{",
            "field is immutable",
        ],
    );
    let stored = t
        .sim
        .get("batch/v1", "Job", Some("uyuni"), "data-sync")
        .expect("job");
    assert_eq!(
        stored["spec"]["template"]["spec"]["containers"][0]["command"][2],
        "rsync -a src/ dst/"
    );
}

#[test]
fn job_selector_is_immutable() {
    let Some(t) = Strict::start(33) else {
        return;
    };
    t.apply_ok(&job("Never", "true"));
    let changed = job("Never", "true").replace(
        "  backoffLimit: 0\n",
        "  backoffLimit: 0\n  selector:\n    matchLabels: {job-name: data-sync}\n",
    );
    t.refuses(
        &[],
        &changed,
        &[
            // The patch merges into the generated selector, as with a real API server.
            "The Job \"data-sync\" is invalid: spec.selector: Invalid value: \
             v1.LabelSelector{MatchLabels:map[string]string{\"batch.kubernetes.io/controller-uid\":",
            "\"job-name\":\"data-sync\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: \
             field is immutable",
        ],
    );
    let stored = t
        .sim
        .get("batch/v1", "Job", Some("uyuni"), "data-sync")
        .expect("job");
    assert!(
        stored["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"].is_string()
    );
}

// ---------------------------------------------------------------------------------------------
// PersistentVolumeClaims

const STORAGE_10G: &str = "  resources:\n    requests: {storage: 10Gi}\n";

#[test]
fn pvc_access_modes_are_required() {
    rejected(
        &pvc(&format!("  accessModes: []\n{STORAGE_10G}")),
        "v1",
        "PersistentVolumeClaim",
        "var-pgsql",
        &[
            "PersistentVolumeClaim \"var-pgsql\" is invalid: spec.accessModes: Required value: \
             at least 1 access mode is required",
        ],
    );
}

#[test]
fn pvc_access_modes_are_known() {
    rejected(
        &pvc(&format!(
            "  accessModes: [ReadWriteSometimes]\n{STORAGE_10G}"
        )),
        "v1",
        "PersistentVolumeClaim",
        "var-pgsql",
        &[
            "spec.accessModes: Unsupported value: \"ReadWriteSometimes\": supported values: \
             \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
        ],
    );
}

#[test]
fn pvc_storage_request_is_required() {
    rejected(
        &pvc("  accessModes: [ReadWriteOnce]\n  resources:\n    requests: {}\n"),
        "v1",
        "PersistentVolumeClaim",
        "var-pgsql",
        &[
            "PersistentVolumeClaim \"var-pgsql\" is invalid: spec.resources[storage]: Required \
             value",
        ],
    );
}

#[test]
fn pvc_storage_request_is_positive() {
    rejected(
        &pvc("  accessModes: [ReadWriteOnce]\n  resources:\n    requests: {storage: 0Gi}\n"),
        "v1",
        "PersistentVolumeClaim",
        "var-pgsql",
        &["spec.resources[storage]: Invalid value: \"0\": must be greater than zero"],
    );
}

#[test]
fn pvc_storage_request_is_a_quantity() {
    rejected(
        &pvc("  accessModes: [ReadWriteOnce]\n  resources:\n    requests: {storage: 10GB}\n"),
        "v1",
        "PersistentVolumeClaim",
        "var-pgsql",
        &[
            "Error from server (BadRequest)",
            "quantities must match the regular expression \
             '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        ],
    );
}

#[test]
fn pvc_spec_is_immutable_but_a_bound_claim_may_grow() {
    let Some(t) = Strict::start(33) else {
        return;
    };
    t.apply_ok(&pvc(&format!(
        "  accessModes: [ReadWriteOnce]\n{STORAGE_10G}"
    )));
    t.k.ok(&[
        "wait",
        "-n",
        "uyuni",
        "--for=jsonpath={.status.phase}=Bound",
        "pvc/var-pgsql",
        "--timeout=20s",
    ]);
    t.refuses(
        &[],
        &pvc(&format!("  accessModes: [ReadWriteMany]\n{STORAGE_10G}")),
        &[
            "PersistentVolumeClaim \"var-pgsql\" is invalid: spec: Forbidden: spec is \
             immutable after creation except resources.requests and volumeAttributesClassName \
             for bound claims",
        ],
    );
    let stored = |t: &Strict| {
        t.sim
            .get("v1", "PersistentVolumeClaim", Some("uyuni"), "var-pgsql")
            .expect("pvc")
    };
    assert_eq!(stored(&t)["spec"]["accessModes"], json!(["ReadWriteOnce"]));
    // Growing a bound claim is what Kubernetes allows …
    t.apply_ok(&pvc(
        "  accessModes: [ReadWriteOnce]\n  resources:\n    requests: {storage: 20Gi}\n",
    ));
    assert_eq!(
        stored(&t)["spec"]["resources"]["requests"]["storage"],
        "20Gi"
    );
    // … and shrinking it back to (or below) what it was given is not.
    t.refuses(
        &[],
        &pvc(&format!("  accessModes: [ReadWriteOnce]\n{STORAGE_10G}")),
        &[
            "spec.resources.requests.storage: Forbidden: field can not be less than \
             status.capacity",
        ],
    );
    assert_eq!(
        stored(&t)["spec"]["resources"]["requests"]["storage"],
        "20Gi"
    );
}

#[test]
fn an_unbound_claim_cannot_change_its_request() {
    // Without a StorageClass the claim stays Pending: its request is part of the immutable spec.
    let Some(t) = Strict::start(33) else {
        return;
    };
    let spec = |size: &str| {
        pvc(&format!(
            "  accessModes: [ReadWriteOnce]\n  storageClassName: missing\n  resources:\n    \
             requests: {{storage: {size}}}\n"
        ))
    };
    t.apply_ok(&spec("10Gi"));
    t.refuses(
        &[],
        &spec("20Gi"),
        &["spec: Forbidden: spec is immutable after creation"],
    );
}

// ---------------------------------------------------------------------------------------------
// Dry-run and valid objects

#[test]
fn a_server_dry_run_is_validated_too() {
    let Some(t) = Strict::start(33) else {
        return;
    };
    let ports = "        ports:
        - {containerPort: 5556, name: jmx}
        - {containerPort: 5557, name: jmx}
";
    t.sim.clear_request_log();
    t.refuses(
        &["--dry-run=server"],
        &deployment(ports, ""),
        &["The Deployment \"uyuni\" is invalid: \
             spec.template.spec.containers[0].ports[1].name: Duplicate value: \"jmx\""],
    );
    assert!(
        t.sim
            .request_log()
            .iter()
            .any(|r| r.dry_run && r.status == 422),
        "{:?}",
        t.sim.request_log()
    );
    assert!(
        t.sim
            .get("apps/v1", "Deployment", Some("uyuni"), "uyuni")
            .is_none()
    );
}

/// One valid object of every kind the rules cover, using what they allow at the edges: a
/// subdomain name with dots, 15-character port names, init containers, subPaths, every probe
/// handler, matchExpressions, several named Service ports, a claim with every access mode.
const VALID: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: uyuni.config
  namespace: uyuni
  labels: {app.kubernetes.io/part-of: uyuni, empty: \"\"}
  annotations: {kubectl-uyuni.io/Step: data-sync}
data: {ca.crt: x, UYUNI_FQDN: uyuni.example.com}
---
apiVersion: v1
kind: Secret
metadata: {name: db-credentials, namespace: uyuni}
stringData: {username: spacewalk, password: x}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: uyuni, namespace: uyuni}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: var-pgsql, namespace: uyuni}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1.5Gi}}
---
apiVersion: v1
kind: Service
metadata: {name: uyuni-tcp, namespace: uyuni}
spec:
  selector: {app: uyuni}
  ports:
  - {name: salt-publish, port: 4505, targetPort: 4505}
  - {name: salt-request, port: 4506, targetPort: salt-request}
  - {name: tftp, port: 69, protocol: UDP}
  - {name: tftp-tcp, port: 69, protocol: TCP}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: uyuni, namespace: uyuni}
spec:
  selector:
    matchLabels: {app: uyuni}
    matchExpressions:
    - {key: app.kubernetes.io/component, operator: In, values: [server]}
  template:
    metadata:
      labels: {app: uyuni, app.kubernetes.io/component: server}
    spec:
      volumes:
      - {name: var-pgsql, persistentVolumeClaim: {claimName: var-pgsql}}
      - {name: uyuni-cert, secret: {secretName: uyuni-cert}}
      initContainers:
      - name: init-volumes
        image: registry.opensuse.org/uyuni/server:latest
        volumeMounts:
        - {name: var-pgsql, mountPath: /mnt/var/lib/pgsql}
      containers:
      - name: uyuni
        image: registry.opensuse.org/uyuni/server:latest
        env:
        - {name: container, value: oci}
        - {name: TZ, value: Etc/UTC}
        - name: DB_PASSWORD
          valueFrom: {secretKeyRef: {name: db-credentials, key: password}}
        ports:
        - {containerPort: 443, name: https}
        - {containerPort: 5556, name: jmx-tomcat}
        - {containerPort: 5557, name: jmx-taskomatic}
        - {containerPort: 8003, name: debug-search123}
        - {containerPort: 69, protocol: UDP}
        volumeMounts:
        - {name: var-pgsql, mountPath: /var/lib/pgsql}
        - {name: uyuni-cert, mountPath: /etc/pki/tls/certs/spacewalk.crt, subPath: tls.crt}
        - {name: uyuni-cert, mountPath: /etc/pki/tls/private/spacewalk.key, subPath: tls.key}
        startupProbe:
          httpGet: {path: /rhn/manager/api/api/getVersion, port: 80}
        livenessProbe:
          tcpSocket: {port: https}
        readinessProbe:
          exec: {command: [/usr/bin/healthcheck.sh]}
          successThreshold: 2
---
apiVersion: batch/v1
kind: Job
metadata:
  name: data-sync-1
  namespace: uyuni
  annotations: {kubectl-uyuni.io/step: data-sync}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: OnFailure
      containers:
      - name: sync
        image: registry.opensuse.org/uyuni/server:latest
        command: [bash, -c, 'true']
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: 'uyuni:ca-key', namespace: uyuni}
rules:
- {apiGroups: [''], resources: [secrets], verbs: [get]}
";

#[test]
fn valid_objects_of_every_kind_are_accepted() {
    let Some(t) = Strict::start(33) else {
        return;
    };
    let out = t.apply_ok(VALID);
    assert_eq!(out.matches(" created").count(), 8, "{out}");
    for (api_version, kind, name) in [
        ("v1", "ConfigMap", "uyuni.config"),
        ("v1", "Secret", "db-credentials"),
        ("v1", "ServiceAccount", "uyuni"),
        ("v1", "PersistentVolumeClaim", "var-pgsql"),
        ("v1", "Service", "uyuni-tcp"),
        ("apps/v1", "Deployment", "uyuni"),
        ("batch/v1", "Job", "data-sync-1"),
        ("rbac.authorization.k8s.io/v1", "Role", "uyuni:ca-key"),
    ] {
        assert!(
            t.sim.get(api_version, kind, Some("uyuni"), name).is_some(),
            "{kind} {name} not stored"
        );
    }
    // The controllers' Pods pass the same rules (a refused Pod would never appear).
    assert!(
        t.sim.wait_until_blocking(Duration::from_secs(10), |s| s
            .objects("v1", "Pod", Some("uyuni"))
            .len()
            >= 2),
        "no pods"
    );
    // Re-applying the same objects is an update that every update rule lets through.
    let out = t.apply_ok(VALID);
    assert!(!out.contains("created"), "{out}");
}
