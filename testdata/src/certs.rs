//! Certificates: the API server's own CA and serving certificate, and the ones the simulated
//! cert-manager issues.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// The server's PKI: a CA (what the kubeconfig trusts) and a leaf for 127.0.0.1/localhost.
/// rustls refuses a lone self-signed certificate as an end entity, hence the two levels.
pub struct ServerPki {
    pub ca_cert_pem: String,
    pub ca_key_pem: String,
    pub tls_config: Arc<rustls::ServerConfig>,
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

pub fn ca_params(common_name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn.push(DnType::OrganizationName, "uyuni-sim");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

impl ServerPki {
    pub fn generate() -> Result<ServerPki, String> {
        let ca_key = KeyPair::generate().map_err(err)?;
        let ca_params = ca_params("uyuni-sim-ca");
        let ca_cert = ca_params.self_signed(&ca_key).map_err(err)?;
        let issuer = Issuer::new(ca_params, &ca_key);

        let leaf_key = KeyPair::generate().map_err(err)?;
        let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).map_err(err)?;
        leaf.subject_alt_names
            .push(SanType::IpAddress(std::net::IpAddr::V4(
                std::net::Ipv4Addr::LOCALHOST,
            )));
        leaf.distinguished_name = DistinguishedName::new();
        leaf.distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        leaf.is_ca = IsCa::ExplicitNoCa;
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        leaf.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).map_err(err)?;

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key_der = rustls::pki_types::PrivateKeyDer::Pkcs8(
            rustls::pki_types::PrivatePkcs8KeyDer::from(leaf_key.serialize_der()),
        );
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(err)?
            .with_no_client_auth()
            .with_single_cert(vec![leaf_cert.der().clone()], key_der)
            .map_err(err)?;
        // HTTP/1.1 only, as kube-rs speaks to any API server. kubectl would take HTTP/2 if it
        // were offered, as it does with a real API server; over HTTP/1.1 it behaves the same
        // and, with hyper's HTTP/2 (h2) left out, the simulator costs less to build (about 8 s
        // of CPU) and to run (the kubectl and sim tests: 8 % less CPU, alternated runs).
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ServerPki {
            ca_cert_pem: ca_cert.pem(),
            ca_key_pem: ca_key.serialize_pem(),
            tls_config: Arc::new(config),
        })
    }
}

/// What cert-manager puts into a Certificate's Secret.
pub struct Issued {
    pub tls_crt: String,
    pub tls_key: String,
    pub ca_crt: String,
    /// The parameters of an issued CA certificate, to sign with it later.
    pub ca_params: Option<CertificateParams>,
}

/// The signer of a Certificate: its own key (self-signed) or a CA's.
pub enum Signer<'a> {
    SelfSigned,
    Ca {
        cert_pem: &'a str,
        key_pem: &'a str,
        params: Box<CertificateParams>,
    },
}

