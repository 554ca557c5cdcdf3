//! The TLS phase of a migration (reference §5, images-today §A.7): after the database's data is
//! upgraded and before the `db` Deployment, which mounts Secret `db-cert`: the server's and the
//! database's certificates from the reused CA (through cert-manager) or from third-party
//! material, and the CA ConfigMaps. Whether cert-manager is needed and there is decided before
//! any write, in `resolve::preflight`.

use super::database::SHORT_JOB;
use super::job_step;
use super::{PlanError, apply_step, keep_step};
use crate::builders::tls;
use crate::catalogue::names;
use crate::object::{CustomKind, Kind, Object, ObjectRef};
use crate::observed::{ExtractedData, Observed, custom_ready};
use crate::params::{CaSubject, CertBundle, InstallParams, MigrateParams, ServerParams};
use crate::plan::{Action, DeploymentWait, Step};
use crate::resolve::{Facts, TlsMode};

/// cert-manager issues within seconds; the limit allows for a slow webhook. A custom resource
/// has no pod of its own, so no log to show.
const READY_WAIT: DeploymentWait = DeploymentWait {
    timeout_seconds: Some(300),
    unschedulable_grace_seconds: crate::plan::UNSCHEDULABLE_GRACE_SECONDS,
    log_tail_lines: 0,
};

fn wait_ready(observed: &Observed, id: &str, target: ObjectRef, what: &str) -> Step {
    let ready = matches!(observed.objects.get(&target), Some(Object::Custom(o)) if custom_ready(o));
    super::wait_step(
        id,
        format!("wait until {what} is ready"),
        target.clone(),
        ready,
        Action::WaitReady {
            target,
            wait: READY_WAIT,
        },
    )
}

fn third_party_steps(
    params: &ServerParams,
    observed: &Observed,
    server: &CertBundle,
    db: &CertBundle,
) -> Vec<Step> {
    let ns = &params.namespace;
    vec![
        apply_step(
            "server-cert",
            "TLS Secret uyuni-cert of the server (third-party certificate)".into(),
            Object::Secret(tls::tls_secret(ns, names::SERVER_CERT_SECRET, server)),
            observed,
        ),
        apply_step(
            "db-cert",
            "TLS Secret db-cert of the database (third-party certificate)".into(),
            Object::Secret(tls::tls_secret(ns, names::DB_CERT_SECRET, db)),
            observed,
        ),
        apply_step(
            "ca-config-map",
            "ConfigMap uyuni-ca: the CA the server and its clients trust".into(),
            Object::ConfigMap(tls::ca_config_map(ns, names::CA_CONFIG_MAP, &server.root)),
            observed,
        ),
        apply_step(
            "db-ca-config-map",
            "ConfigMap db-ca: the CA of the database certificate".into(),
            Object::ConfigMap(tls::ca_config_map(ns, names::DB_CA_CONFIG_MAP, &db.root)),
            observed,
        ),
    ]
}

/// The ServiceAccount, Role and RoleBinding letting the CA key Job write Secret `uyuni-ca`,
/// kept in step whether the key is still to be decrypted or already there.
fn ca_key_rbac_steps(ns: &str, observed: &Observed) -> [Step; 3] {
    [
        apply_step(
            "ca-key-service-account",
            "ServiceAccount the CA key Job runs as".into(),
            Object::ServiceAccount(tls::ca_key_service_account(ns)),
            observed,
        ),
        apply_step(
            "ca-key-role",
            "permission to patch Secret uyuni-ca only".into(),
            Object::Role(tls::ca_key_role(ns)),
            observed,
        ),
        apply_step(
            "ca-key-role-binding",
            "grants it to the CA key Job's ServiceAccount".into(),
            Object::RoleBinding(tls::ca_key_role_binding(ns)),
            observed,
        ),
    ]
}

