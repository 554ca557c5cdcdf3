//! Shell completion: `completion bash|zsh|fish` prints clap's scripts for `kubectl-uyuni`, and
//! `__complete ARGS… WORD` answers in Cobra's protocol, which kubectl (1.26 and later) speaks
//! to a `kubectl_complete-uyuni` executable on PATH for `kubectl uyuni <TAB>`: one candidate
//! per line (`value<TAB>description`), then `:DIRECTIVE`.
//!
//! Nothing here writes to stderr: kubectl passes the completer's stderr to the user's terminal
//! in the middle of their command line.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Arg, Command, CommandFactory};

use crate::cli::{Cli, KubeFlags, Shell};

/// Cobra's ShellCompDirective bits.
pub mod directive {
    /// Let the shell complete file names.
    pub const DEFAULT: u32 = 0;
    pub const NO_FILE_COMP: u32 = 4;
}

/// How long `-n <TAB>` may wait for the namespace list.
const NAMESPACE_TIMEOUT: Duration = Duration::from_secs(2);

pub fn print_script(shell: Shell) {
    let _ = std::io::stdout().write_all(script(shell).as_bytes());
}

/// The completion script for `kubectl-uyuni` in `shell`.
pub fn script(shell: Shell) -> String {
    // clap_complete's bash script mangles a hyphenated binary name inconsistently (its case
    // labels turn `-` into `__subcmd__`, its state variable into `__`): generate for a name
    // without one and register the real name.
    let (generator, name) = match shell {
        Shell::Bash => (clap_complete::Shell::Bash, "kubectl_uyuni"),
        Shell::Zsh => (clap_complete::Shell::Zsh, "kubectl-uyuni"),
        Shell::Fish => (clap_complete::Shell::Fish, "kubectl-uyuni"),
    };
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(generator, &mut cmd, name, &mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    if shell != Shell::Bash {
        return text;
    }
    text.lines()
        .map(|line| match line.trim_start().starts_with("complete -F") {
            true => line.replace(" kubectl_uyuni", " kubectl-uyuni"),
            false => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// One answer: candidates (with an optional description) and the directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub candidates: Vec<(String, Option<String>)>,
    pub directive: u32,
}

impl Answer {
    fn none() -> Answer {
        Answer {
            candidates: Vec::new(),
            directive: directive::NO_FILE_COMP,
        }
    }

    fn files() -> Answer {
        Answer {
            candidates: Vec::new(),
            directive: directive::DEFAULT,
        }
    }

    fn words(words: impl IntoIterator<Item = String>, prefix: &str) -> Answer {
        Answer {
            candidates: words
                .into_iter()
                .filter(|w| w.starts_with(prefix))
                .map(|w| (w, None))
                .collect(),
            directive: directive::NO_FILE_COMP,
        }
    }

    /// Cobra's wire format.
    pub fn render(&self, descriptions: bool) -> String {
        let mut out = String::new();
        for (value, desc) in &self.candidates {
            out.push_str(value);
            if let Some(d) = desc.as_deref().filter(|d| descriptions && !d.is_empty()) {
                out.push('\t');
                out.push_str(d);
            }
            out.push('\n');
        }
        out.push_str(&format!(":{}\n", self.directive));
        out
    }
}

/// What is needed to complete the value of a flag that reads the cluster or kubeconfig.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dynamic {
    Contexts,
    Namespaces,
}

/// Where the cursor is, worked out from the words before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// A value of this flag (long name); `prefix` is prepended to each candidate (for
    /// `--flag=value`).
    FlagValue { flag: String, prefix: String },
    /// A flag name.
    FlagName,
    /// A subcommand or positional argument.
    Argument,
}

/// The subcommand path and the position of the last word. Pure: clap's tree and the words.
pub fn locate(root: &Command, words: &[String]) -> (Vec<String>, Position, String) {
    let (before, current) = match words.split_last() {
        Some((last, before)) => (before, last.clone()),
        None => (&[][..], String::new()),
    };
    let mut path: Vec<String> = Vec::new();
    let mut cmd = root.clone();
    let mut expects_value_of: Option<String> = None;
    let mut after_double_dash = false;
    for word in before {
        if let Some(flag) = expects_value_of.take() {
            let _ = flag;
            continue;
        }
        if after_double_dash {
            continue;
        }
        if word == "--" {
            after_double_dash = true;
        } else if let Some(long) = word.strip_prefix("--") {
            if !long.contains('=')
                && let Some(arg) = find_long(&cmd, long)
                && takes_value(arg)
            {
                expects_value_of = Some(long.to_owned());
            }
        } else if let Some(shorts) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            // -n NS, -nNS, -vv: the first short flag that takes a value consumes the rest or
            // the next word.
            for (i, c) in shorts.char_indices() {
                if let Some(arg) = find_short(&cmd, c)
                    && takes_value(arg)
                {
                    if i + c.len_utf8() == shorts.len() {
                        expects_value_of = arg.get_long().map(str::to_owned);
                    }
                    break;
                }
            }
        } else if let Some(sub) = cmd.find_subcommand(word).cloned() {
            path.push(sub.get_name().to_owned());
            cmd = sub;
        }
    }
    if let Some(flag) = expects_value_of {
        return (
            path,
            Position::FlagValue {
                flag,
                prefix: String::new(),
            },
            current,
        );
    }
    if !after_double_dash && let Some(long) = current.strip_prefix("--") {
        if let Some((name, value)) = long.split_once('=') {
            return (
                path,
                Position::FlagValue {
                    flag: name.to_owned(),
                    prefix: format!("--{name}="),
                },
                value.to_owned(),
            );
        }
        return (path, Position::FlagName, current);
    }
    if !after_double_dash && current.starts_with('-') {
        return (path, Position::FlagName, current);
    }
    (path, Position::Argument, current)
}

