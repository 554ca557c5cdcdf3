//! Third-party certificates, checked before they are written: the key belongs to the
//! certificate, the certificate chains to the CA given with it, and it names the host. A server
//! given a certificate that fails one of these serves TLS that no client accepts; found only
//! once the migrated server runs, that is after the source's outage.
//!
//! What is checked, and what is not:
//! - The pair: the public key the private key carries (RSA: modulus and exponent; EC: the public
//!   point that PKCS#8 and SEC1 keys hold beside the scalar; Ed25519: derived from the seed)
//!   against the certificate's SubjectPublicKeyInfo. An EC key without its public point cannot
//!   be matched without curve arithmetic and is let through: OpenSSL and every common tool write
//!   the point.
//! - The chain: each certificate's signature, verified with its issuer's key, from the server's
//!   certificate through the intermediates to a certificate of the CA file (which need not be
//!   self-signed: a CA file holding an intermediate is a trust anchor too). Algorithms ring
//!   cannot verify here (RSA-PSS, for one) fall back to matching the issuer's name, so that a
//!   chain is never refused only for its algorithm.
//! - The names: as OpenSSL's `X509_check_host`, which upstream's `mgradm` uses
//!   (`openssl verify -verify_hostname`, uyuni-tools `shared/ssl/ssl.go` `VerifyHostname`):
//!   the DNS names of the subjectAltName, a wildcard `*.` standing for one whole left-most
//!   label; the subject's common name only when the certificate has no DNS name at all
//!   (openssl `crypto/x509/v3_utl.c` `do_x509_check`: the CN is looked at only when no DNS
//!   SAN was present). Browsers and Go ignore the CN, so a certificate that relies on it is
//!   accepted here but may not be by every client.
//! - Not checked: validity dates (the planner has no clock), key usages, and revocation.
//!
//! Nothing here prints key material: problems name subjects, issuers and host names only.

use x509_cert::Certificate;
use x509_cert::der;
use x509_cert::der::asn1::ObjectIdentifier;
use x509_cert::der::{Decode, Encode};
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::ext::pkix::name::GeneralName;

const RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
const EC: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");
const P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const P384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
const RSA_SHA1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.5");
const RSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11");
const RSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.12");
const RSA_SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.13");
const ECDSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const ECDSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");
const COMMON_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");

/// Why a file's certificates or key cannot be used. The texts complete a sentence that names
/// the file ("--ssl-server-cert FILE ...").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    #[error("holds no PEM certificate")]
    NoCertificate,
    #[error("holds a certificate that cannot be read ({0}): give it in PEM")]
    Certificate(String),
    #[error(
        "holds no private key that can be read as PKCS#8 (BEGIN PRIVATE KEY), PKCS#1 (BEGIN RSA PRIVATE KEY) or SEC1 (BEGIN EC PRIVATE KEY)"
    )]
    Key,
}

/// The key's public half differs from the certificate's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    #[error("the certificate's public key is {cert}, the key is {key}")]
    KeyType { cert: String, key: String },
    #[error("its public key differs")]
    PublicKey,
}

/// A certificate of the chain whose issuer is in neither the chain nor the CA file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unchained {
    /// The certificate that no given CA signed.
    pub subject: String,
    /// The issuer it names.
    pub issuer: String,
    /// It is the server's own certificate (else an intermediate).
    pub leaf: bool,
    /// The subjects of the CA file's certificates.
    pub anchors: Vec<String>,
}

