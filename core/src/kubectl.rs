//! The `kubectl` command lines the tool prints for the user to run (in hints of errors, notes
//! and the interruption message), built in one place so that each carries the kubeconfig,
//! context and namespace the run used: a hint that drops them shows another cluster's or
//! namespace's objects when pasted (`No resources found in default namespace`).

use serde::Serialize;

/// The connection flags of the run, as the user gave them. `None` where the user relied on
/// kubectl's own default (KUBECONFIG, the current context): a pasted command then finds the same.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Kubectl {
    pub kubeconfig: Option<String>,
    /// The context given, or else the one resolved at connection (the kubeconfig's current
    /// context then): a pasted command reaches the same cluster after `kubectl config
    /// use-context`.
    pub context: Option<String>,
    /// The identity the run acted as (`--as`, `--as-group`): a hint pasted without it would
    /// answer for the user's own identity (`kubectl auth can-i` says "yes" where the run was
    /// refused).
    pub as_user: Option<String>,
    pub as_groups: Vec<String>,
    /// `--user` and `--cluster`: the kubeconfig entries the run chose over its context's. A
    /// plugin command renders the user as `--kube-user` (`migrate --user` is the SSH user).
    pub user: Option<String>,
    pub cluster: Option<String>,
    /// `--server`, `--certificate-authority` and `--insecure-skip-tls-verify`: the run
    /// reached its API server through them, so a pasted command must too.
    pub server: Option<String>,
    pub certificate_authority: Option<String>,
    pub insecure_skip_tls_verify: bool,
    /// Whether the run was given `--token`. Its value is a secret and is never kept here:
    /// commands carry [`TOKEN_PLACEHOLDER`] instead, which the user's shell expands.
    pub token: bool,
    /// The `migrate` flags of the run that a repeated run needs (everything but the source,
    /// `--prepare`, `--yes`, `--dry-run` and the kubectl flags above), as given. They hold
    /// file paths, never secret values: secrets are not accepted in argv.
    pub migrate_flags: Vec<String>,
}

impl Kubectl {
    /// No flags: the command lines of library messages rendered without a run's flags.
    pub const BARE: Kubectl = Kubectl {
        kubeconfig: None,
        context: None,
        as_user: None,
        as_groups: Vec::new(),
        user: None,
        cluster: None,
        server: None,
        certificate_authority: None,
        insecure_skip_tls_verify: false,
        token: false,
        migrate_flags: Vec::new(),
    };

    /// `kubectl uyuni [--kubeconfig K] [--context C] [-n NS] ARGS`: a command of this tool,
    /// with the connection flags of the run.
    pub fn uyuni(&self, namespace: Option<&str>, args: &str) -> String {
        let plugin = Kubectl {
            migrate_flags: Vec::new(),
            ..self.clone()
        };
        let base = plugin.flags(namespace, "--kube-user");
        let rest = base.strip_prefix("kubectl").unwrap_or(&base);
        let mut out = format!("kubectl uyuni{rest}");
        if !args.is_empty() {
            out.push(' ');
            out.push_str(args);
        }
        out
    }

    /// The `kubectl uyuni migrate SOURCE [--prepare] FLAGS…` that repeats the run (as a final
    /// run without `prepare`), with its connection and migrate flags.
    pub fn migrate(&self, namespace: Option<&str>, source: &str, prepare: bool) -> String {
        let mut args = format!("migrate {}", shell_quote(source));
        if prepare {
            args.push_str(" --prepare");
        }
        for flag in &self.migrate_flags {
            args.push(' ');
            args.push_str(&shell_quote(flag));
        }
        self.uyuni(namespace, &args)
    }

    /// The `kubectl uyuni upgrade FLAGS…` that repeats an upgrade, with its connection and
    /// repeated flags (held in `migrate_flags`).
    pub fn upgrade(&self, namespace: Option<&str>) -> String {
        let mut args = "upgrade".to_owned();
        for flag in &self.migrate_flags {
            args.push(' ');
            args.push_str(&shell_quote(flag));
        }
        self.uyuni(namespace, &args)
    }