/// The X.509 parameters of a cert-manager Certificate spec (`commonName`, `dnsNames`,
/// `ipAddresses`, `isCA`; validity left at rcgen's default): shared by uyuni-sim's controller
/// and the real control plane's cert-manager stand-in (`addons::certmanager`).
pub fn certificate_params(spec: &serde_json::Value) -> Result<CertificateParams, String> {
    let strings = |field: &str| -> Vec<String> {
        spec[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let is_ca = spec["isCA"].as_bool().unwrap_or(false);
    let common_name = spec["commonName"]
        .as_str()
        .map(str::to_string)
        .or_else(|| strings("dnsNames").first().cloned())
        .unwrap_or_else(|| "uyuni-sim".to_string());
    let mut params = if is_ca {
        ca_params(&common_name)
    } else {
        let mut p = CertificateParams::new(strings("dnsNames")).map_err(err)?;
        p.distinguished_name = DistinguishedName::new();
        p.distinguished_name
            .push(DnType::CommonName, common_name.as_str());
        p.is_ca = IsCa::ExplicitNoCa;
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p
    };
    for ip in strings("ipAddresses") {
        if let Ok(addr) = ip.parse() {
            params.subject_alt_names.push(SanType::IpAddress(addr));
        }
    }
    Ok(params)
}

/// Issues a certificate for a cert-manager Certificate spec (`commonName`, `dnsNames`,
/// `ipAddresses`, `isCA`, `duration` is ignored).
pub fn issue(spec: &serde_json::Value, signer: Signer<'_>) -> Result<Issued, String> {
    let is_ca = spec["isCA"].as_bool().unwrap_or(false);
    let params = certificate_params(spec)?;
    let key = KeyPair::generate().map_err(err)?;
    let (cert, ca_crt) = match signer {
        Signer::SelfSigned => {
            let cert = params.self_signed(&key).map_err(err)?;
            let pem = cert.pem();
            (pem.clone(), pem)
        }
        Signer::Ca {
            cert_pem,
            key_pem,
            params: ca,
        } => {
            let ca_key = KeyPair::from_pem(key_pem).map_err(err)?;
            let issuer = Issuer::new(*ca, ca_key);
            let cert = params.signed_by(&key, &issuer).map_err(err)?;
            (cert.pem(), cert_pem.to_string())
        }
    };
    Ok(Issued {
        tls_crt: cert,
        tls_key: key.serialize_pem(),
        ca_crt,
        ca_params: is_ca.then_some(params),
    })
}

/// A CA certificate for the built-in migration scenario (what the source server's
/// `RHN-ORG-TRUSTED-SSL-CERT` would be).
pub fn scenario_ca(common_name: &str) -> Result<(String, String), String> {
    let key = KeyPair::generate().map_err(err)?;
    let cert = ca_params(common_name).self_signed(&key).map_err(err)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A 2048-bit RSA key for tests (ring, rcgen's backend here, signs with RSA keys but does not
/// generate them). It protects nothing.
pub const TEST_RSA_KEY: &str = "\
-----BEGIN PRIVATE KEY-----
MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQC4fW4pooKk4UGY
qWwfoTgSIDKaM3CFfeBJYz0hqL7RrMh+gMN4+p2gyGQNqQDmh8JypJ2YMOY8YX+Z
yl+C7LLJtwxX29pU7zoxLVnlhr3GsAd3aVhHUgAi0TqRGLtzmYfEfxQtPxeVLKT3
iGA84RQhKWPGwJx5w7TIpJvDspwAbeq893N4xl7UklyPhX/ZF6XuY27JXQ/n4Cg0
gKSWvd0k+CIPfTmzikYSnm6eRs5WNy18tSlq+iA7o1SC758zdo0PgPvakLun70la
kfs03HNGvJbvoNf6w2a8VQrH1e7Y6JvqIJrq1pQVN/o8qSUb7uyDCWup9vEqRsZu
ZWUa6JFZAgMBAAECggEABnXmALE/L/TvbiAouCbWJtRX0UyR2SriSs+d2WrmW8NY
Ng3eSoNEN9gsoMnVTT1d0tPu7OBxf5XOeR08IQKW9DdjyEPbrnO+LvCuoDoKtUV+
zXCz9bNqa8215lTeY5rxxTDKDReThNbOZBizfg5HvS2M3+3ozN7MmuYgykab7evc
KSXk2Sr6mbXQrRnwdC6WtxEjtM4aUfZQrYqIThljsLJXW326ROCz5xRuvbjO9rJ4
444zOu3D9hNA97xkkbNkX88MGffLsXFZ+Ne5d5GQ7yapcjcM0DiurvMFxWJire+I
jQbLTXU3dYaFMrgPcv6RBAr7wIRxRybjYxtTQNvZPQKBgQDxlc511r21lfDwhc8x
gYVBvFiFlNYv4tuxjB/inclvHd1JkKXWss2at4D5Bd6Y0ztFvCfk1LpSmqiVoLQl
kNl+QZT5mGmsdw90hagYd2szf/bqC/ofPeuQyGfw9LPstBkDD8FlmCeEMNkhmNu/
vdk/laBTt5GZ5Jm1jEB/JbkaGwKBgQDDf3/GTH8mUsYwezK6+aUH/BH2tWJ/MI+2
0C09fvTmRAGEvhQ03dNzDIx366vXa9heNjlMC9HxHlWKPBlOynCnYMg2WV2kv6Y6
GDXQhnIybCEwTh+GEKvJDfMLRzxTiYOUVCR/eTibzPKtOLBDc3/6fvqvXyHgvj1Y
8XVIi215mwKBgAyMR2j/emMQIq+bg6OCorVDXyWxEV7zXY3fRViz8V6AIppLlRGN
v/glR+GnWGR/tDhvCXNtSTA5MEB1VGYPG/ze0yoTrIl0tazLtGtw6HSIVP7bGGa/
BJlEj4GIdD/7KsFp9BWezY6kKuL/2YogBkSzNNykUD+6C/HOExuHjhG5AoGAJZ2o
tj0N0g/nNnjd///88xZbVn78HsD3RhO0QLrm4E+Bg0sXlDyCbQajGIfuHpsPnMEO
MUWs9ZoCl4CM1g45str6awqy6/o8P71czWyxGGaZ1DOT+TXH9/2JIEhqoSA6gxXV
l/l5HPFIWHAp6jCVFVvNXGUPnbC9GRoMmRLK07UCgYBYRt5hUsEveTmIN1xX0Ccr
U5tnIc8gP8dIfgNcaPY/190k2NVQD2wpJ1TH4PzSaL7MCt9NAhiJndNJy/2LdSOp
4SfQKLglsCge/QfPaAsqiJB3TZLpYMtoickkmrx4NmQdvvSD8UlheTlw2KxrbXfq
oj4hf6AClRTDkZPSiOsoBw==
-----END PRIVATE KEY-----
";

/// The key type of a certificate made by [`chain`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    EcP256,
    EcP384,
    Rsa,
}

fn key_of(kind: KeyKind) -> Result<KeyPair, String> {
    match kind {
        KeyKind::EcP256 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(err),
        KeyKind::EcP384 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).map_err(err),
        KeyKind::Rsa => {
            KeyPair::from_pem_and_sign_algo(TEST_RSA_KEY, &rcgen::PKCS_RSA_SHA256).map_err(err)
        }
    }
}

/// A third-party certificate as a user gives it: a root CA, intermediates (none or one), and
/// the server's certificate with its key, all PEM (the key PKCS#8).
pub struct Chain {
    pub root: String,
    pub intermediates: Vec<String>,
    pub cert: String,
    pub key: String,
}

/// Issues a root CA (`ca` key), optionally an intermediate under it, and a server certificate
/// for `names` (subjectAltName DNS names, CN the first) with a `leaf` key.
pub fn chain(
    names: &[&str],
    ca: KeyKind,
    leaf: KeyKind,
    intermediate: bool,
) -> Result<Chain, String> {
    let root_key = key_of(ca)?;
    let root_params = ca_params("Test Root CA");
    let root = root_params.self_signed(&root_key).map_err(err)?;
    let mut issuer = Issuer::new(root_params, &root_key);
    let mut intermediates = Vec::new();
    // One RSA test key: an intermediate under an RSA root gets an EC key, so that the two
    // keys differ and only the right one verifies the server's certificate.
    let mid_key = key_of(if ca == KeyKind::Rsa {
        KeyKind::EcP256
    } else {
        ca
    })?;
    let mid_params = ca_params("Test Intermediate CA");
    if intermediate {
        let mid = mid_params
            .clone()
            .signed_by(&mid_key, &issuer)
            .map_err(err)?;
        intermediates.push(mid.pem());
        issuer = Issuer::new(mid_params, &mid_key);
    }
    let spec = serde_json::json!({"dnsNames": names});
    let params = certificate_params(&spec)?;
    let key = key_of(leaf)?;
    let cert = params.signed_by(&key, &issuer).map_err(err)?;
    Ok(Chain {
        root: root.pem(),
        intermediates,
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}
