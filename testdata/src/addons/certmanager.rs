//! A stand-in for cert-manager's controller (cert-manager v1.18, whose CRDs the bootstrap
//! installs): the same behaviour uyuni-sim plays (`crate::controllers`), acting only through
//! the API of the real control plane.
//!
//! - Issuers and ClusterIssuers: `selfSigned` is Ready at once (reason `IsReady`, as
//!   cert-manager's `pkg/issuer/selfsigned/setup.go`); `ca` is Ready (`KeyPairVerified`,
//!   "Signing CA verified") once its Secret holds a `tls.crt` and `tls.key` that parse (PKCS#8,
//!   or PKCS#1 RSA as openssl writes it; else `ErrInvalidKeyPair`), and until then not Ready
//!   with `ErrGetKeyPair`, "Error getting keypair for CA issuer: secret "NAME" not found"
//!   (`pkg/issuer/ca/setup.go`). A ClusterIssuer's Secret is in `cert-manager`, the default
//!   `--cluster-resource-namespace`. Other issuer types (ACME, Vault, …) are not Ready here.
//! - Certificates: a Secret (`kubernetes.io/tls`: `tls.crt`, `tls.key`, `ca.crt`; the
//!   `cert-manager.io/*` annotations and the `secretTemplate`), status Ready with `notBefore`,
//!   `notAfter`, `renewalTime` (`renewBefore`, `renewBeforePercentage`, else ⅔ of `duration`,
//!   default 90 days) and `revision`. A certificate whose issuer is missing or not Ready is not
//!   Ready (`IssuerNotReady`, as uyuni-sim says). A CA issuer signs with its Secret's key, so
//!   the chain verifies, whoever made that Secret.
//!
//! What the real cert-manager does differently: it goes through CertificateRequest objects
//! (and Orders/Challenges for ACME), keeps the private key in a temporary Secret while
//! issuing, sets an `Issuing` condition, writes Events, renews at `renewalTime` (not done
//! here: the certificates of a test outlive it), re-issues when the Secret's content stops
//! matching the spec, honours `privateKey` (algorithm, size, rotationPolicy; here always a new
//! ECDSA P-256 key) and `usages`, and its webhook validates and defaults the resources.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use kube::api::{Patch, PatchParams};
use rcgen::KeyPair;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{
    CERTIFICATE, CLUSTER_ISSUER, ISSUER, Kind, SECRET, annotation, apply, get, list, meta,
    reconcile_loop, trigger_on,
};
use crate::engine::{format_time, now_seconds};

/// cert-manager's default `--cluster-resource-namespace`: where ClusterIssuers' Secrets are.
pub const CLUSTER_RESOURCE_NAMESPACE: &str = "cert-manager";
/// cert-manager's default certificate duration (`apis/certmanager/v1`: 2160h).
pub const DEFAULT_DURATION_SECONDS: u64 = 90 * 24 * 3600;
/// The field managers cert-manager's controllers write with.
const ISSUERS_MANAGER: &str = "cert-manager-issuers";
const READINESS_MANAGER: &str = "cert-manager-certificates-readiness";
const ISSUING_MANAGER: &str = "cert-manager-certificates-issuing";

/// A Ready condition's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    pub ready: bool,
    pub reason: String,
    pub message: String,
}

impl Readiness {
    pub fn new(ready: bool, reason: &str, message: impl Into<String>) -> Readiness {
        Readiness {
            ready,
            reason: reason.to_string(),
            message: message.into(),
        }
    }
}

/// The Secret of a CA issuer: (namespace, name); `None` for other issuer types.
pub fn ca_secret_ref(issuer: &Value, cluster_scoped: bool) -> Option<(String, String)> {
    let secret = issuer["spec"]["ca"]["secretName"].as_str()?;
    let namespace = if cluster_scoped {
        CLUSTER_RESOURCE_NAMESPACE
    } else {
        meta(issuer, "namespace")
    };
    Some((namespace.to_string(), secret.to_string()))
}

fn secret_field(secret: &Value, field: &str) -> Option<String> {
    let bytes = B64.decode(secret["data"][field].as_str()?).ok()?;
    String::from_utf8(bytes).ok().filter(|s| !s.is_empty())
}

