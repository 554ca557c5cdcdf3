//! What the commands ask of the user outside their flags: passwords from a file or the
//! environment (never argv), secrets and yes/no questions on a terminal.

use anyhow::{Context, Result};
use uyuni_core::secret::SecretString;

/// A password from its file flag (the file's first line) or its environment variable; never
/// from argv. `None` when neither is given.
pub fn password(
    flag: &str,
    file: Option<&std::path::Path>,
    env: &str,
) -> Result<Option<SecretString>> {
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {flag} {}: check the path", path.display()))?;
        return Ok(Some(SecretString::new(
            text.lines().next().unwrap_or_default(),
        )));
    }
    Ok(std::env::var(env)
        .ok()
        .filter(|p| !p.is_empty())
        .map(SecretString::new))
}

/// Asks for a secret on the terminal, without echo; `None` when there is no terminal.
pub fn prompt_secret(prompt: &str) -> Option<SecretString> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return None;
    }
    let term = console::Term::stderr();
    let _ = term.write_str(prompt);
    term.read_secure_line()
        .ok()
        .filter(|p| !p.is_empty())
        .map(SecretString::new)
}

/// Whether the user can be asked: stdin and stderr are terminals.
pub fn interactive() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Asks a yes/no question on the terminal; only `y` or `yes` is a yes, end of file (Ctrl-D) a
/// no. The answer is read from stdin as the terminal's line discipline delivers it: console's
/// `Term::read_line` reads key by key in raw mode, where Ctrl-D is just a character and the
/// question would wait on.
pub fn confirm(question: &str) -> bool {
    use std::io::{BufRead, Write};
    let mut stderr = std::io::stderr();
    if stderr
        .write_all(question.as_bytes())
        .and_then(|()| stderr.flush())
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    match std::io::stdin().lock().read_line(&mut answer) {
        Ok(0) => {
            // End the question's line, which the terminal did not.
            let _ = writeln!(stderr);
            false
        }
        Ok(_) => matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
        Err(_) => false,
    }
}
