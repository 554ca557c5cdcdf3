//! Image references (reference §1.6) and pull policies (§1.7).

use serde::Serialize;

pub const DEFAULT_REGISTRY: &str = "registry.opensuse.org";
pub const DEFAULT_SERVER_IMAGE: &str = "uyuni/server";
pub const DEFAULT_TAG: &str = "latest";
/// The PostgreSQL image of the `db` Deployment (images-today §B).
pub const DEFAULT_DB_IMAGE: &str = "uyuni/server-postgresql";
/// The one-shot PostgreSQL major-upgrade image (images-today §B.4).
pub const DEFAULT_DBUPGRADE_IMAGE: &str = "uyuni/server-database-migration";
/// The hub XML-RPC API image (reference §7.3).
pub const DEFAULT_HUB_XMLRPC_IMAGE: &str = "uyuni/server-hub-xmlrpc-api";
/// The confidential computing attestation image (reference §7.4).
pub const DEFAULT_COCO_IMAGE: &str = "uyuni/server-attestation";
/// The TFTP server, a separate container since server-image 5.2.5; the chart names it
/// `proxy-tftpd` (images-today §A.5, §C.3).
pub const DEFAULT_TFTP_IMAGE: &str = "uyuni/proxy-tftpd";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("image reference {0:?} is not valid: expected [HOST[:PORT]/]PATH[:TAG][@DIGEST]")]
    Invalid(String),
    #[error("image {0:?} has no tag and no fallback tag was given: pass --tag")]
    NoTag(String),
    #[error(
        "the tag given for image {0} is empty: give a tag (for example --tag 2026.04), or leave the flag out for the default `latest`"
    )]
    EmptyTag(String),
    #[error(
        "{tag:?} is not a valid tag for image {image}: {problem} (OCI tags, case-sensitive: [A-Za-z0-9_][A-Za-z0-9._-]{{0,127}}); fix the tag flag (--tag, or the image's own)"
    )]
    InvalidTag {
        image: String,
        tag: String,
        problem: String,
    },
    #[error(
        "pull policy {0:?} is not one of Always, IfNotPresent, Never (case-insensitive): fix --pull-policy"
    )]
    PullPolicy(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl PullPolicy {
    pub fn parse(value: &str) -> Result<Self, ImageError> {
        match value.to_ascii_lowercase().as_str() {
            "always" => Ok(PullPolicy::Always),
            "ifnotpresent" => Ok(PullPolicy::IfNotPresent),
            "never" => Ok(PullPolicy::Never),
            _ => Err(ImageError::PullPolicy(value.to_owned())),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// Whether the first path segment names a registry host: a dotted name, `host:port` or
/// `localhost` (the reference accepted only FQDNs, which broke `localhost:5000`).
fn starts_with_host(name: &str) -> bool {
    let Some((first, _)) = name.split_once('/') else {
        return false;
    };
    first == "localhost" || first.contains('.') || first.contains(':')
}

fn valid_chars(reference: &str) -> bool {
    !reference.is_empty()
        && reference
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/' | ':' | '@'))
        && !reference.starts_with(['/', ':', '@', '.', '-'])
        && !reference.ends_with(['/', ':', '@'])
        && !reference.contains("//")
}

/// Whether `tag` is an OCI tag: `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}` (the distribution spec's
/// "tag" rule, opencontainers/distribution-spec `spec.md`, "Pulling manifests"). Tags are
/// case-sensitive: `FOO` and `foo` are two tags.
fn valid_tag(tag: &str) -> bool {
    let mut chars = tag.chars();
    tag.len() <= MAX_TAG_LEN
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The longest tag the OCI distribution spec allows.
const MAX_TAG_LEN: usize = 128;

/// Why `tag` is not a tag, for the error message.
fn tag_problem(tag: &str) -> String {
    if tag.len() > MAX_TAG_LEN {
        format!(
            "it is {} characters long, and a tag has at most {MAX_TAG_LEN}",
            tag.len()
        )
    } else {
        "a tag starts with a letter, digit or `_` and holds only letters, digits, `_`, `.` and `-`"
            .to_owned()
    }
}

/// Computes the full reference of an image: registry prepended when the name has no host, the
/// fallback tag appended when it has neither tag nor digest. The registry and repository are
/// lower-cased (OCI repository names are lower case, and registry hosts case-insensitive); the
/// tag is kept as given, since OCI tags are case-sensitive, and checked against the OCI rule.
pub fn reference(registry: &str, name: &str, tag: Option<&str>) -> Result<String, ImageError> {
    let name = name.trim();
    let registry = registry.trim().trim_end_matches('/');
    let full = if starts_with_host(name) || registry.is_empty() {
        name.to_owned()
    } else {
        format!("{registry}/{name}")
    };
    if !valid_chars(&full) {
        return Err(ImageError::Invalid(full));
    }
    let (named, digest) = match full.split_once('@') {
        Some((named, digest)) => (named, Some(digest)),
        None => (full.as_str(), None),
    };
    // A tag is after a `:` in the last path segment (an earlier `:` is a registry's port).
    let segment_start = named.rfind('/').map_or(0, |i| i + 1);
    let (repository, own_tag) = match named[segment_start..].find(':') {
        Some(at) => (
            &named[..segment_start + at],
            Some(&named[segment_start + at + 1..]),
        ),
        None => (named, None),
    };
    let repository = repository.to_ascii_lowercase();
    let digest = digest.map(str::to_ascii_lowercase);
    let checked = |t: &str| {
        if valid_tag(t) {
            Ok(t.to_owned())
        } else {
            Err(ImageError::InvalidTag {
                image: repository.clone(),
                tag: t.to_owned(),
                problem: tag_problem(t),
            })
        }
    };
    let tag = match (own_tag, &digest) {
        (Some(own), _) => Some(checked(own)?),
        (None, Some(_)) => None,
        (None, None) => match tag.map(str::trim) {
            Some("") => return Err(ImageError::EmptyTag(repository)),
            Some(t) => Some(checked(t)?),
            None => return Err(ImageError::NoTag(repository)),
        },
    };
    let mut out = repository;
    if let Some(tag) = tag {
        out.push(':');
        out.push_str(&tag);
    }
    if let Some(digest) = digest {
        out.push('@');
        out.push_str(&digest);
    }
    Ok(out)
}

/// The tag of an image reference (`registry/name:tag[@digest]`), if it has one; a port in
/// the registry part is not a tag.
pub fn tag(reference: &str) -> Option<String> {
    let name = reference.split('@').next().unwrap_or(reference);
    let last = name.rsplit('/').next().unwrap_or(name);
    last.split_once(':')
        .map(|(_, t)| t.to_owned())
        .filter(|t| !t.is_empty())
}

/// The registry host of a full image reference (as [`reference()`] returns it): its first path
/// segment when that names a host, else Docker Hub's.
pub fn host(reference: &str) -> &str {
    match reference.split_once('/') {
        Some((first, _)) if starts_with_host(reference) => first,
        _ => "docker.io",
    }
}

/// The first release line whose images a migration can target: the server image runs its own
/// setup, schema update and reindex at start, and the database image is PostgreSQL 18
/// (images-today §E.4). Kept here, the one place the rule lives.
pub const FIRST_SUPPORTED_TARGET: (u32, u32) = (5, 2);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{role} image {reference} is release {found}, older than {}.{}: its images do not set the server up by themselves and run PostgreSQL 16, which this tool does not target; use {}.{} or later (or the default `latest`) with --tag{}",
    FIRST_SUPPORTED_TARGET.0, FIRST_SUPPORTED_TARGET.1, FIRST_SUPPORTED_TARGET.0, FIRST_SUPPORTED_TARGET.1,
    if *role == "database" { " or --pgsql-tag" } else { "" }
)]
pub struct UnsupportedTarget {
    pub role: &'static str,
    pub reference: String,
    pub found: String,
}

/// The `MAJOR.MINOR[.PATCH…]` release of a tag like `5.1.3`, if it is one. Other tags (`latest`,
/// Uyuni's `2025.10`, digests) say nothing certain about the release and return `None`.
fn release_of(reference: &str) -> Option<(u32, u32)> {
    if reference.contains('@') {
        return None;
    }
    let last = reference.rsplit('/').next()?;
    let (_, tag) = last.split_once(':')?;
    let mut parts = tag.split(['.', '-']);
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    // Uyuni's calendar tags (YYYY.MM) are not release numbers.
    (major < 1000).then_some((major, minor))
}

/// Refuses target images that certainly predate [`FIRST_SUPPORTED_TARGET`]; everything else is
/// accepted (an image whose tag says nothing is checked by its behaviour at start).
pub fn check_target(role: &'static str, reference: &str) -> Result<(), UnsupportedTarget> {
    match release_of(reference) {
        Some(found) if found < FIRST_SUPPORTED_TARGET => Err(UnsupportedTarget {
            role,
            reference: reference.to_owned(),
            found: format!("{}.{}", found.0, found.1),
        }),
        _ => Ok(()),
    }
}
