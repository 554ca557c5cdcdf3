//! Validation of written objects: built-in kinds must deserialize as their k8s-openapi type
//! (what the real API server's decoding catches), then pass the rules of the API server's own
//! validation that the kinds this project writes must satisfy, with upstream's field paths and
//! messages (pkg/apis/core/validation/validation.go, pkg/apis/apps/validation/validation.go,
//! pkg/apis/batch/validation/validation.go and staging/src/k8s.io/apimachinery/pkg/util/
//! validation/validation.go in kubernetes/kubernetes). What is not checked is listed in
//! testdata/README.md.

use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use k8s_openapi::api;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;

/// A rejected object: `Err(message)` for undecodable objects, `Ok(unknown_fields)` otherwise.
fn roundtrip<T: DeserializeOwned + Serialize>(obj: &Value) -> Result<Vec<String>, String> {
    let typed: T = serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let mut unknown = Vec::new();
    unknown_fields(obj, &back, "", &mut unknown);
    Ok(unknown)
}

/// Fields present (and not null) in `input` but lost by the typed round trip: the fields the
/// type does not declare.
fn unknown_fields(input: &Value, back: &Value, path: &str, out: &mut Vec<String>) {
    match (input, back) {
        (Value::Object(i), Value::Object(b)) => {
            for (k, v) in i {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match b.get(k) {
                    Some(bv) => unknown_fields(v, bv, &p, out),
                    None if !v.is_null() => out.push(p),
                    None => {}
                }
            }
        }
        (Value::Array(i), Value::Array(b)) => {
            for (n, (iv, bv)) in i.iter().zip(b).enumerate() {
                unknown_fields(iv, bv, &format!("{path}[{n}]"), out);
            }
        }
        _ => {}
    }
}

/// Decodes a built-in object as its k8s-openapi type. Returns the unknown fields, or the
/// decoding error. Custom resources (and kinds not listed) decode as anything.
pub fn decode(group: &str, kind: &str, obj: &Value) -> Result<Vec<String>, String> {
    match (group, kind) {
        ("", "Namespace") => roundtrip::<api::core::v1::Namespace>(obj),
        ("", "ConfigMap") => roundtrip::<api::core::v1::ConfigMap>(obj),
        ("", "Secret") => roundtrip::<api::core::v1::Secret>(obj),
        ("", "Service") => roundtrip::<api::core::v1::Service>(obj),
        ("", "ServiceAccount") => roundtrip::<api::core::v1::ServiceAccount>(obj),
        ("", "PersistentVolumeClaim") => roundtrip::<api::core::v1::PersistentVolumeClaim>(obj),
        ("", "PersistentVolume") => roundtrip::<api::core::v1::PersistentVolume>(obj),
        ("", "Pod") => roundtrip::<api::core::v1::Pod>(obj),
        ("", "Node") => roundtrip::<api::core::v1::Node>(obj),
        ("", "Event") => roundtrip::<api::core::v1::Event>(obj),
        ("apps", "Deployment") => roundtrip::<api::apps::v1::Deployment>(obj),
        ("batch", "Job") => roundtrip::<api::batch::v1::Job>(obj),
        ("networking.k8s.io", "Ingress") => roundtrip::<api::networking::v1::Ingress>(obj),
        ("networking.k8s.io", "NetworkPolicy") => {
            roundtrip::<api::networking::v1::NetworkPolicy>(obj)
        }
        ("networking.k8s.io", "IngressClass") => {
            roundtrip::<api::networking::v1::IngressClass>(obj)
        }
        ("rbac.authorization.k8s.io", "Role") => roundtrip::<api::rbac::v1::Role>(obj),
        ("rbac.authorization.k8s.io", "RoleBinding") => {
            roundtrip::<api::rbac::v1::RoleBinding>(obj)
        }
        ("coordination.k8s.io", "Lease") => roundtrip::<api::coordination::v1::Lease>(obj),
        ("storage.k8s.io", "StorageClass") => roundtrip::<api::storage::v1::StorageClass>(obj),
        ("authorization.k8s.io", "SelfSubjectAccessReview") => {
            roundtrip::<api::authorization::v1::SelfSubjectAccessReview>(obj)
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            roundtrip::<apiext::CustomResourceDefinition>(obj)
        }
        _ => Ok(Vec::new()),
    }
}

/// Whether a path as `unknown_fields` writes it (`a.b[0].c`) exists in `v`.
pub fn path_present(v: &Value, path: &str) -> bool {
    let mut cur = v;
    for part in path.split('.') {
        let (key, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        cur = match cur.get(key) {
            Some(next) => next,
            None => return false,
        };
        for index in indexes.split('[').filter(|s| !s.is_empty()) {
            let Some(n) = index.trim_end_matches(']').parse::<usize>().ok() else {
                return false;
            };
            cur = match cur.get(n) {
                Some(next) => next,
                None => return false,
            };
        }
    }
    true
}

// ---------------------------------------------------------------------------------------------
// Field errors, as Kubernetes formats them.
//
// Upstream: staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go (`ErrorBody`,
// the `ErrorType` strings) and staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go
// (`NewInvalid`: one `details.causes` entry per error, reason = the error type, message = the
// error body). kubectl prints `field: body` per cause, so both must read like upstream's.

/// One validation error: the field path, the cause reason and the body (`Duplicate value:
/// "jmx"`), exactly as the real API server writes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    /// The `details.causes[].reason`: `FieldValueInvalid`, `FieldValueDuplicate`, …
    pub reason: &'static str,
    pub body: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body)
    }
}