/// Whether an issuer can sign, given its CA Secret (looked up by the caller).
pub fn issuer_readiness(issuer: &Value, ca_secret: Option<&Value>) -> Readiness {
    let spec = &issuer["spec"];
    if spec["selfSigned"].is_object() {
        return Readiness::new(true, "IsReady", "");
    }
    if let Some(name) = spec["ca"]["secretName"].as_str() {
        let Some(secret) = ca_secret else {
            return Readiness::new(
                false,
                "ErrGetKeyPair",
                format!("Error getting keypair for CA issuer: secret \"{name}\" not found"),
            );
        };
        let (Some(crt), Some(key)) = (
            secret_field(secret, "tls.crt"),
            secret_field(secret, "tls.key"),
        ) else {
            return Readiness::new(
                false,
                "ErrInvalidKeyPair",
                "Invalid signing key pair: the secret has no tls.crt or tls.key",
            );
        };
        // cert-manager parses both (`pkg/issuer/ca/setup.go`); signing here needs them parsed.
        let parsed = key_pair_from_pem(&key).and_then(|k| {
            let first = pem_blocks(&crt).into_iter().next().unwrap_or_default();
            ca_issuer(&first, k).map(|_| ())
        });
        return match parsed {
            Ok(()) => Readiness::new(true, "KeyPairVerified", "Signing CA verified"),
            Err(e) => Readiness::new(
                false,
                "ErrInvalidKeyPair",
                format!("Invalid signing key pair: {e}"),
            ),
        };
    }
    Readiness::new(
        false,
        "UnsupportedIssuer",
        "the cert-manager stand-in of the test cluster issues from selfSigned and ca issuers only",
    )
}

/// The Ready condition of an object, if any.
pub fn ready_condition(object: &Value) -> Option<&Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == json!("Ready"))
}

/// The Ready condition to write, keeping `lastTransitionTime` while the status stays; `None`
/// if the current one says the same already (nothing to write, no event loop).
pub fn next_condition(object: &Value, readiness: &Readiness, now: &str) -> Option<Value> {
    let generation = object["metadata"]["generation"].as_i64().unwrap_or(1);
    let status = if readiness.ready { "True" } else { "False" };
    let current = ready_condition(object);
    if let Some(c) = current
        && c["status"] == json!(status)
        && c["reason"] == json!(readiness.reason)
        && c["message"].as_str().unwrap_or_default() == readiness.message
        && c["observedGeneration"].as_i64() == Some(generation)
    {
        return None;
    }
    let since = current
        .filter(|c| c["status"] == json!(status))
        .and_then(|c| c["lastTransitionTime"].as_str())
        .unwrap_or(now);
    Some(json!({
        "type": "Ready",
        "status": status,
        "reason": readiness.reason,
        "message": readiness.message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }))
}

/// A Go duration as cert-manager's fields hold them (`2160h`, `1h30m0s`, `45m`), in seconds.
pub fn parse_duration(text: &str) -> Option<u64> {
    let mut total = 0f64;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        total += number * factor;
        rest = &rest[unit..];
    }
    Some(total as u64)
}

/// The validity of a certificate issued at `now` (Unix seconds): (notBefore, notAfter,
/// renewalTime), as cert-manager computes them (`pkg/util/pki/renewaltime.go`: renew
/// `renewBefore` before the end, or at `renewBeforePercentage` of the duration before it, else
/// after ⅔ of the duration).
pub fn validity(spec: &Value, now: i64) -> (i64, i64, i64) {
    let duration = spec["duration"]
        .as_str()
        .and_then(parse_duration)
        .unwrap_or(DEFAULT_DURATION_SECONDS) as i64;
    let not_after = now + duration;
    let renew_before = match (
        spec["renewBefore"].as_str().and_then(parse_duration),
        spec["renewBeforePercentage"].as_i64(),
    ) {
        (Some(before), _) if (before as i64) < duration => before as i64,
        (_, Some(pct)) if (1..100).contains(&pct) => duration * pct / 100,
        _ => duration / 3,
    };
    (now, not_after, not_after - renew_before)
}