    /// The `kubectl uyuni install FQDN FLAGS…` that repeats an install, with its connection
    /// and repeated flags (held in `migrate_flags`, whichever command made them).
    pub fn install(&self, namespace: Option<&str>, fqdn: &str) -> String {
        let mut args = format!("install {}", shell_quote(fqdn));
        for flag in &self.migrate_flags {
            args.push(' ');
            args.push_str(&shell_quote(flag));
        }
        self.uyuni(namespace, &args)
    }

    /// The same connection, with the repeated `migrate` flags named in `flags` (each takes a
    /// value, as `--flag V` or `--flag=V`) left out: the run again without them.
    pub fn without_flags(&self, flags: &[&str]) -> Kubectl {
        let mut kept = Vec::new();
        let mut words = self.migrate_flags.iter();
        while let Some(word) = words.next() {
            let name = word.split('=').next().unwrap_or(word);
            if flags.contains(&name) {
                if !word.contains('=') {
                    words.next();
                }
                continue;
            }
            kept.push(word.clone());
        }
        Kubectl {
            migrate_flags: kept,
            ..self.clone()
        }
    }

    /// `kubectl [--kubeconfig K] [--context C] [-n NS] ARGS`; `namespace` is `None` for
    /// cluster-scoped commands. `args` is written as given (the caller's own words).
    pub fn cmd(&self, namespace: Option<&str>, args: &str) -> String {
        let mut out = self.flags(namespace, "--user");
        if !args.is_empty() {
            out.push(' ');
            out.push_str(args);
        }
        out
    }

    /// `kubectl` and the run's flags, the kubeconfig user under the flag `user_flag`.
    // --request-timeout is not carried: kubectl applies it to the whole request, so a pasted
    // `logs -f` would stop following after it.
    fn flags(&self, namespace: Option<&str>, user_flag: &str) -> String {
        let mut out = String::from("kubectl");
        if let Some(kubeconfig) = &self.kubeconfig {
            out.push_str(" --kubeconfig ");
            out.push_str(&shell_quote(kubeconfig));
        }
        if let Some(context) = &self.context {
            out.push_str(" --context ");
            out.push_str(&shell_quote(context));
        }
        if let Some(cluster) = &self.cluster {
            out.push_str(" --cluster ");
            out.push_str(&shell_quote(cluster));
        }
        if let Some(user) = &self.user {
            out.push(' ');
            out.push_str(user_flag);
            out.push(' ');
            out.push_str(&shell_quote(user));
        }
        if let Some(server) = &self.server {
            out.push_str(" --server ");
            out.push_str(&shell_quote(server));
        }
        if let Some(ca) = &self.certificate_authority {
            out.push_str(" --certificate-authority ");
            out.push_str(&shell_quote(ca));
        }
        if self.insecure_skip_tls_verify {
            out.push_str(" --insecure-skip-tls-verify");
        }
        if self.token {
            out.push_str(" --token ");
            out.push_str(TOKEN_PLACEHOLDER);
        }
        if let Some(user) = &self.as_user {
            out.push_str(" --as ");
            out.push_str(&shell_quote(user));
        }
        for group in &self.as_groups {
            out.push_str(" --as-group ");
            out.push_str(&shell_quote(group));
        }
        if let Some(ns) = namespace {
            out.push_str(" -n ");
            out.push_str(&shell_quote(ns));
        }
        out
    }
}

/// What a printed command passes for `--token`: the shell variable the user sets to the
/// token, so that the token itself never appears in what the tool prints or records.
pub const TOKEN_PLACEHOLDER: &str = "\"$TOKEN\"";

/// The note that goes with commands carrying [`TOKEN_PLACEHOLDER`].
pub const TOKEN_NOTE: &str = "the commands above pass --token \"$TOKEN\": set TOKEN to your token before pasting them (its value is never printed)";

/// `value` as one shell word: as it is when it holds only characters no shell treats
/// specially (hints stay readable), otherwise quoted as the Job scripts quote.
pub fn shell_quote(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@=+,%".contains(c));
    if plain {
        value.to_owned()
    } else {
        crate::shell::quote(value)
    }
}