/// A bad value as Go's `%q` (strings), `%v` (numbers) or `%#v` (anything else) prints it.
#[derive(Debug, Clone)]
pub enum Bad {
    Str(String),
    Int(i64),
    /// Already formatted (a Go `%#v` rendering, or JSON where that cannot be reproduced).
    Raw(String),
}

impl Bad {
    fn render(&self) -> String {
        match self {
            Bad::Str(s) => go_quote(s),
            Bad::Int(n) => n.to_string(),
            Bad::Raw(r) => r.clone(),
        }
    }
}

fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

fn with_detail(mut s: String, detail: &str) -> String {
    if !detail.is_empty() {
        s.push_str(": ");
        s.push_str(detail);
    }
    s
}

impl FieldError {
    pub fn required(field: impl Into<String>, detail: &str) -> FieldError {
        FieldError {
            field: field.into(),
            reason: "FieldValueRequired",
            body: with_detail("Required value".into(), detail),
        }
    }

    pub fn invalid(field: impl Into<String>, value: Bad, detail: &str) -> FieldError {
        FieldError {
            field: field.into(),
            reason: "FieldValueInvalid",
            body: with_detail(format!("Invalid value: {}", value.render()), detail),
        }
    }

    pub fn duplicate(field: impl Into<String>, value: Bad) -> FieldError {
        FieldError {
            field: field.into(),
            reason: "FieldValueDuplicate",
            body: format!("Duplicate value: {}", value.render()),
        }
    }

    pub fn not_found(field: impl Into<String>, value: &str) -> FieldError {
        FieldError {
            field: field.into(),
            reason: "FieldValueNotFound",
            body: format!("Not found: {}", go_quote(value)),
        }
    }

    /// `field.NotSupported`: the supported values quoted, in the order given.
    pub fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> FieldError {
        let list: Vec<String> = supported.iter().map(|v| go_quote(v)).collect();
        FieldError {
            field: field.into(),
            reason: "FieldValueNotSupported",
            body: with_detail(
                format!("Unsupported value: {}", go_quote(value)),
                &format!("supported values: {}", list.join(", ")),
            ),
        }
    }

    pub fn forbidden(field: impl Into<String>, detail: &str) -> FieldError {
        FieldError {
            field: field.into(),
            reason: "FieldValueForbidden",
            body: with_detail("Forbidden".into(), detail),
        }
    }

    pub fn too_long(field: impl Into<String>, detail: &str) -> FieldError {
        FieldError {
            field: field.into(),
            reason: "FieldValueTooLong",
            body: with_detail("Too long".into(), detail),
        }
    }

    /// An error whose body the caller wrote (decoding errors, strict field validation).
    pub fn custom(field: impl Into<String>, reason: &'static str, body: String) -> FieldError {
        FieldError {
            field: field.into(),
            reason,
            body,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The string formats. Upstream: staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go
// and staging/src/k8s.io/apimachinery/pkg/api/validate/content/{kube,identifier}.go. The
// messages are those of the releases the sim reports (1.27–1.33: `MaxLenError` still says
// "characters"; newer releases say "bytes").

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const ENV_VAR_NAME_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn matches_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.split('.').all(matches_dns1123_label)
}

/// `IsDNS1123Label`.
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters \
                 or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `IsDNS1035Label`.
pub fn dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    let ok = matches_dns1123_label(value) && value.as_bytes()[0].is_ascii_lowercase();
    if !ok {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start \
             with an alphabetic character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// Whether `name` is a DNS-1123 subdomain (what most kinds require of metadata.name).
pub fn is_dns_subdomain(name: &str) -> bool {
    dns1123_subdomain(name).is_empty()
}

/// `path.IsValidPathSegmentName` (RBAC object names).
fn path_segment_name(value: &str) -> Vec<String> {
    if value == "." || value == ".." {
        return vec![format!("may not be '{value}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|c| value.contains(*c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

fn matches_label_key_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `IsQualifiedName` as released up to 1.33 (newer releases moved it to
/// `content.IsLabelKey` and say "a valid label key" where this says "a qualified name").
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let name_err = regex_error(
        "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with \
         an alphanumeric character",
        LABEL_KEY_FMT,
        &["MyName", "my.name", "123-abc"],
    );
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {name_err} with an optional DNS subdomain prefix and '/' \
                 (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !matches_label_key_name(name) {
        errs.push(format!("name part {name_err}"));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !value.is_empty() && !matches_label_key_name(value) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', \
             '_' or '.', and must start and end with an alphanumeric character",
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `IsValidPortName`: an IANA service name (RFC 6335), lower case only.
pub fn port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    if port.is_empty()
        || !port
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string(),
        );
    }
    if !port.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

/// `IsValidPortNum`.
fn port_num(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec!["must be between 1 and 65535, inclusive".to_string()]
    }
}

fn ch_dir_prefix(value: &str) -> Vec<String> {
    if value == "." {
        vec!["must not be '.'".to_string()]
    } else if value == ".." {
        vec!["must not be '..'".to_string()]
    } else if value.starts_with("..") {
        vec!["must not start with '..'".to_string()]
    } else {
        Vec::new()
    }
}

/// `IsEnvVarName` (before the RelaxedEnvironmentVariableValidation gate).
pub fn env_var_name(value: &str) -> Vec<String> {
    let b = value.as_bytes();
    let first_ok = b
        .first()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, b'-' | b'.' | b'_'));
    let rest_ok = b
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
    let mut errs = Vec::new();
    if !(first_ok && rest_ok) {
        errs.push(regex_error(
            "a valid environment variable name must consist of alphabetic characters, digits, \
             '_', '-', or '.', and must not start with a digit",
            ENV_VAR_NAME_FMT,
            &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
        ));
    }
    errs.extend(ch_dir_prefix(value));
    errs
}

/// `IsRelaxedEnvVarName`: beta and on by default from Kubernetes 1.32, GA in 1.34.
pub fn relaxed_env_var_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.is_empty() {
        errs.push("environment variable name must be non-empty".to_string());
    }
    if value.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        errs.push(
            "a valid environment variable name must consist only of printable ASCII characters \
             other than '='"
                .to_string(),
        );
    }
    errs
}

/// `IsConfigMapKey`.
fn config_map_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if value.is_empty()
        || !value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'))
    {
        errs.push(regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    errs.extend(ch_dir_prefix(value));
    errs
}

/// A resource quantity (`10Gi`, `500m`, `1e3`) as its value, or `None` when it does not parse.
/// Upstream: staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go (`ParseQuantity`).
pub fn parse_quantity(s: &str) -> Option<f64> {
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1.0, &s[1..]),
        b'-' => (-1.0, &s[1..]),
        _ => (1.0, s),
    };
    let split = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(split);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return None;
    }
    let n: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp if exp.starts_with(['e', 'E']) => {
            let e: i32 = exp[1..].parse().ok()?;
            10f64.powi(e)
        }
        _ => return None,
    };
    Some(sign * n * factor)
}