/// Whether a Certificate needs (re-)issuing: not Ready for its generation, or its Secret is
/// missing, empty, or not its own.
pub fn needs_issuance(cert: &Value, secret: Option<&Value>) -> bool {
    let generation = cert["metadata"]["generation"].as_i64().unwrap_or(1);
    let ready = ready_condition(cert).is_some_and(|c| {
        c["status"] == json!("True") && c["observedGeneration"].as_i64() == Some(generation)
    });
    let secret_ok = secret.is_some_and(|s| {
        secret_field(s, "tls.crt").is_some()
            && annotation(s, "cert-manager.io/certificate-name") == Some(meta(cert, "name"))
    });
    !(ready && secret_ok)
}

// pub for the unit tests in tests/unit/
#[doc(hidden)]
pub fn pem_blocks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if line.starts_with("-----BEGIN ") {
            current.clear();
        }
        current.push_str(line);
        current.push('\n');
        if line.starts_with("-----END ") {
            out.push(std::mem::take(&mut current));
        }
    }
    out
}

/// The issuer a CA certificate (PEM) makes with its key: the certificate's subject, as the
/// issued certificates' issuer (the same attributes, types and order, so that the bytes match
/// for verifiers that compare them), and its subject key identifier, as their authority key
/// identifier (openssl refuses an issuer whose key identifier differs). These are what rcgen's
/// `Issuer::from_ca_cert_pem` reads (rcgen 0.14 `lib.rs`: subject, `KeyIdMethod::from_x509`,
/// and key usages, which only its CRLs check); read here with x509-cert, on the `der` crate
/// the key parsing shares, instead of rcgen's x509-parser feature and its dozen crates.
/// Without a subject key identifier, rcgen derives one from the key, as it would. (`der` 0.7
/// knows no UniversalString: a CA naming itself in one is refused as unparsable.)
pub fn ca_issuer(crt_pem: &str, key: KeyPair) -> Result<rcgen::Issuer<'static, KeyPair>, String> {
    use rcgen::string::BmpString;
    use rcgen::{DnType, DnValue, KeyIdMethod};
    use x509_cert::der::oid::AssociatedOid as _;
    use x509_cert::der::{Decode as _, DecodePem as _, Tag, Tagged as _};
    use x509_cert::ext::pkix::SubjectKeyIdentifier;

    let unparsable =
        |e: &dyn std::fmt::Display| format!("the CA Secret's tls.crt cannot be parsed: {e}");
    let cert = x509_cert::Certificate::from_pem(crt_pem.as_bytes()).map_err(|e| unparsable(&e))?;
    let tbs = &cert.tbs_certificate;
    let mut name = rcgen::DistinguishedName::new();
    for rdn in &tbs.subject.0 {
        let [attribute] = rdn.0.as_slice() else {
            return Err(unparsable(&format!(
                "its subject has a name component of {} attributes, which the test cluster's cert-manager stand-in cannot copy: use a CA with one attribute per component",
                rdn.0.len()
            )));
        };
        let arcs: Vec<u64> = attribute.oid.arcs().map(u64::from).collect();
        let data = attribute.value.value();
        let text = || std::str::from_utf8(data).map_err(|e| unparsable(&e));
        let invalid = |e: rcgen::Error| unparsable(&e);
        let value = match attribute.value.tag() {
            Tag::Utf8String => DnValue::Utf8String(text()?.to_owned()),
            Tag::PrintableString => DnValue::PrintableString(text()?.try_into().map_err(invalid)?),
            Tag::Ia5String => DnValue::Ia5String(text()?.try_into().map_err(invalid)?),
            Tag::TeletexString => DnValue::TeletexString(text()?.try_into().map_err(invalid)?),
            Tag::BmpString => {
                DnValue::BmpString(BmpString::from_utf16be(data.to_vec()).map_err(invalid)?)
            }
            other => {
                return Err(unparsable(&format!(
                    "its subject holds a {other} value, not a string"
                )));
            }
        };
        name.push(DnType::from_oid(&arcs), value);
    }
    let mut key_id = KeyIdMethod::Sha256;
    for extension in tbs.extensions.iter().flatten() {
        if extension.extn_id == SubjectKeyIdentifier::OID {
            let id = SubjectKeyIdentifier::from_der(extension.extn_value.as_bytes())
                .map_err(|e| unparsable(&e))?;
            key_id = KeyIdMethod::PreSpecified(id.0.as_bytes().to_vec());
        }
    }
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = name;
    params.key_identifier_method = key_id;
    Ok(rcgen::Issuer::new(params, key))
}