fn reused_ca_steps(
    params: &MigrateParams,
    observed: &Observed,
    data: &ExtractedData,
    facts: &Facts,
) -> Result<Vec<Step>, PlanError> {
    let ns = &params.namespace;
    let ca = tls::ca_cert(data);
    let mut steps = Vec::new();
    let ca_target = ObjectRef::new(Kind::Secret, names::CA_SECRET);
    let ca_description = "TLS Secret uyuni-ca: the migrated CA, the issuer's key pair".to_owned();
    let live_ca = observed.secret(names::CA_SECRET);
    if live_ca.is_some_and(|s| tls::ca_secret_complete(s, &ca)) {
        // Done: the same steps, as no-ops, so that a plan shows how the key got there (the
        // password's Secret too once a finished migration deleted it). Decided on the key,
        // not on the Job's spec: a CA key Job of an older spec (one that ran as the data-sync
        // Job's ServiceAccount, before the CA key Job had its own) that put the key there is
        // done, and not run again.
        let password_kept = observed.secret(names::CA_PASSWORD_SECRET).is_some();
        steps.push(keep_step(
            "ca-password",
            "Secret with the CA password, for the CA key Job".into(),
            ObjectRef::new(Kind::Secret, names::CA_PASSWORD_SECRET),
            if password_kept {
                "exists".into()
            } else {
                "not needed: the key is in Secret uyuni-ca".into()
            },
        ));
        steps.push(keep_step(
            "ca-secret",
            ca_description,
            ca_target,
            "holds the key of the migrated CA".into(),
        ));
        steps.extend(ca_key_rbac_steps(ns, observed));
        let done =
            super::last_succeeded(observed, tls::CA_KEY_STEP).and_then(|j| j.metadata.name.clone());
        steps.push(match done {
            Some(name) => super::done_step(tls::CA_KEY_STEP, tls::ca_key_description(), &name),
            None => keep_step(
                tls::CA_KEY_STEP,
                tls::ca_key_description(),
                ObjectRef::new(Kind::Secret, names::CA_SECRET),
                "the key is in place".into(),
            ),
        });
    } else {
        // The key has to be decrypted: that takes the password.
        match &params.ca_password {
            Some(password) => steps.push(apply_step(
                "ca-password",
                "Secret with the CA password, for the CA key Job".into(),
                Object::Secret(tls::ca_password_secret(ns, password.expose())),
                observed,
            )),
            None if observed.secret(names::CA_PASSWORD_SECRET).is_some() && !data.placeholder => {
                steps.push(keep_step(
                    "ca-password",
                    "Secret with the CA password, for the CA key Job".into(),
                    ObjectRef::new(Kind::Secret, names::CA_PASSWORD_SECRET),
                    "exists; reused (no password given)".into(),
                ));
            }
            None if data.placeholder => {}
            None => return Err(PlanError::CaPasswordNeeded),
        }
        match live_ca {
            Some(s) if tls::ca_secret_matches(s, &ca) => steps.push(keep_step(
                "ca-secret",
                ca_description,
                ca_target,
                "exists; its key comes from the CA key Job".into(),
            )),
            _ => steps.push(apply_step(
                "ca-secret",
                ca_description,
                Object::Secret(tls::ca_secret(ns, &ca)),
                observed,
            )),
        }
        steps.extend(ca_key_rbac_steps(ns, observed));
        steps.push(job_step(observed, tls::ca_key_job(params, data), SHORT_JOB));
    }
    steps.extend(issuing_steps(ns, observed, facts, &ca, "the migrated CA"));
    Ok(steps)
}

fn kept_third_party_steps(observed: &Observed) -> Vec<Step> {
    let reason = "written from certificate files by an earlier run; kept (give the --ssl-* files again to replace it)";
    [
        (
            "server-cert",
            Kind::Secret,
            names::SERVER_CERT_SECRET,
            "TLS Secret uyuni-cert of the server (third-party certificate)",
        ),
        (
            "db-cert",
            Kind::Secret,
            names::DB_CERT_SECRET,
            "TLS Secret db-cert of the database (third-party certificate)",
        ),
        (
            "ca-config-map",
            Kind::ConfigMap,
            names::CA_CONFIG_MAP,
            "ConfigMap uyuni-ca: the CA the server and its clients trust",
        ),
        (
            "db-ca-config-map",
            Kind::ConfigMap,
            names::DB_CA_CONFIG_MAP,
            "ConfigMap db-ca: the CA of the database certificate",
        ),
    ]
    .into_iter()
    .filter(|(_, kind, name, _)| observed.contains(*kind, name))
    .map(|(id, kind, name, what)| {
        keep_step(
            id,
            what.to_owned(),
            ObjectRef::new(kind, name),
            reason.to_owned(),
        )
    })
    .collect()
}