/// The message the API server's decoder gives for a malformed quantity.
pub const QUANTITY_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

// ---------------------------------------------------------------------------------------------
// Go renderings of the few structured values the messages print.

/// `%#v` of a `map[string]string` (Go sorts map keys when printing).
// pub for the unit tests in tests/unit/
#[doc(hidden)]
pub fn go_string_map(v: &Value) -> String {
    match v.as_object() {
        None => "map[string]string(nil)".to_string(),
        Some(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let parts: Vec<String> = entries
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}:{}",
                        go_quote(k),
                        go_quote(v.as_str().unwrap_or_default())
                    )
                })
                .collect();
            format!("map[string]string{{{}}}", parts.join(", "))
        }
    }
}

/// `%#v` of a `metav1.LabelSelector`.
// pub for the unit tests in tests/unit/
#[doc(hidden)]
pub fn go_label_selector(v: &Value) -> String {
    let exprs = match v["matchExpressions"].as_array() {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(list) => {
            let items: Vec<String> = list
                .iter()
                .map(|e| {
                    let values = match e["values"].as_array() {
                        None => "[]string(nil)".to_string(),
                        Some(vs) => format!(
                            "[]string{{{}}}",
                            vs.iter()
                                .map(|v| go_quote(v.as_str().unwrap_or_default()))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    };
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{values}}}",
                        go_quote(e["key"].as_str().unwrap_or_default()),
                        go_quote(e["operator"].as_str().unwrap_or_default()),
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{exprs}}}",
        go_string_map(&v["matchLabels"])
    )
}

/// Whether a `LabelSelector` object selects these labels (`metav1.LabelSelectorAsSelector`).
pub fn selector_matches(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_labels = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let by_exprs = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e["operator"].as_str() {
                Some("In") => label(key).is_some_and(|l| values.contains(&l)),
                Some("NotIn") => label(key).is_none_or(|l| !values.contains(&l)),
                Some("Exists") => label(key).is_some(),
                Some("DoesNotExist") => label(key).is_none(),
                _ => false,
            }
        });
    by_labels && by_exprs
}

// ---------------------------------------------------------------------------------------------
// Validation of objects.

/// What the rules depend on besides the object.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The minor version the sim reports: feature gates that relaxed a rule follow it.
    pub server_minor: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options { server_minor: 33 }
    }
}

type Errs = Vec<FieldError>;

fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn invalid_each(errs: &mut Errs, field: &str, value: &str, msgs: Vec<String>) {
    for m in msgs {
        errs.push(FieldError::invalid(field, Bad::Str(value.to_string()), &m));
    }
}

/// `ValidateLabels` (staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go).
fn labels(labels: &Value, path: &str, errs: &mut Errs) {
    let Some(m) = labels.as_object() else { return };
    for (k, v) in m {
        invalid_each(errs, path, k, qualified_name(k));
        if let Some(v) = v.as_str() {
            invalid_each(errs, path, v, label_value(v));
        } else {
            errs.push(FieldError::invalid(
                path,
                Bad::Raw(v.to_string()),
                &format!("value of {k:?} must be a string"),
            ));
        }
    }
}

/// `ValidateAnnotations` (staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go):
/// keys are qualified names compared in lower case; the total is at most 256 KiB.
fn annotations(annotations: &Value, path: &str, errs: &mut Errs) {
    let Some(m) = annotations.as_object() else {
        return;
    };
    let mut total = 0usize;
    for (k, v) in m {
        invalid_each(errs, path, k, qualified_name(&k.to_lowercase()));
        match v.as_str() {
            Some(v) => total += k.len() + v.len(),
            None => errs.push(FieldError::invalid(
                path,
                Bad::Raw(v.to_string()),
                &format!("value of {k:?} must be a string"),
            )),
        }
    }
    if total > 256 * 1024 {
        errs.push(FieldError::too_long(path, "must have at most 262144 bytes"));
    }
}

/// The name rule of each kind: `ValidateNamespaceName` (DNS-1123 label),
/// `ValidateServiceName` (DNS-1035 label), `ValidateRBACName` (path segment), and
/// `NameIsDNSSubdomain` for the rest, custom resources included
/// (pkg/apis/core/validation/validation.go, pkg/apis/rbac/validation/validation.go).
fn name_rule(group: &str, kind: &str) -> fn(&str) -> Vec<String> {
    match (group, kind) {
        ("", "Namespace") => dns1123_label,
        ("", "Service") => dns1035_label,
        ("rbac.authorization.k8s.io", _) => path_segment_name,
        _ => dns1123_subdomain,
    }
}