/// A DER length.
fn der_length(len: usize) -> Vec<u8> {
    if len < 0x80 {
        return vec![len as u8];
    }
    let bytes: Vec<u8> = len
        .to_be_bytes()
        .into_iter()
        .skip_while(|b| *b == 0)
        .collect();
    let mut out = vec![0x80 | bytes.len() as u8];
    out.extend(bytes);
    out
}

/// A CA key as rcgen with ring reads it: PKCS#8. cert-manager also takes PKCS#1 RSA keys
/// (`pkg/util/pki/parse.go`, `DecodePrivateKeyBytes`), which `openssl rsa -traditional` and
/// older openssl write: those are wrapped into a PKCS#8 PrivateKeyInfo (RFC 5208: version 0,
/// algorithm rsaEncryption with NULL parameters, the PKCS#1 key as an OCTET STRING).
pub fn key_pair_from_pem(pem: &str) -> Result<KeyPair, String> {
    let unusable = |e: rcgen::Error| format!("the CA Secret's tls.key is not a usable key: {e}");
    let Some(body) = pem
        .split("-----BEGIN RSA PRIVATE KEY-----")
        .nth(1)
        .and_then(|rest| rest.split("-----END RSA PRIVATE KEY-----").next())
    else {
        return KeyPair::from_pem(pem).map_err(|e| {
            format!(
                "{} (PKCS#8 and PKCS#1 RSA keys are read; convert others with `openssl pkcs8 -topk8 -nocrypt`)",
                unusable(e)
            )
        });
    };
    let pkcs1 = B64
        .decode(body.split_whitespace().collect::<String>())
        .map_err(|e| format!("the CA Secret's tls.key is not valid PEM: {e}"))?;
    // SEQUENCE { OID 1.2.840.113549.1.1.1, NULL }
    const RSA_ALGORITHM: [u8; 15] = [
        0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00,
    ];
    let mut inner = vec![0x02, 0x01, 0x00];
    inner.extend(RSA_ALGORITHM);
    inner.push(0x04);
    inner.extend(der_length(pkcs1.len()));
    inner.extend(&pkcs1);
    let mut der = vec![0x30];
    der.extend(der_length(inner.len()));
    der.extend(inner);
    let pkcs8 = rustls::pki_types::PrivatePkcs8KeyDer::from(der);
    KeyPair::from_pkcs8_der_and_sign_algo(&pkcs8, &rcgen::PKCS_RSA_SHA256).map_err(unusable)
}

/// Signs a certificate for `spec`: self-signed (`ca` is `None`) or with a CA's certificate
/// and key (PEM). Returns (tls.crt, tls.key, ca.crt).
pub fn sign(
    spec: &Value,
    ca: Option<(&str, &str)>,
    not_before: i64,
    not_after: i64,
) -> Result<(String, String, String), String> {
    let mut params = crate::certs::certificate_params(spec)?;
    // cert-manager signs with Go's x509.CreateCertificate, which copies the CA's subject key
    // identifier into the certificate's authority key identifier.
    params.use_authority_key_identifier_extension = ca.is_some();
    // rcgen's times are `time::OffsetDateTime`, reached from the epoch without naming the crate.
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + Duration::from_secs(not_before.max(0) as u64);
    params.not_after = epoch + Duration::from_secs(not_after.max(0) as u64);
    let key = KeyPair::generate().map_err(|e| format!("cannot generate a key: {e}"))?;
    match ca {
        None => {
            let cert = params
                .self_signed(&key)
                .map_err(|e| format!("cannot self-sign: {e}"))?;
            Ok((cert.pem(), key.serialize_pem(), cert.pem()))
        }
        Some((ca_crt, ca_key)) => {
            let blocks = pem_blocks(ca_crt);
            let (Some(first), Some(root)) = (blocks.first(), blocks.last()) else {
                return Err("the CA Secret's tls.crt holds no PEM certificate".to_string());
            };
            let ca_key = key_pair_from_pem(ca_key)?;
            let issuer = ca_issuer(first, ca_key)?;
            let cert = params
                .signed_by(&key, &issuer)
                .map_err(|e| format!("cannot sign with the CA: {e}"))?;
            // cert-manager's CA issuer: the chain below the root in tls.crt, the root in ca.crt.
            let mut chain = cert.pem();
            if blocks.len() > 1 {
                for b in &blocks[..blocks.len() - 1] {
                    chain.push_str(b);
                }
            }
            Ok((chain, key.serialize_pem(), root.clone()))
        }
    }
}

