//! Quoting for the shell: the Job scripts and the `kubectl` command lines printed for the user
//! quote the same way.

/// Quotes `s` as one word for bash (and any POSIX shell): single quotes, with each `'` written
/// as `'\''`. Works for every string without NUL, which no shell word can hold anyway.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