/// Where the data sync found the source's third-party certificate, its key and its CA
/// (reference: the migration copies them from these paths).
const SOURCE_CERT: &str = "/etc/pki/tls/certs/spacewalk.crt";
const SOURCE_KEY: &str = "/etc/pki/tls/private/spacewalk.key";
const SOURCE_CA: &str = "/etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT";

fn names_list(names: &[String]) -> String {
    if names.is_empty() {
        "no DNS name".to_owned()
    } else {
        names.join(", ")
    }
}

/// Why a migrated server answers to `fqdn`, for a certificate that does not name it.
/// `fqdn_from_flag`: the FQDN is the source's as given (no data yet, or dry-run placeholders),
/// not yet its `java.hostname`.
pub(crate) fn migrated_name_reason(fqdn: &str, fqdn_from_flag: bool) -> String {
    if fqdn_from_flag {
        format!(
            "the server answers to {fqdn} (the source's FQDN as given; the migration takes the source's java.hostname when its copy has run: if that differs and the certificate names it, run with --prepare first, and the certificate is checked against it)"
        )
    } else {
        format!("the server answers to {fqdn} (the source's java.hostname)")
    }
}

/// The `--ssl-*` certificates name the hosts the server answers to: the server's, the FQDN and
/// every `--ssl-cname`; the database's, the FQDN, by which external report-database clients
/// reach it (images-today A.7: the internal names `db` and `reportdb` are no longer needed,
/// and the images use the server's certificate for both). Their pair and chain were checked
/// with the parameters. `why`: why the server answers to `fqdn`, in words.
pub(crate) fn check_file_names(
    params: &ServerParams,
    fqdn: &str,
    dns_names: &[String],
    after: &str,
    why: String,
) -> Result<(), PlanError> {
    let Some(tp) = &params.spec.tls.third_party else {
        return Ok(());
    };
    let fqdn = [fqdn.to_owned()];
    let mut checks = vec![(&tp.server, dns_names)];
    if tp.db.chain != tp.server.chain {
        checks.push((&tp.db, &fqdn[..]));
    }
    for (bundle, required) in checks {
        // Unreadable certificates were refused with the parameters.
        let Ok((missing, carried)) = crate::certs::missing_names(&bundle.chain, required) else {
            continue;
        };
        if missing.is_empty() {
            continue;
        }
        let why = why.clone();
        return Err(PlanError::CertificateNames(Box::new(
            crate::plan::error::CertificateNames {
                origin: bundle.origin.clone(),
                carried: names_list(&carried),
                missing: missing.join(", "),
                why: if required.len() > 1 {
                    format!("{why} and to the --ssl-cname names")
                } else {
                    why
                },
                required: required.join(", "),
                after: after.to_owned(),
            },
        )));
    }
    Ok(())
}

/// The source's own third-party certificate: key, chain to the source's CA, and names. The
/// key is in the data the sync extracted, so all three can be checked here, on the copy's data
/// before the final sync.
fn check_source_certificate(bundle: &CertBundle, dns_names: &[String]) -> Result<(), String> {
    use crate::certs;
    let pair = certs::check_pair(&bundle.chain, bundle.key.expose()).map_err(|e| match e {
        certs::Unreadable::Key => format!("comes with a key ({SOURCE_KEY}) that {e}"),
        other => other.to_string(),
    })?;
    pair.map_err(|m| format!("and its key ({SOURCE_KEY}) do not belong together ({m})"))?;
    certs::check_chain(&bundle.chain, &bundle.root)
        .map_err(|e| format!("or the source's CA ({SOURCE_CA}) {e}"))?
        .map_err(|u| format!("does not chain to the source's CA ({SOURCE_CA}): {u}"))?;
    let (missing, carried) =
        certs::missing_names(&bundle.chain, dns_names).map_err(|e| e.to_string())?;
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "names {}, not {} (the source's java.hostname, then any --ssl-cname)",
            names_list(&carried),
            missing.join(", ")
        ))
    }
}