/// `ValidateObjectMeta` for an object's own metadata.
fn object_meta(group: &str, kind: &str, obj: &Value, errs: &mut Errs) {
    let meta = &obj["metadata"];
    match s(meta, "name") {
        None | Some("") => errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )),
        Some(name) => invalid_each(errs, "metadata.name", name, name_rule(group, kind)(name)),
    }
    labels(&meta["labels"], "metadata.labels", errs);
    annotations(&meta["annotations"], "metadata.annotations", errs);
}

/// `ValidateVolumes`: names are unique DNS-1123 labels; each volume has exactly one source.
/// Returns the names of the volumes that validated (mounts may only name those).
fn volumes(vols: &[Value], path: &str, errs: &mut Errs) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (i, vol) in vols.iter().enumerate() {
        let idx = format!("{path}[{i}]");
        let name_path = format!("{idx}.name");
        let mut el = Vec::new();
        let sources: Vec<&String> = vol
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, v)| k.as_str() != "name" && !v.is_null())
            .map(|(k, _)| k)
            .collect();
        if sources.is_empty() {
            el.push(FieldError::required(&idx, "must specify a volume type"));
        }
        for extra in sources.iter().skip(1) {
            el.push(FieldError::forbidden(
                format!("{idx}.{extra}"),
                "may not specify more than 1 volume type",
            ));
        }
        let name = s(vol, "name").unwrap_or_default();
        if name.is_empty() {
            el.push(FieldError::required(&name_path, ""));
        } else {
            invalid_each(&mut el, &name_path, name, dns1123_label(name));
        }
        if names.iter().any(|n| n == name) {
            el.push(FieldError::duplicate(
                &name_path,
                Bad::Str(name.to_string()),
            ));
        }
        if el.is_empty() {
            names.push(name.to_string());
        } else {
            errs.extend(el);
        }
    }
    names
}

/// `validateContainerPorts`: names are unique IANA service names, ports in range, protocols
/// known (TCP when absent: the server defaults it).
fn container_ports(ports: &[Value], path: &str, errs: &mut Errs) {
    let mut names: Vec<&str> = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let idx = format!("{path}[{i}]");
        if let Some(name) = s(port, "name").filter(|n| !n.is_empty()) {
            let msgs = port_name(name);
            if !msgs.is_empty() {
                invalid_each(errs, &format!("{idx}.name"), name, msgs);
            } else if names.contains(&name) {
                errs.push(FieldError::duplicate(
                    format!("{idx}.name"),
                    Bad::Str(name.to_string()),
                ));
            } else {
                names.push(name);
            }
        }
        match port["containerPort"].as_i64() {
            None | Some(0) => errs.push(FieldError::required(format!("{idx}.containerPort"), "")),
            Some(n) => {
                for m in port_num(n) {
                    errs.push(FieldError::invalid(
                        format!("{idx}.containerPort"),
                        Bad::Int(n),
                        &m,
                    ));
                }
            }
        }
        if let Some(n) = port["hostPort"].as_i64().filter(|n| *n != 0) {
            for m in port_num(n) {
                errs.push(FieldError::invalid(
                    format!("{idx}.hostPort"),
                    Bad::Int(n),
                    &m,
                ));
            }
        }
        if let Some(p) = s(port, "protocol")
            && !PROTOCOLS.contains(&p)
        {
            errs.push(FieldError::not_supported(
                format!("{idx}.protocol"),
                p,
                &PROTOCOLS,
            ));
        }
    }
}

/// `supportedPortProtocols`, as `sets.List` sorts it.
const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

/// `ValidateEnv`.
fn env(vars: &[Value], path: &str, opts: &Options, errs: &mut Errs) {
    for (i, ev) in vars.iter().enumerate() {
        let idx = format!("{path}[{i}]");
        match s(ev, "name") {
            None | Some("") => errs.push(FieldError::required(format!("{idx}.name"), "")),
            Some(name) => {
                let msgs = if opts.server_minor >= 32 {
                    relaxed_env_var_name(name)
                } else {
                    env_var_name(name)
                };
                invalid_each(errs, &format!("{idx}.name"), name, msgs);
            }
        }
        let Some(from) = ev.get("valueFrom").filter(|v| !v.is_null()) else {
            continue;
        };
        let from_path = format!("{idx}.valueFrom");
        let sources = [
            "fieldRef",
            "resourceFieldRef",
            "configMapKeyRef",
            "secretKeyRef",
        ]
        .iter()
        .filter(|k| from.get(**k).is_some_and(|v| !v.is_null()))
        .count();
        let empty = Bad::Str(String::new());
        if sources == 0 {
            errs.push(FieldError::invalid(
                &from_path,
                empty,
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or \
                 `secretKeyRef`",
            ));
        } else if s(ev, "value").is_some_and(|v| !v.is_empty()) {
            errs.push(FieldError::invalid(
                &from_path,
                empty,
                "may not be specified when `value` is not empty",
            ));
        } else if sources > 1 {
            errs.push(FieldError::invalid(
                &from_path,
                empty,
                "may not have more than one field specified at a time",
            ));
        }
    }
}

