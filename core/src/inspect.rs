//! What an image inspection Job reported about an image (`core/scripts/image-inspect.sh`): its
//! product and release, and its PostgreSQL major; and what the server image check reported
//! (`core/scripts/image-check-server.sh`): whether the image copies the CA into the Salt file
//! root at start. The Job writes `key=value` lines into its
//! container's termination message; the run copies them onto the Job as
//! [`crate::labels::INSPECTION_ANNOTATION`], where every later plan reads them.
//!
//! Parsing takes any text and never panics: an unknown key is ignored, a value that is not
//! what its key needs is left out (the planner then says which value it is missing).

use serde::Serialize;

use crate::release::Release;

/// The product whose release file an image carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Product {
    Uyuni,
    SuseManager,
}

impl Product {
    pub fn name(self) -> &'static str {
        match self {
            Product::Uyuni => "Uyuni",
            Product::SuseManager => "SUSE Multi-Linux Manager",
        }
    }
}

/// Whether a server image copies the CA into the Salt file root at start (the server image
/// check's `ca_copy`; [`crate::scripts::image_check::SALT_CA_FILE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CaCopy {
    /// A start script names the file: `15-setup-trust-store.sh` copies the trust anchor there.
    SaltFileRoot,
    /// No start script names it: the image leaves whatever its package put there.
    None,
}

/// One image's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Inspection {
    pub product: Option<Product>,
    /// The release as the image spells it.
    pub release: Option<String>,
    pub pg_major: Option<u32>,
    /// The server image check's `ca_copy`.
    pub ca_copy: Option<CaCopy>,
    /// A dry run's stand-in: the Job has not run, nothing is known yet.
    pub placeholder: bool,
}

/// What a dry run's model of an inspection Job writes, for the planner to know the report is a
/// stand-in.
pub const PLACEHOLDER: &str = "placeholder=true";

impl Inspection {
    /// Reads the `key=value` lines of a report.
    pub fn parse(text: &str) -> Inspection {
        let mut out = Inspection {
            product: None,
            release: None,
            pg_major: None,
            ca_copy: None,
            placeholder: false,
        };
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let value = value.trim();
            match key.trim() {
                "product" => {
                    out.product = match value {
                        "uyuni" => Some(Product::Uyuni),
                        "suse-manager" => Some(Product::SuseManager),
                        _ => None,
                    }
                }
                "release" if !value.is_empty() && value.len() <= 64 => {
                    out.release = Some(value.to_owned());
                }
                "pg_major" => out.pg_major = crate::pg::parse_major(value).ok(),
                "ca_copy" => {
                    out.ca_copy = match value {
                        "salt-file-root" => Some(CaCopy::SaltFileRoot),
                        "none" => Some(CaCopy::None),
                        _ => None,
                    }
                }
                "placeholder" => out.placeholder = value == "true",
                _ => {}
            }
        }
        out
    }

    /// The release, read in the order `upgrade` compares releases in.
    pub fn parsed_release(&self) -> Option<Result<Release, crate::release::ReleaseError>> {
        self.release.as_deref().map(Release::parse)
    }
}