pub(super) fn steps(
    params: &MigrateParams,
    observed: &Observed,
    data: &ExtractedData,
    facts: &Facts,
) -> Result<Vec<Step>, PlanError> {
    match facts.tls.clone()? {
        TlsMode::KeptFromEarlierRun => Ok(kept_third_party_steps(observed)),
        TlsMode::ThirdPartyFiles => {
            let Some(tp) = &params.spec.tls.third_party else {
                return Ok(Vec::new());
            };
            let after = if data.placeholder {
                "Nothing was written".to_owned()
            } else {
                format!("Nothing was changed after the data sync (Job {})", data.job)
            };
            check_file_names(
                params,
                &facts.fqdn,
                &facts.dns_names,
                &after,
                migrated_name_reason(&facts.fqdn, data.placeholder),
            )?;
            Ok(third_party_steps(params, observed, &tp.server, &tp.db))
        }
        TlsMode::ThirdPartyMigrated => {
            let bundle = CertBundle {
                chain: data.server_cert.clone().unwrap_or_default(),
                key: data.server_key.clone().unwrap_or_default(),
                root: tls::ca_cert(data),
                origin: SOURCE_CERT.to_owned(),
            };
            check_source_certificate(&bundle, &facts.dns_names).map_err(|problem| {
                PlanError::SourceCertificate {
                    job: data.job.clone(),
                    path: SOURCE_CERT,
                    problem,
                }
            })?;
            Ok(third_party_steps(params, observed, &bundle, &bundle))
        }
        TlsMode::ReusedCa => reused_ca_steps(params, observed, data, facts),
        // A migration's server keeps its source's CA or certificate (`resolve::tls_mode`).
        TlsMode::GeneratedCa => Ok(generated_ca_steps(params, observed, facts, None)),
    }
}

/// TLS of a fresh server: a CA cert-manager generates, or the `--ssl-*` files, or what an
/// earlier run wrote from them.
pub(super) fn install_steps(
    params: &InstallParams,
    observed: &Observed,
    facts: &Facts,
) -> Result<Vec<Step>, PlanError> {
    match facts.tls.clone()? {
        TlsMode::KeptFromEarlierRun => Ok(kept_third_party_steps(observed)),
        TlsMode::ThirdPartyFiles => {
            let Some(tp) = &params.spec.tls.third_party else {
                return Ok(Vec::new());
            };
            check_file_names(
                params,
                &facts.fqdn,
                &facts.dns_names,
                "Nothing was written",
                format!("the server answers to {} (the FQDN given)", facts.fqdn),
            )?;
            Ok(third_party_steps(params, observed, &tp.server, &tp.db))
        }
        TlsMode::GeneratedCa | TlsMode::ReusedCa | TlsMode::ThirdPartyMigrated => Ok(
            generated_ca_steps(params, observed, facts, Some(&params.ca_subject)),
        ),
    }
}

/// Shown in a dry run where the CA cert-manager generates goes: it exists once issued.
pub const GENERATED_CA_PLACEHOLDER: &str = "<the CA cert-manager generates>";

/// A CA cert-manager generates, as the Uyuni charts' `server-selfsigned` example does
/// (uyuni-project/uyuni-charts `server-selfsigned/templates/certificates.yaml` @fbbe7790): a
/// self-signed Issuer, the CA Certificate whose Secret `uyuni-ca` the CA Issuer signs with,
/// then the server's and the database's certificates. The CA ConfigMaps follow the CA's
/// Secret, so they come after its wait.
fn generated_ca_steps(
    params: &ServerParams,
    observed: &Observed,
    facts: &Facts,
    subject: Option<&CaSubject>,
) -> Vec<Step> {
    let ns = &params.namespace;
    let mut steps = vec![
        apply_step(
            "self-signed-issuer",
            format!(
                "cert-manager self-signed Issuer {} that signs the new CA",
                names::SELF_SIGNED_ISSUER
            ),
            Object::Custom(tls::self_signed_issuer(ns)),
            observed,
        ),
        apply_step(
            "ca-certificate",
            format!(
                "cert-manager Certificate {}: a new CA for {}, in Secret {}",
                names::CA_CERTIFICATE,
                facts.fqdn,
                names::CA_SECRET
            ),
            Object::Custom(tls::ca_certificate(ns, &facts.fqdn, subject)),
            observed,
        ),
        wait_ready(
            observed,
            "ca-certificate-ready",
            ObjectRef::new(Kind::Custom(CustomKind::Certificate), names::CA_CERTIFICATE),
            "the new CA",
        ),
    ];
    let ca = observed
        .secret(names::CA_SECRET)
        .and_then(tls::ca_of_secret)
        .unwrap_or_else(|| GENERATED_CA_PLACEHOLDER.to_owned());
    steps.extend(issuing_steps(ns, observed, facts, &ca, "the generated CA"));
    steps
}