/// `ValidateVolumeMounts`. Upstream reports subPath problems at `volumeMounts.subPath` (the
/// list's path, not the item's); so does this.
fn volume_mounts(mounts: &[Value], path: &str, volumes: &[String], errs: &mut Errs) {
    let mut mount_points: Vec<&str> = Vec::new();
    for (i, m) in mounts.iter().enumerate() {
        let idx = format!("{path}[{i}]");
        let name = s(m, "name").unwrap_or_default();
        if name.is_empty() {
            errs.push(FieldError::required(format!("{idx}.name"), ""));
        }
        if !volumes.iter().any(|v| v == name) {
            errs.push(FieldError::not_found(format!("{idx}.name"), name));
        }
        let mount_path = s(m, "mountPath").unwrap_or_default();
        if mount_path.is_empty() {
            errs.push(FieldError::required(format!("{idx}.mountPath"), ""));
        }
        if mount_points.contains(&mount_path) {
            errs.push(FieldError::invalid(
                format!("{idx}.mountPath"),
                Bad::Str(mount_path.to_string()),
                "must be unique",
            ));
        }
        mount_points.push(mount_path);
        for key in ["subPath", "subPathExpr"] {
            let Some(sub) = s(m, key).filter(|p| !p.is_empty()) else {
                continue;
            };
            let sub_path = format!("{path}.{key}");
            if sub.starts_with('/') {
                errs.push(FieldError::invalid(
                    &sub_path,
                    Bad::Str(sub.to_string()),
                    "must be a relative path",
                ));
            }
            if sub.split('/').any(|p| p == "..") {
                errs.push(FieldError::invalid(
                    &sub_path,
                    Bad::Str(sub.to_string()),
                    "must not contain '..'",
                ));
            }
        }
    }
}

/// `ValidatePortNumOrName`.
fn port_num_or_name(port: &Value, path: &str, errs: &mut Errs) {
    match port {
        Value::String(name) => invalid_each(errs, path, name, port_name(name)),
        other => {
            let n = other.as_i64().unwrap_or(0);
            for m in port_num(n) {
                errs.push(FieldError::invalid(path, Bad::Int(n), &m));
            }
        }
    }
}

/// `validateProbe` / `validateHandler`: exactly one of exec, httpGet, tcpSocket, grpc.
fn probe(probe: &Value, path: &str, needs_one_success: bool, errs: &mut Errs) {
    if !probe.is_object() {
        return;
    }
    let mut handlers = 0;
    for key in ["exec", "httpGet", "tcpSocket", "grpc"] {
        let Some(h) = probe.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        let hpath = format!("{path}.{key}");
        if handlers > 0 {
            errs.push(FieldError::forbidden(
                hpath,
                "may not specify more than 1 handler type",
            ));
            continue;
        }
        handlers += 1;
        match key {
            "exec" if arr(h, "command").is_empty() => {
                errs.push(FieldError::required(format!("{hpath}.command"), ""));
            }
            "httpGet" => {
                port_num_or_name(&h["port"], &format!("{hpath}.port"), errs);
                if let Some(scheme) = s(h, "scheme")
                    && !["HTTP", "HTTPS"].contains(&scheme)
                {
                    errs.push(FieldError::not_supported(
                        format!("{hpath}.scheme"),
                        scheme,
                        &["HTTP", "HTTPS"],
                    ));
                }
            }
            "tcpSocket" | "grpc" => port_num_or_name(&h["port"], &format!("{hpath}.port"), errs),
            _ => {}
        }
    }
    if handlers == 0 {
        errs.push(FieldError::required(path, "must specify a handler type"));
    }
    for key in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        if let Some(n) = probe[key].as_i64().filter(|n| *n < 0) {
            errs.push(FieldError::invalid(
                format!("{path}.{key}"),
                Bad::Int(n),
                "must be greater than or equal to 0",
            ));
        }
    }
    if needs_one_success && let Some(n) = probe["successThreshold"].as_i64().filter(|n| *n != 1) {
        errs.push(FieldError::invalid(
            format!("{path}.successThreshold"),
            Bad::Int(n),
            "must be 1",
        ));
    }
}

/// `validateContainerCommon` plus the per-list rules of `validateContainers` and
/// `validateInitContainers`: names are DNS-1123 labels, unique across regular and init
/// containers (a clash is reported on the init container).
fn containers(
    list: &[Value],
    path: &str,
    volumes: &[String],
    taken: &mut Vec<String>,
    init: bool,
    opts: &Options,
    errs: &mut Errs,
) {
    for (i, c) in list.iter().enumerate() {
        let idx = format!("{path}[{i}]");
        let name = s(c, "name").unwrap_or_default();
        if name.is_empty() {
            errs.push(FieldError::required(format!("{idx}.name"), ""));
        } else {
            invalid_each(errs, &format!("{idx}.name"), name, dns1123_label(name));
        }
        if s(c, "image").is_none_or(str::is_empty) {
            errs.push(FieldError::required(format!("{idx}.image"), ""));
        }
        container_ports(arr(c, "ports"), &format!("{idx}.ports"), errs);
        env(arr(c, "env"), &format!("{idx}.env"), opts, errs);
        volume_mounts(
            arr(c, "volumeMounts"),
            &format!("{idx}.volumeMounts"),
            volumes,
            errs,
        );
        if taken.iter().any(|t| t == name) {
            errs.push(FieldError::duplicate(
                format!("{idx}.name"),
                Bad::Str(name.to_string()),
            ));
        } else if !name.is_empty() {
            taken.push(name.to_string());
        }
        let restartable = s(c, "restartPolicy") == Some("Always");
        for (key, one_success) in [
            ("livenessProbe", true),
            ("readinessProbe", false),
            ("startupProbe", true),
        ] {
            let Some(p) = c.get(key).filter(|v| !v.is_null()) else {
                continue;
            };
            if init && !restartable {
                errs.push(FieldError::forbidden(
                    format!("{idx}.{key}"),
                    "may not be set for init containers without restartPolicy=Always",
                ));
            } else {
                probe(p, &format!("{idx}.{key}"), one_success, errs);
            }
        }
    }
}