fn find_long<'a>(cmd: &'a Command, long: &str) -> Option<&'a Arg> {
    cmd.get_arguments().find(|a| {
        a.get_long() == Some(long) || a.get_all_aliases().is_some_and(|al| al.contains(&long))
    })
}

fn find_short(cmd: &Command, short: char) -> Option<&Arg> {
    cmd.get_arguments().find(|a| a.get_short() == Some(short))
}

fn takes_value(arg: &Arg) -> bool {
    arg.get_action().takes_values()
}

fn subcommand<'a>(root: &'a Command, path: &[String]) -> &'a Command {
    let mut cmd = root;
    for name in path {
        match cmd.find_subcommand(name) {
            Some(sub) => cmd = sub,
            None => break,
        }
    }
    cmd
}

/// The flags kubectl's completion would show for `cmd`: long names, and short ones when the
/// word is a lone `-`.
fn flag_names(cmd: &Command, current: &str) -> Answer {
    let mut candidates = Vec::new();
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let help = arg.get_help().map(|h| first_sentence(&h.to_string()));
        if let Some(long) = arg.get_long() {
            candidates.push((format!("--{long}"), help.clone()));
        }
        if current == "-"
            && let Some(short) = arg.get_short()
        {
            candidates.push((format!("-{short}"), help));
        }
    }
    candidates.retain(|(c, _)| c.starts_with(current));
    Answer {
        candidates,
        directive: directive::NO_FILE_COMP,
    }
}

fn first_sentence(help: &str) -> String {
    let line = help.lines().next().unwrap_or_default();
    line.split(". ")
        .next()
        .unwrap_or(line)
        .trim_end_matches('.')
        .to_owned()
}