/// The CA issuer, the server's and the database's certificates, the CA ConfigMaps and the
/// waits: the same whichever CA the issuer signs with.
fn issuing_steps(ns: &str, observed: &Observed, facts: &Facts, ca: &str, which: &str) -> Vec<Step> {
    let mut steps = vec![apply_step(
        "ca-issuer",
        format!("cert-manager CA Issuer uyuni-ca-issuer signing with {which}"),
        Object::Custom(tls::ca_issuer(ns)),
        observed,
    )];
    let server_names = &facts.dns_names;
    steps.push(apply_step(
        "server-certificate",
        format!("Certificate uyuni-cert for {}", server_names.join(", ")),
        Object::Custom(tls::certificate(
            ns,
            names::SERVER_CERT_SECRET,
            server_names,
        )),
        observed,
    ));
    let db_names = tls::db_dns_names(server_names);
    steps.push(apply_step(
        "db-certificate",
        format!("Certificate db-cert for {}", db_names.join(", ")),
        Object::Custom(tls::certificate(ns, names::DB_CERT_SECRET, &db_names)),
        observed,
    ));
    for (id, name, what) in [
        (
            "ca-config-map",
            names::CA_CONFIG_MAP,
            "the CA the server and its clients trust",
        ),
        (
            "db-ca-config-map",
            names::DB_CA_CONFIG_MAP,
            "the CA of the database certificate",
        ),
    ] {
        steps.push(apply_step(
            id,
            format!("ConfigMap {name}: {what}"),
            Object::ConfigMap(tls::ca_config_map(ns, name, ca)),
            observed,
        ));
    }
    steps.push(wait_ready(
        observed,
        "ca-issuer-ready",
        ObjectRef::new(Kind::Custom(CustomKind::Issuer), names::CA_ISSUER),
        "the CA issuer",
    ));
    for (id, name) in [
        ("server-certificate-ready", names::SERVER_CERT_SECRET),
        ("db-certificate-ready", names::DB_CERT_SECRET),
    ] {
        steps.push(wait_ready(
            observed,
            id,
            ObjectRef::new(Kind::Custom(CustomKind::Certificate), name),
            &format!("Certificate {name}"),
        ));
    }
    steps
}

/// Whether the CA key's password is needed, and whether it is there: the same conditions under
/// which [`steps`] refuses with [`PlanError::CaPasswordNeeded`], said before the run. `data`:
/// what a sync extracted (`None` or placeholders: not known yet).
pub(crate) fn ca_password_need(
    params: &MigrateParams,
    observed: &Observed,
    data: Option<&ExtractedData>,
) -> crate::plan::phase::Need {
    use crate::plan::phase::Need;
    let data = data.filter(|d| !d.placeholder);
    match crate::resolve::tls_mode(params, observed, data) {
        Ok(TlsMode::ThirdPartyFiles) => {
            return Need::NotNeeded("the certificates come from the --ssl-* files".into());
        }
        Ok(TlsMode::KeptFromEarlierRun) => {
            return Need::NotNeeded(
                "the certificates an earlier run wrote from files are kept".into(),
            );
        }
        _ => {}
    }
    let Some(data) = data else {
        return match &params.ca_password {
            Some(_) => Need::Given,
            None => Need::Unknown,
        };
    };
    if crate::resolve::tls_mode(params, observed, Some(data)) != Ok(TlsMode::ReusedCa) {
        return Need::NotNeeded("the source has no Uyuni CA key".into());
    }
    if observed
        .secret(names::CA_SECRET)
        .is_some_and(|s| tls::ca_secret_complete(s, &tls::ca_cert(data)))
    {
        return Need::NotNeeded(format!("the key is in Secret {} already", names::CA_SECRET));
    }
    if params.ca_password.is_some() {
        Need::Given
    } else if observed.secret(names::CA_PASSWORD_SECRET).is_some() {
        Need::Stored(format!("Secret {}", names::CA_PASSWORD_SECRET))
    } else {
        Need::Missing
    }
}