/// `ValidatePodSpec`, the parts our objects can get wrong. `restartPolicy` is `Always` when
/// absent (the server defaults it before validating).
fn pod_spec(spec: &Value, path: &str, opts: &Options, errs: &mut Errs) {
    let vols = volumes(arr(spec, "volumes"), &format!("{path}.volumes"), errs);
    let regular = arr(spec, "containers");
    let mut taken = Vec::new();
    if regular.is_empty() {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
    } else {
        containers(
            regular,
            &format!("{path}.containers"),
            &vols,
            &mut taken,
            false,
            opts,
            errs,
        );
    }
    containers(
        arr(spec, "initContainers"),
        &format!("{path}.initContainers"),
        &vols,
        &mut taken,
        true,
        opts,
        errs,
    );
    let policy = restart_policy(spec);
    if !["Always", "OnFailure", "Never"].contains(&policy) {
        errs.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            policy,
            &["Always", "OnFailure", "Never"],
        ));
    }
}

fn restart_policy(spec: &Value) -> &str {
    s(spec, "restartPolicy")
        .filter(|p| !p.is_empty())
        .unwrap_or("Always")
}

/// `ValidatePodTemplateSpec`: template labels and annotations are reported at
/// `template.labels` / `template.annotations` (no `metadata`), as upstream does.
fn pod_template(template: &Value, path: &str, opts: &Options, errs: &mut Errs) {
    labels(
        &template["metadata"]["labels"],
        &format!("{path}.labels"),
        errs,
    );
    annotations(
        &template["metadata"]["annotations"],
        &format!("{path}.annotations"),
        errs,
    );
    pod_spec(&template["spec"], &format!("{path}.spec"), opts, errs);
}

/// `ValidateLabelSelector`: the labels it matches must be valid labels.
fn label_selector(selector: &Value, path: &str, errs: &mut Errs) {
    labels(
        &selector["matchLabels"],
        &format!("{path}.matchLabels"),
        errs,
    );
    for (i, e) in arr(selector, "matchExpressions").iter().enumerate() {
        let idx = format!("{path}.matchExpressions[{i}]");
        let op = s(e, "operator").unwrap_or_default();
        let values = arr(e, "values");
        match op {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                format!("{idx}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
                format!("{idx}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.push(FieldError::invalid(
                format!("{idx}.operator"),
                Bad::Str(other.to_string()),
                "not a valid selector operator",
            )),
        }
        let key = s(e, "key").unwrap_or_default();
        invalid_each(errs, &format!("{idx}.key"), key, qualified_name(key));
    }
}

/// pkg/apis/apps/validation/validation.go `ValidateDeploymentSpec` and
/// `ValidatePodTemplateSpecForReplicaSet`.
fn deployment(obj: &Value, opts: &Options, errs: &mut Errs) {
    let spec = &obj["spec"];
    let selector = &spec["selector"];
    if !selector.is_object() {
        errs.push(FieldError::required("spec.selector", ""));
    } else {
        label_selector(selector, "spec.selector", errs);
        let n = selector["matchLabels"].as_object().map_or(0, |m| m.len())
            + arr(selector, "matchExpressions").len();
        if n == 0 {
            errs.push(FieldError::invalid(
                "spec.selector",
                Bad::Raw(go_label_selector(selector)),
                "empty selector is invalid for deployment",
            ));
        }
    }
    if let Some(n) = spec["replicas"].as_i64().filter(|n| *n < 0) {
        errs.push(FieldError::invalid(
            "spec.replicas",
            Bad::Int(n),
            "must be greater than or equal to 0",
        ));
    }
    let template = &spec["template"];
    let template_labels = &template["metadata"]["labels"];
    // A missing selector selects nothing (`LabelSelectorAsSelector(nil)` is
    // `labels.Nothing()`), so upstream reports the mismatch too; an empty one selects all.
    if !selector.is_object() || !selector_matches(selector, template_labels) {
        errs.push(FieldError::invalid(
            "spec.template.metadata.labels",
            Bad::Raw(go_string_map(template_labels)),
            "`selector` does not match template `labels`",
        ));
    }
    pod_template(template, "spec.template", opts, errs);
    let policy = restart_policy(&template["spec"]);
    if policy != "Always" {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            policy,
            &["Always"],
        ));
    }
}

/// pkg/apis/batch/validation/validation.go `validateJobSpec`.
fn job(obj: &Value, opts: &Options, errs: &mut Errs) {
    let template = &obj["spec"]["template"];
    pod_template(template, "spec.template", opts, errs);
    let policy = restart_policy(&template["spec"]);
    if !["OnFailure", "Never"].contains(&policy) {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            policy,
            &["OnFailure", "Never"],
        ));
    }
}

/// `%#v` of the `core.ServicePort{Protocol, Port}` key upstream reports duplicates with.
fn go_service_port_key(protocol: &str, port: i64) -> String {
    format!(
        "core.ServicePort{{Name:\"\", Protocol:{}, AppProtocol:(*string)(nil), Port:{port}, \
         TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
        go_quote(protocol)
    )
}