/// The Secret cert-manager writes for a Certificate (the annotations as uyuni-sim writes them).
pub fn secret_manifest(cert: &Value, tls_crt: &str, tls_key: &str, ca_crt: &str) -> Value {
    let spec = &cert["spec"];
    let name = meta(cert, "name");
    let mut labels = spec["secretTemplate"]["labels"].clone();
    if !labels.is_object() {
        labels = json!({});
    }
    labels["controller.cert-manager.io/fao"] = json!("true");
    let mut annotations = spec["secretTemplate"]["annotations"].clone();
    if !annotations.is_object() {
        annotations = json!({});
    }
    let strings = |field: &str| -> String {
        spec[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(",")
    };
    annotations["cert-manager.io/certificate-name"] = json!(name);
    annotations["cert-manager.io/issuer-name"] = spec["issuerRef"]["name"].clone();
    annotations["cert-manager.io/issuer-kind"] =
        json!(spec["issuerRef"]["kind"].as_str().unwrap_or("Issuer"));
    annotations["cert-manager.io/issuer-group"] = json!(
        spec["issuerRef"]["group"]
            .as_str()
            .unwrap_or("cert-manager.io")
    );
    if let Some(cn) = spec["commonName"].as_str() {
        annotations["cert-manager.io/common-name"] = json!(cn);
    }
    annotations["cert-manager.io/alt-names"] = json!(strings("dnsNames"));
    annotations["cert-manager.io/ip-sans"] = json!(strings("ipAddresses"));
    annotations["cert-manager.io/uri-sans"] = json!(strings("uris"));
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": spec["secretName"].as_str().unwrap_or(name),
            "namespace": meta(cert, "namespace"),
            "labels": labels,
            "annotations": annotations,
        },
        "data": {
            "tls.crt": B64.encode(tls_crt),
            "tls.key": B64.encode(tls_key),
            "ca.crt": B64.encode(ca_crt),
        },
    })
}