impl std::fmt::Display for Unchained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let which = if self.leaf {
            "the certificate"
        } else {
            "the intermediate CA certificate"
        };
        write!(
            f,
            "{which} {:?} (issued by {:?}) is signed by none of the given CAs ({})",
            self.subject,
            self.issuer,
            self.anchors
                .iter()
                .map(|a| format!("{a:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// The certificates of a PEM text, in order. Text around the blocks (`openssl x509 -text`
/// output, bag attributes) is ignored, as OpenSSL does.
pub fn certificates(pem: &str) -> Result<Vec<Certificate>, Unreadable> {
    let certs = pem_blocks(pem)
        .into_iter()
        .filter(|(label, _)| label == "CERTIFICATE")
        .map(|(_, der)| {
            Certificate::from_der(&der).map_err(|e| Unreadable::Certificate(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if certs.is_empty() {
        return Err(Unreadable::NoCertificate);
    }
    Ok(certs)
}

/// The PEM blocks of a text: label and decoded content. A block that is not valid PEM is left
/// out, so that it is reported as missing rather than as a decoding detail.
fn pem_blocks(text: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let block = &rest[start..];
        let Some(label_end) = block["-----BEGIN ".len()..].find("-----") else {
            break;
        };
        let label = &block["-----BEGIN ".len().."-----BEGIN ".len() + label_end];
        let end_marker = format!("-----END {label}-----");
        let Some(end) = block.find(&end_marker) else {
            break;
        };
        let whole = &block[..end + end_marker.len()];
        if let Ok((label, der)) = der::pem::decode_vec(whole.as_bytes()) {
            out.push((label.to_owned(), der));
        } else {
            out.push((format!("{label} (unreadable)"), Vec::new()));
        }
        rest = &block[end + end_marker.len()..];
    }
    out
}

/// A public key, as far as telling two apart goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PublicKey {
    Rsa {
        modulus: Vec<u8>,
        exponent: Vec<u8>,
    },
    Ec {
        curve: Option<ObjectIdentifier>,
        point: Vec<u8>,
    },
    Ed25519(Vec<u8>),
    Other(ObjectIdentifier),
}

impl PublicKey {
    fn kind(&self) -> String {
        match self {
            PublicKey::Rsa { .. } => "RSA".into(),
            PublicKey::Ec { curve, .. } => match curve {
                Some(c) if *c == P256 => "EC P-256".into(),
                Some(c) if *c == P384 => "EC P-384".into(),
                Some(c) => format!("EC (curve {c})"),
                None => "EC".into(),
            },
            PublicKey::Ed25519(_) => "Ed25519".into(),
            PublicKey::Other(oid) => format!("of algorithm {oid}"),
        }
    }
}

fn strip_zeros(b: &[u8]) -> Vec<u8> {
    let first = b.iter().position(|x| *x != 0).unwrap_or(b.len());
    b[first..].to_vec()
}

fn rsa_public(der: &[u8]) -> Option<PublicKey> {
    let k = pkcs1::RsaPublicKey::from_der(der).ok()?;
    Some(PublicKey::Rsa {
        modulus: strip_zeros(k.modulus.as_bytes()),
        exponent: strip_zeros(k.public_exponent.as_bytes()),
    })
}

fn certificate_key(cert: &Certificate) -> PublicKey {
    let spki = &cert.tbs_certificate.subject_public_key_info;
    let bits = spki.subject_public_key.raw_bytes();
    let oid = spki.algorithm.oid;
    if oid == RSA {
        rsa_public(bits).unwrap_or(PublicKey::Other(oid))
    } else if oid == EC {
        PublicKey::Ec {
            curve: spki
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.decode_as::<ObjectIdentifier>().ok()),
            point: bits.to_vec(),
        }
    } else if oid == ED25519 {
        PublicKey::Ed25519(bits.to_vec())
    } else {
        PublicKey::Other(oid)
    }
}

fn rsa_private(der: &[u8]) -> Option<PublicKey> {
    let k = pkcs1::RsaPrivateKey::from_der(der).ok()?;
    Some(PublicKey::Rsa {
        modulus: strip_zeros(k.modulus.as_bytes()),
        exponent: strip_zeros(k.public_exponent.as_bytes()),
    })
}

/// `None` inside: the key does not carry its public point.
fn ec_private(der: &[u8], curve: Option<ObjectIdentifier>) -> Option<Option<PublicKey>> {
    let k = sec1::EcPrivateKey::from_der(der).ok()?;
    let curve = curve.or(k.parameters.and_then(|p| p.named_curve()));
    Some(k.public_key.map(|point| PublicKey::Ec {
        curve,
        point: point.to_vec(),
    }))
}

/// The public key a private key carries; `Ok(None)`: it carries none that can be compared
/// (an EC key without its public point).
fn private_key_public(pem: &str) -> Result<Option<PublicKey>, Unreadable> {
    for (label, der) in pem_blocks(pem) {
        let found = match label.as_str() {
            "RSA PRIVATE KEY" => rsa_private(&der).map(Some),
            "EC PRIVATE KEY" => ec_private(&der, None),
            "PRIVATE KEY" => pkcs8_public(&der),
            _ => continue,
        };
        return found.ok_or(Unreadable::Key);
    }
    Err(Unreadable::Key)
}

fn pkcs8_public(der: &[u8]) -> Option<Option<PublicKey>> {
    let info = pkcs8::PrivateKeyInfo::from_der(der).ok()?;
    let oid = info.algorithm.oid;
    if oid == RSA {
        rsa_private(info.private_key).map(Some)
    } else if oid == EC {
        let curve = info
            .algorithm
            .parameters
            .and_then(|p| p.decode_as::<ObjectIdentifier>().ok());
        match ec_private(info.private_key, curve)? {
            Some(k) => Some(Some(k)),
            None => Some(info.public_key.map(|point| PublicKey::Ec {
                curve,
                point: point.to_vec(),
            })),
        }
    } else if oid == ED25519 {
        // The public key follows from the seed; ring derives it without randomness.
        let pair = ring::signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(der).ok()?;
        use ring::signature::KeyPair;
        Some(Some(PublicKey::Ed25519(
            pair.public_key().as_ref().to_vec(),
        )))
    } else {
        Some(Some(PublicKey::Other(oid)))
    }
}

/// Whether the private key in `key_pem` belongs to the first certificate of `chain_pem`.
pub fn check_pair(chain_pem: &str, key_pem: &str) -> Result<Result<(), Mismatch>, Unreadable> {
    let certs = certificates(chain_pem)?;
    let Some(key) = private_key_public(key_pem)? else {
        return Ok(Ok(()));
    };
    let cert = certificate_key(&certs[0]);
    Ok(match (&cert, &key) {
        (
            PublicKey::Ec {
                curve: c1,
                point: p1,
            },
            PublicKey::Ec {
                curve: c2,
                point: p2,
            },
        ) => {
            if c1.is_some() && c2.is_some() && c1 != c2 {
                Err(Mismatch::KeyType {
                    cert: cert.kind(),
                    key: key.kind(),
                })
            } else if same_point(p1, p2) {
                Ok(())
            } else {
                Err(Mismatch::PublicKey)
            }
        }
        _ if std::mem::discriminant(&cert) != std::mem::discriminant(&key) => {
            Err(Mismatch::KeyType {
                cert: cert.kind(),
                key: key.kind(),
            })
        }
        _ if cert == key => Ok(()),
        _ => Err(Mismatch::PublicKey),
    })
}

/// Two encodings of an EC point: equal, or the same x coordinate when one is compressed
/// (SEC1 2.3.3: `02`/`03` and x, or `04`, x and y).
fn same_point(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    let x = |p: &[u8]| -> Option<(Vec<u8>, Option<bool>)> {
        match p.first()? {
            0x04 if p.len() % 2 == 1 => {
                let n = (p.len() - 1) / 2;
                Some((p[1..=n].to_vec(), p.last().map(|y| y & 1 == 1)))
            }
            0x02 | 0x03 => Some((p[1..].to_vec(), Some(p[0] == 0x03))),
            _ => None,
        }
    };
    match (x(a), x(b)) {
        (Some((xa, ya)), Some((xb, yb))) => xa == xb && ya == yb,
        _ => false,
    }
}

enum Signed {
    Yes,
    No,
    /// The algorithm is not one checked here: the issuer's name decides.
    Unknown,
}

fn signed_by(child: &Certificate, parent: &Certificate) -> Signed {
    use ring::signature as sig;
    let alg = child.signature_algorithm.oid;
    let key = certificate_key(parent);
    let spki = &parent.tbs_certificate.subject_public_key_info;
    let algorithm: &dyn sig::VerificationAlgorithm = match (&key, alg) {
        (PublicKey::Rsa { .. }, a) if a == RSA_SHA256 => {
            &sig::RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY
        }
        (PublicKey::Rsa { .. }, a) if a == RSA_SHA384 => &sig::RSA_PKCS1_2048_8192_SHA384,
        (PublicKey::Rsa { .. }, a) if a == RSA_SHA512 => {
            &sig::RSA_PKCS1_1024_8192_SHA512_FOR_LEGACY_USE_ONLY
        }
        (PublicKey::Rsa { .. }, a) if a == RSA_SHA1 => {
            &sig::RSA_PKCS1_1024_8192_SHA1_FOR_LEGACY_USE_ONLY
        }
        (PublicKey::Ec { curve: Some(c), .. }, a) if *c == P256 && a == ECDSA_SHA256 => {
            &sig::ECDSA_P256_SHA256_ASN1
        }
        (PublicKey::Ec { curve: Some(c), .. }, a) if *c == P256 && a == ECDSA_SHA384 => {
            &sig::ECDSA_P256_SHA384_ASN1
        }
        (PublicKey::Ec { curve: Some(c), .. }, a) if *c == P384 && a == ECDSA_SHA256 => {
            &sig::ECDSA_P384_SHA256_ASN1
        }
        (PublicKey::Ec { curve: Some(c), .. }, a) if *c == P384 && a == ECDSA_SHA384 => {
            &sig::ECDSA_P384_SHA384_ASN1
        }
        (PublicKey::Ed25519(_), a) if a == ED25519 => &sig::ED25519,
        // A known algorithm and a key of another type: this key did not sign it.
        (_, a)
            if [
                RSA_SHA1,
                RSA_SHA256,
                RSA_SHA384,
                RSA_SHA512,
                ECDSA_SHA256,
                ECDSA_SHA384,
                ED25519,
            ]
            .contains(&a) =>
        {
            return Signed::No;
        }
        _ => return Signed::Unknown,
    };
    let Ok(tbs) = child.tbs_certificate.to_der() else {
        return Signed::No;
    };
    let Some(signature) = child.signature.as_bytes() else {
        return Signed::No;
    };
    match sig::UnparsedPublicKey::new(algorithm, spki.subject_public_key.raw_bytes())
        .verify(&tbs, signature)
    {
        Ok(()) => Signed::Yes,
        Err(_) => Signed::No,
    }
}

fn issued_by(child: &Certificate, parent: &Certificate) -> bool {
    match signed_by(child, parent) {
        Signed::Yes => true,
        Signed::No => false,
        Signed::Unknown => child.tbs_certificate.issuer == parent.tbs_certificate.subject,
    }
}

/// Whether the first certificate of `chain_pem` chains, through the others, to a certificate
/// of `roots_pem`.
pub fn check_chain(chain_pem: &str, roots_pem: &str) -> Result<Result<(), Unchained>, Unreadable> {
    let chain = certificates(chain_pem)?;
    let roots = certificates(roots_pem)?;
    let mut used = vec![false; chain.len()];
    let mut current = 0;
    // Each step uses up one intermediate, so the walk ends.
    loop {
        let cert = &chain[current];
        if roots.iter().any(|r| issued_by(cert, r)) {
            return Ok(Ok(()));
        }
        used[current] = true;
        let next = (0..chain.len()).find(|i| !used[*i] && issued_by(cert, &chain[*i]));
        match next {
            Some(i) => current = i,
            None => {
                return Ok(Err(Unchained {
                    subject: cert.tbs_certificate.subject.to_string(),
                    issuer: cert.tbs_certificate.issuer.to_string(),
                    leaf: current == 0,
                    anchors: roots
                        .iter()
                        .map(|r| r.tbs_certificate.subject.to_string())
                        .collect(),
                }));
            }
        }
    }
}

/// The host names a certificate is valid for: its DNS subjectAltNames, or, when it has none,
/// its subject's common names (see the module's comment).
pub fn host_names(cert: &Certificate) -> Vec<String> {
    let sans: Vec<String> = cert
        .tbs_certificate
        .get::<SubjectAltName>()
        .ok()
        .flatten()
        .map(|(_, san)| {
            san.0
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DnsName(d) => Some(d.as_str().to_ascii_lowercase()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    if !sans.is_empty() {
        return sans;
    }
    cert.tbs_certificate
        .subject
        .0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .filter(|a| a.oid == COMMON_NAME)
        .filter_map(|a| {
            a.value
                .decode_as::<der::asn1::Utf8StringRef<'_>>()
                .map(|s| s.as_str().to_owned())
                .or_else(|_| {
                    a.value
                        .decode_as::<der::asn1::PrintableStringRef<'_>>()
                        .map(|s| s.as_str().to_owned())
                })
                .or_else(|_| {
                    a.value
                        .decode_as::<der::asn1::Ia5StringRef<'_>>()
                        .map(|s| s.as_str().to_owned())
                })
                .ok()
        })
        .map(|s| s.to_ascii_lowercase())
        .collect()
}

/// Whether a certificate name (possibly `*.example.com`) covers a host name: a wildcard stands
/// for exactly one whole left-most label, as in RFC 6125 6.4.3 and OpenSSL's default.
pub fn name_covers(pattern: &str, host: &str) -> bool {
    let pattern = pattern.trim_end_matches('.').to_ascii_lowercase();
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(suffix) => host.split_once('.').is_some_and(|(label, rest)| {
            !label.is_empty() && rest == suffix && suffix.contains('.')
        }),
        None => pattern == host,
    }
}

/// The hosts of `required` the first certificate of `chain_pem` does not name, and the names
/// it carries (for the message).
pub fn missing_names(
    chain_pem: &str,
    required: &[String],
) -> Result<(Vec<String>, Vec<String>), Unreadable> {
    let certs = certificates(chain_pem)?;
    let names = host_names(&certs[0]);
    let missing = required
        .iter()
        .filter(|h| !names.iter().any(|n| name_covers(n, h)))
        .cloned()
        .collect();
    Ok((missing, names))
}