/// pkg/apis/core/validation/validation.go `ValidateService` / `validateServicePort`: port
/// names are DNS-1123 labels (not IANA names), unique, required when there are several.
fn service(obj: &Value, errs: &mut Errs) {
    let spec = &obj["spec"];
    let kind = s(spec, "type").unwrap_or("ClusterIP");
    const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if !TYPES.contains(&kind) {
        errs.push(FieldError::not_supported("spec.type", kind, &TYPES));
    }
    let ports = arr(spec, "ports");
    let headless = s(spec, "clusterIP") == Some("None");
    if ports.is_empty() && !headless && kind != "ExternalName" {
        errs.push(FieldError::required("spec.ports", ""));
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let idx = format!("spec.ports[{i}]");
        let name = s(p, "name").unwrap_or_default();
        if ports.len() > 1 && name.is_empty() {
            errs.push(FieldError::required(format!("{idx}.name"), ""));
        } else if !name.is_empty() {
            invalid_each(errs, &format!("{idx}.name"), name, dns1123_label(name));
            if names.contains(&name) {
                errs.push(FieldError::duplicate(
                    format!("{idx}.name"),
                    Bad::Str(name.to_string()),
                ));
            } else {
                names.push(name);
            }
        }
        let port = p["port"].as_i64().unwrap_or(0);
        for m in port_num(port) {
            errs.push(FieldError::invalid(
                format!("{idx}.port"),
                Bad::Int(port),
                &m,
            ));
        }
        match s(p, "protocol") {
            None | Some("") => errs.push(FieldError::required(format!("{idx}.protocol"), "")),
            Some(proto) if !PROTOCOLS.contains(&proto) => errs.push(FieldError::not_supported(
                format!("{idx}.protocol"),
                proto,
                &PROTOCOLS,
            )),
            Some(_) => {}
        }
        if !p["targetPort"].is_null() {
            port_num_or_name(&p["targetPort"], &format!("{idx}.targetPort"), errs);
        }
    }
    let mut seen: Vec<(&str, i64)> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let key = (
            s(p, "protocol").unwrap_or_default(),
            p["port"].as_i64().unwrap_or(0),
        );
        if seen.contains(&key) {
            errs.push(FieldError::duplicate(
                format!("spec.ports[{i}]"),
                Bad::Raw(go_service_port_key(key.0, key.1)),
            ));
        }
        seen.push(key);
    }
    labels(&spec["selector"], "spec.selector", errs);
}

/// `supportedAccessModes`, as `sets.List` sorts it.
const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