/// The completion of the argument at the cursor, with `dynamic` supplying contexts and
/// namespaces. Pure apart from what `dynamic` does.
pub fn complete(
    root: &Command,
    words: &[String],
    dynamic: &mut dyn FnMut(Dynamic) -> Vec<String>,
) -> Answer {
    let (path, position, current) = locate(root, words);
    let cmd = subcommand(root, &path);
    match position {
        Position::FlagName => flag_names(cmd, &current),
        Position::FlagValue { flag, prefix } => {
            let Some(arg) = find_long(cmd, &flag) else {
                return Answer::none();
            };
            let mut answer = match flag.as_str() {
                "context" => Answer::words(dynamic(Dynamic::Contexts), &current),
                "namespace" => Answer::words(dynamic(Dynamic::Namespaces), &current),
                _ => {
                    let values: Vec<String> = arg
                        .get_possible_values()
                        .iter()
                        .filter(|v| !v.is_hide_set())
                        .map(|v| v.get_name().to_owned())
                        .collect();
                    if !values.is_empty() {
                        Answer::words(values, &current)
                    } else if matches!(
                        arg.get_value_hint(),
                        clap::ValueHint::FilePath
                            | clap::ValueHint::AnyPath
                            | clap::ValueHint::DirPath
                    ) || arg
                        .get_value_names()
                        .is_some_and(|n| n.iter().any(|n| n.as_str() == "FILE"))
                    {
                        return Answer::files();
                    } else {
                        Answer::none()
                    }
                }
            };
            for (value, _) in &mut answer.candidates {
                value.insert_str(0, &prefix);
            }
            answer
        }
        Position::Argument => {
            let subs: Vec<(String, Option<String>)> = cmd
                .get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name() != "help")
                .filter(|s| s.get_name().starts_with(&current))
                .map(|s| {
                    (
                        s.get_name().to_owned(),
                        s.get_about().map(|a| first_sentence(&a.to_string())),
                    )
                })
                .collect();
            if !subs.is_empty() || cmd.has_subcommands() {
                return Answer {
                    candidates: subs,
                    directive: directive::NO_FILE_COMP,
                };
            }
            // Positional values with a fixed set (completion's shell).
            let values: Vec<String> = cmd
                .get_positionals()
                .flat_map(|a| a.get_possible_values())
                .map(|v| v.get_name().to_owned())
                .collect();
            Answer::words(values, &current)
        }
    }
}

/// kubectl's global flags as far as they are typed, for the dynamic lookups.
#[doc(hidden)]
pub fn kube_flags_from(words: &[String]) -> KubeFlags {
    let mut flags = KubeFlags {
        kubeconfig: None,
        context: None,
        cluster: None,
        namespace: None,
        user: None,
        request_timeout: Some(NAMESPACE_TIMEOUT),
        server: None,
        token: None,
        certificate_authority: None,
        insecure_skip_tls_verify: false,
        as_user: None,
        as_group: Vec::new(),
    };
    let mut iter = words.iter().peekable();
    while let Some(word) = iter.next() {
        let (name, inline) = match word.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (word.as_str(), None),
        };
        let slot = match name {
            "--kubeconfig" => 0,
            "--context" => 1,
            "--cluster" => 2,
            "--kube-user" => 3,
            "-s" | "--server" => 4,
            "--token" => 5,
            "--certificate-authority" => 6,
            "--insecure-skip-tls-verify" => {
                flags.insecure_skip_tls_verify = inline.as_deref() != Some("false");
                continue;
            }
            _ => continue,
        };
        let Some(value) = inline.or_else(|| iter.next().cloned()) else {
            continue;
        };
        match slot {
            0 => flags.kubeconfig = Some(PathBuf::from(value)),
            1 => flags.context = Some(value),
            2 => flags.cluster = Some(value),
            4 => flags.server = Some(value),
            5 => flags.token = value.parse().ok(),
            6 => flags.certificate_authority = Some(PathBuf::from(value)),
            _ => flags.user = Some(value),
        }
    }
    flags
}

fn contexts(flags: &KubeFlags) -> Vec<String> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    uyuni_effects::inspect::context_names(
        flags.kubeconfig.as_deref(),
        std::env::var_os("KUBECONFIG").as_deref(),
        home.as_deref().map(Path::new),
    )
}

fn namespaces(flags: &KubeFlags) -> Vec<String> {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    runtime.block_on(async {
        let lookup = async {
            let conn = crate::connect(flags).await.ok()?;
            uyuni_effects::inspect::namespace_names(&conn.client)
                .await
                .ok()
        };
        tokio::time::timeout(NAMESPACE_TIMEOUT, lookup)
            .await
            .ok()
            .flatten()
            .unwrap_or_default()
    })
}

/// `kubectl-uyuni __complete WORDS…` (or `__completeNoDesc`): prints the answer on stdout.
pub fn run(args: &[OsString], descriptions: bool) -> std::process::ExitCode {
    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let words = if words.is_empty() {
        vec![String::new()]
    } else {
        words
    };
    let mut root = Cli::command();
    root.build();
    let flags = kube_flags_from(&words[..words.len() - 1]);
    let mut dynamic = |what: Dynamic| match what {
        Dynamic::Contexts => contexts(&flags),
        Dynamic::Namespaces => namespaces(&flags),
    };
    let answer = complete(&root, &words, &mut dynamic);
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(answer.render(descriptions).as_bytes());
    let _ = out.flush();
    std::process::ExitCode::SUCCESS
}