async fn patch_status(
    client: &kube::Client,
    kind: Kind,
    object: &Value,
    status: Value,
    manager: &str,
) -> anyhow::Result<()> {
    let name = meta(object, "name");
    let namespace = meta(object, "namespace");
    kind.api(client, Some(namespace))
        .patch_status(
            name,
            &PatchParams::apply(manager),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .with_context(|| {
            format!(
                "cannot write the status of {} {namespace}/{name}",
                kind.kind
            )
        })?;
    Ok(())
}

/// An issuer's key: (kind, namespace, name).
type IssuerKey = (String, String, String);

async fn reconcile(client: &kube::Client) -> anyhow::Result<()> {
    let now = format_time(now_seconds());
    // Issuers first, so that certificates see this pass's readiness.
    let mut issuers: BTreeMap<IssuerKey, (Value, bool)> = BTreeMap::new();
    for (kind, cluster_scoped) in [(ISSUER, false), (CLUSTER_ISSUER, true)] {
        for issuer in list(client, kind).await? {
            let secret = match ca_secret_ref(&issuer, cluster_scoped) {
                Some((ns, name)) => get(client, SECRET, &ns, &name).await?,
                None => None,
            };
            let readiness = issuer_readiness(&issuer, secret.as_ref());
            if let Some(condition) = next_condition(&issuer, &readiness, &now)
                && let Err(e) = patch_status(
                    client,
                    kind,
                    &issuer,
                    json!({"conditions": [condition]}),
                    ISSUERS_MANAGER,
                )
                .await
            {
                // Retried on the next pass; the other issuers go on.
                tracing::warn!("{e:#}");
            }
            let key = (
                kind.kind.to_string(),
                if cluster_scoped {
                    ""
                } else {
                    meta(&issuer, "namespace")
                }
                .to_string(),
                meta(&issuer, "name").to_string(),
            );
            issuers.insert(key, (issuer, readiness.ready));
        }
    }
    for cert in list(client, CERTIFICATE).await? {
        if let Err(e) = reconcile_certificate(client, &cert, &issuers, &now).await {
            tracing::warn!(
                "certificate {}/{}: {e:#}",
                meta(&cert, "namespace"),
                meta(&cert, "name")
            );
        }
    }
    Ok(())
}

async fn reconcile_certificate(
    client: &kube::Client,
    cert: &Value,
    issuers: &BTreeMap<IssuerKey, (Value, bool)>,
    now: &str,
) -> anyhow::Result<()> {
    let spec = &cert["spec"];
    let namespace = meta(cert, "namespace");
    let name = meta(cert, "name");
    let secret_name = spec["secretName"].as_str().unwrap_or(name);
    let secret = get(client, SECRET, namespace, secret_name).await?;
    if !needs_issuance(cert, secret.as_ref()) {
        return Ok(());
    }
    let issuer_kind = spec["issuerRef"]["kind"].as_str().unwrap_or("Issuer");
    let issuer_name = spec["issuerRef"]["name"].as_str().unwrap_or_default();
    let cluster_scoped = issuer_kind == "ClusterIssuer";
    let key = (
        issuer_kind.to_string(),
        if cluster_scoped { "" } else { namespace }.to_string(),
        issuer_name.to_string(),
    );
    let not_ready = |message: String| Readiness::new(false, "IssuerNotReady", message);
    let signed = match issuers.get(&key) {
        None => Err(not_ready(format!(
            "Referenced \"{issuer_kind}\" not found: {issuer_kind}.cert-manager.io \"{issuer_name}\" not found"
        ))),
        Some((_, false)) => Err(not_ready(format!(
            "Referenced \"{issuer_kind}\" \"{issuer_name}\" is not Ready"
        ))),
        Some((issuer, true)) => {
            let ca = match ca_secret_ref(issuer, cluster_scoped) {
                None => None,
                Some((ns, n)) => {
                    let s = get(client, SECRET, &ns, &n).await?;
                    s.as_ref().and_then(|s| {
                        Some((secret_field(s, "tls.crt")?, secret_field(s, "tls.key")?))
                    })
                }
            };
            let (not_before, not_after, renewal) = validity(spec, now_seconds());
            let ca_refs = ca.as_ref().map(|(c, k)| (c.as_str(), k.as_str()));
            sign(spec, ca_refs, not_before, not_after)
                .map(|pem| (pem, not_before, not_after, renewal))
                .map_err(|e| Readiness::new(false, "Failed", e))
        }
    };
    match signed {
        Err(readiness) => {
            if let Some(condition) = next_condition(cert, &readiness, now) {
                patch_status(
                    client,
                    CERTIFICATE,
                    cert,
                    json!({"conditions": [condition]}),
                    READINESS_MANAGER,
                )
                .await?;
            }
        }
        Ok(((tls_crt, tls_key, ca_crt), not_before, not_after, renewal)) => {
            apply(
                client,
                &secret_manifest(cert, &tls_crt, &tls_key, &ca_crt),
                ISSUING_MANAGER,
            )
            .await?;
            let ready = Readiness::new(
                true,
                "Ready",
                "Certificate is up to date and has not expired",
            );
            let condition = next_condition(cert, &ready, now)
                .unwrap_or_else(|| ready_condition(cert).cloned().unwrap_or_default());
            let revision = cert["status"]["revision"].as_i64().unwrap_or(0) + 1;
            patch_status(
                client,
                CERTIFICATE,
                cert,
                json!({
                    "conditions": [condition],
                    "notBefore": format_time(not_before),
                    "notAfter": format_time(not_after),
                    "renewalTime": format_time(renewal),
                    "revision": revision,
                }),
                READINESS_MANAGER,
            )
            .await?;
            tracing::info!("issued certificate {namespace}/{name} (revision {revision})");
        }
    }
    Ok(())
}

/// Reconciles issuers and certificates until the process ends.
pub async fn run(client: kube::Client, resync: std::time::Duration) -> anyhow::Result<()> {
    let notify = Arc::new(Notify::new());
    for kind in [ISSUER, CLUSTER_ISSUER, CERTIFICATE, SECRET] {
        trigger_on(&client, kind, notify.clone());
    }
    reconcile_loop("cert-manager", notify, resync, || reconcile(&client)).await;
    Ok(())
}