/// pkg/apis/core/validation/validation.go `ValidatePersistentVolumeClaimSpec`.
fn pvc(obj: &Value, errs: &mut Errs) {
    let spec = &obj["spec"];
    let modes = arr(spec, "accessModes");
    if modes.is_empty() {
        errs.push(FieldError::required(
            "spec.accessModes",
            "at least 1 access mode is required",
        ));
    }
    let (mut once_pod, mut other) = (false, false);
    for mode in modes {
        let mode = mode.as_str().unwrap_or_default();
        if !ACCESS_MODES.contains(&mode) {
            errs.push(FieldError::not_supported(
                "spec.accessModes",
                mode,
                &ACCESS_MODES,
            ));
        } else if mode == "ReadWriteOncePod" {
            once_pod = true;
        } else {
            other = true;
        }
    }
    if once_pod && other {
        errs.push(FieldError::forbidden(
            "spec.accessModes",
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
    match &spec["resources"]["requests"]["storage"] {
        Value::Null => errs.push(FieldError::required("spec.resources[storage]", "")),
        q => {
            let text = q.as_str().map_or_else(|| q.to_string(), str::to_string);
            if parse_quantity(&text).is_some_and(|v| v <= 0.0) {
                let shown = if parse_quantity(&text) == Some(0.0) {
                    "0".to_string()
                } else {
                    text
                };
                errs.push(FieldError::invalid(
                    "spec.resources[storage]",
                    Bad::Str(shown),
                    "must be greater than zero",
                ));
            }
        }
    }
    if let Some(class) = s(spec, "storageClassName").filter(|c| !c.is_empty()) {
        invalid_each(
            errs,
            "spec.storageClassName",
            class,
            dns1123_subdomain(class),
        );
    }
    if let Some(mode) = s(spec, "volumeMode")
        && !["Block", "Filesystem"].contains(&mode)
    {
        errs.push(FieldError::not_supported(
            "spec.volumeMode",
            mode,
            &["Block", "Filesystem"],
        ));
    }
}

/// `ValidateConfigMap` / `ValidateSecret`: data keys are config keys.
fn data_keys(obj: &Value, errs: &mut Errs) {
    for field in ["data", "binaryData", "stringData"] {
        for (k, v) in obj[field].as_object().into_iter().flatten() {
            invalid_each(errs, &format!("{field}[{k}]"), k, config_map_key(k));
            if field == "data" && obj["kind"] == "ConfigMap" && !v.is_string() {
                errs.push(FieldError::invalid(
                    format!("data[{k}]"),
                    Bad::Raw(v.to_string()),
                    "not a string",
                ));
            }
        }
    }
}

/// The rules of a create (and, with the old object, of an update), after the server's
/// defaulting, in upstream's order. Every error is collected, as the API server does.
pub fn validate(
    group: &str,
    kind: &str,
    obj: &Value,
    old: Option<&Value>,
    opts: &Options,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    object_meta(group, kind, obj, &mut errs);
    match (group, kind) {
        ("apps", "Deployment") => deployment(obj, opts, &mut errs),
        ("batch", "Job") => job(obj, opts, &mut errs),
        ("", "Pod") => pod_spec(&obj["spec"], "spec", opts, &mut errs),
        ("", "Service") => service(obj, &mut errs),
        ("", "PersistentVolumeClaim") => pvc(obj, &mut errs),
        ("", "ConfigMap") | ("", "Secret") => data_keys(obj, &mut errs),
        _ => {}
    }
    if let Some(old) = old {
        update(group, kind, obj, old, opts, &mut errs);
    }
    errs
}

fn immutable(new: &Value, old: &Value, path: &str, render: fn(&Value) -> String, errs: &mut Errs) {
    if new != old {
        errs.push(FieldError::invalid(
            path,
            Bad::Raw(render(new)),
            "field is immutable",
        ));
    }
}

fn json_value(v: &Value) -> String {
    v.to_string()
}

/// The update rules: pkg/apis/batch/validation/validation.go `ValidateJobSpecUpdate`,
/// pkg/apis/apps/validation/validation.go `ValidateDeploymentUpdate` (apps/v1 selectors are
/// immutable), and pkg/apis/core/validation/validation.go `ValidatePersistentVolumeClaimUpdate`.
fn update(group: &str, kind: &str, new: &Value, old: &Value, opts: &Options, errs: &mut Errs) {
    let (ns, os) = (&new["spec"], &old["spec"]);
    match (group, kind) {
        ("batch", "Job") => {
            immutable(
                &ns["completions"],
                &os["completions"],
                "spec.completions",
                json_value,
                errs,
            );
            immutable(
                &ns["selector"],
                &os["selector"],
                "spec.selector",
                go_label_selector,
                errs,
            );
            // Upstream prints the whole `core.PodTemplateSpec` with Go's %#v; JSON is the
            // readable stand-in (see testdata/README.md).
            immutable(
                &ns["template"],
                &os["template"],
                "spec.template",
                |v| format!("core.PodTemplateSpec{}", v),
                errs,
            );
            immutable(
                &ns["completionMode"],
                &os["completionMode"],
                "spec.completionMode",
                json_value,
                errs,
            );
        }
        ("apps", "Deployment") => immutable(
            &ns["selector"],
            &os["selector"],
            "spec.selector",
            go_label_selector,
            errs,
        ),
        ("", "PersistentVolumeClaim") => pvc_update(new, old, opts, errs),
        _ => {}
    }
}

fn pvc_update(new: &Value, old: &Value, opts: &Options, errs: &mut Errs) {
    let mut new_spec = new["spec"].clone();
    let mut old_spec = old["spec"].clone();
    // The volume name may be set once (the binder does it); a missing class may be set.
    if s(&old_spec, "volumeName").is_none_or(str::is_empty) {
        old_spec["volumeName"] = new_spec["volumeName"].clone();
    }
    if old_spec["storageClassName"].is_null() {
        old_spec["storageClassName"] = new_spec["storageClassName"].clone();
    }
    let bound = new["status"]["phase"] == "Bound";
    if bound {
        new_spec["resources"]["requests"]["storage"] =
            old_spec["resources"]["requests"]["storage"].clone();
        new_spec["volumeAttributesClassName"] = old_spec["volumeAttributesClassName"].clone();
    }
    for spec in [&mut new_spec, &mut old_spec] {
        // The real server defaults volumeMode on every decode, the sim only on create.
        if spec["volumeMode"].is_null() {
            spec["volumeMode"] = Value::from("Filesystem");
        }
        if let Some(m) = spec.as_object_mut() {
            m.retain(|_, v| !v.is_null());
        }
    }
    if new_spec != old_spec {
        // Upstream appends a cmp.Diff of the two Go structs; the changed fields stand in.
        let changed: Vec<String> = new_spec
            .as_object()
            .into_iter()
            .flatten()
            .chain(old_spec.as_object().into_iter().flatten())
            .filter(|(k, _)| new_spec.get(k.as_str()) != old_spec.get(k.as_str()))
            .map(|(k, _)| k.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|k| format!("  {k}: {} -> {}", old_spec[&k], new_spec[&k]))
            .collect();
        errs.push(FieldError::forbidden(
            "spec",
            &format!(
                "spec is immutable after creation except resources.requests and \
                 volumeAttributesClassName for bound claims\n{}",
                changed.join("\n")
            ),
        ));
    }
    let size = |v: &Value| {
        v["spec"]["resources"]["requests"]["storage"]
            .as_str()
            .and_then(parse_quantity)
    };
    if let (Some(new_size), Some(old_size)) = (size(new), size(old))
        && new_size < old_size
    {
        // RecoverVolumeExpansionFailure (beta, on by default from 1.32) lets a claim shrink
        // back down to, but not to or below, what it was given.
        if opts.server_minor < 32 {
            errs.push(FieldError::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than previous value",
            ));
        } else {
            let capacity = old["status"]["capacity"]["storage"]
                .as_str()
                .and_then(parse_quantity)
                .unwrap_or(0.0);
            if new_size <= capacity {
                errs.push(FieldError::forbidden(
                    "spec.resources.requests.storage",
                    "field can not be less than status.capacity",
                ));
            }
        }
    }
}

/// Checks an object the way the simulated API server does on a strict write: a built-in kind
/// must decode as its k8s-openapi type with no unknown fields, and pass the validation
/// above. `Err` lists every problem as `field: message`.
pub fn check_object(obj: &Value) -> Result<(), Vec<String>> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let mut problems = match decode(group, kind, obj) {
        Ok(unknown) => unknown
            .into_iter()
            .map(|f| format!("{f}: unknown field"))
            .collect::<Vec<_>>(),
        Err(e) => vec![format!("cannot be handled as a {kind}: {e}")],
    };
    problems.extend(
        validate(group, kind, obj, None, &Options::default())
            .iter()
            .map(FieldError::to_string),
    );
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}
