//! Values that must never be printed: SSH private keys, passwords, CA keys; and the masking of
//! Secret objects in everything printed.

use serde::{Serialize, Serializer};
use serde_json::Value;

/// Holds secret text. `Debug` and `Serialize` print `***`, so a secret cannot leak through a log
/// line or a serialized plan by accident; [`SecretString::expose`] is the one way to the value.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(value: impl Into<String>) -> Self {
        SecretString(value.into())
    }

    /// The secret value itself. Call sites are the places that put it into a Secret object.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for SecretString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl Serialize for SecretString {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("***")
    }
}

pub(crate) fn is_secret(value: &Value) -> bool {
    value.get("kind").and_then(Value::as_str) == Some("Secret")
}

/// A copy of `value` with Secret data replaced by `***`. With `other` (the object it is compared
/// with), values that differ are marked `*** (before)` / `*** (after)`; `before` says which side
/// `value` is.
#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub fn mask(value: &Value, other: Option<(&Value, bool)>) -> Value {
    if !is_secret(value) {
        return value.clone();
    }
    let mut out = value.clone();
    for field in ["data", "stringData"] {
        let other_map = other
            .and_then(|(o, _)| o.get(field))
            .and_then(Value::as_object);
        if let Some(map) = out.get_mut(field).and_then(Value::as_object_mut) {
            for (key, v) in map.iter_mut() {
                let marker = match other {
                    Some((_, before)) => {
                        let same = other_map.and_then(|m| m.get(key)) == Some(v);
                        match (same, before) {
                            (true, _) => "***",
                            (false, true) => "*** (before)",
                            (false, false) => "*** (after)",
                        }
                    }
                    None => "***",
                };
                *v = Value::String(marker.to_owned());
            }
        }
    }
    out
}

/// `value` with Secret data masked; `other` marks which values differ from it.
pub fn masked_json(value: &Value, other: Option<&Value>) -> Value {
    mask(value, other.map(|o| (o, false)))
}
