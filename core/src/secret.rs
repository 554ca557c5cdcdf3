//! A value that must never be printed: SSH private keys, passwords, CA keys.

use serde::{Serialize, Serializer};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_serialize_hide_the_value() {
        let s = SecretString::new("hunter2");
        assert_eq!(format!("{s:?}"), "***");
        assert_eq!(serde_json::to_string(&s).expect("serializes"), "\"***\"");
        assert_eq!(s.expose(), "hunter2");
    }
}
