//! Release versions of the server images, and the order `upgrade` compares them in: the one
//! mgradm meant and the pull request this project grew from fixed (`5.0.10` < `5.1.0`, not the
//! string order; `5.1.0 Alpha1` < `5.1.0 Beta2` < `5.1.0`; Uyuni's calendar form `2025.10`).
//! Parsing takes any string and never panics: what it cannot read is an error that names it.

use std::cmp::Ordering;

/// A pre-release stage, earliest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Stage {
    Alpha,
    Beta,
    Rc,
}

/// A release: its numbers, and its pre-release stage and number if it is one. Equal when the
/// order says so (`5.1` and `5.1.0` are one release), whatever the text.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Release {
    /// `5.1.0` → `[5, 1, 0]`; trailing zeros do not change the order (`5.1` = `5.1.0`).
    pub numbers: Vec<u64>,
    pub pre: Option<(Stage, u64)>,
    /// As given, for messages.
    pub text: String,
}

/// A string that is not a release this order knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a release version such as 5.1.0, 5.1.0 Beta2 or 2025.10 ({problem})")]
pub struct ReleaseError {
    pub text: String,
    pub problem: &'static str,
}

/// At most this many numbers: no release has more, and the bound keeps the order's work small.
const MAX_NUMBERS: usize = 6;

fn stage(word: &str) -> Option<(Stage, &str)> {
    let lower = word.to_ascii_lowercase();
    for (name, stage) in [
        ("alpha", Stage::Alpha),
        ("beta", Stage::Beta),
        ("rc", Stage::Rc),
    ] {
        if lower.starts_with(name) {
            return Some((stage, &word[name.len()..]));
        }
    }
    None
}

impl Release {
    /// Reads `5.1.0`, `5.1.0 Alpha1`, `5.1.0-beta2`, `5.1.0 RC 1`, `2025.10`; a leading `v` is
    /// allowed.
    pub fn parse(text: &str) -> Result<Release, ReleaseError> {
        let error = |problem| ReleaseError {
            text: text.to_owned(),
            problem,
        };
        let trimmed = text.trim();
        let trimmed = trimmed.strip_prefix(['v', 'V']).unwrap_or(trimmed);
        // The numbers end at the first character that is neither a digit nor a dot.
        let end = trimmed
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(trimmed.len());
        let (numbers_text, rest) = trimmed.split_at(end);
        if numbers_text.is_empty() {
            return Err(error("it does not start with a number"));
        }
        let parts: Vec<&str> = numbers_text.split('.').collect();
        if parts.len() > MAX_NUMBERS {
            return Err(error("it has more than six numbers"));
        }
        let mut numbers = Vec::with_capacity(parts.len());
        for part in parts {
            if part.is_empty() {
                return Err(error("two dots follow each other, or a dot ends it"));
            }
            numbers.push(
                part.parse::<u64>()
                    .map_err(|_| error("a number is too large"))?,
            );
        }
        let rest = rest.trim_start_matches([' ', '-', '~', '_']).trim();
        let pre = if rest.is_empty() {
            None
        } else {
            let (stage, number) = stage(rest).ok_or_else(|| {
                error("what follows the numbers is not Alpha, Beta or RC with a number")
            })?;
            let number = number.trim_start_matches([' ', '.', '-']).trim();
            let n = if number.is_empty() {
                0
            } else {
                number
                    .parse::<u64>()
                    .map_err(|_| error("the pre-release number is not a whole number"))?
            };
            Some((stage, n))
        };
        Ok(Release {
            numbers,
            pre,
            text: text.trim().to_owned(),
        })
    }

    /// Whether the release is Uyuni's calendar form (`2025.10`): its first number is a year.
    pub fn is_calendar(&self) -> bool {
        self.numbers.first().is_some_and(|n| *n >= 2000)
    }

    fn number(&self, i: usize) -> u64 {
        self.numbers.get(i).copied().unwrap_or(0)
    }
}

impl Ord for Release {
    fn cmp(&self, other: &Self) -> Ordering {
        let len = self.numbers.len().max(other.numbers.len());
        for i in 0..len {
            match self.number(i).cmp(&other.number(i)) {
                Ordering::Equal => {}
                unequal => return unequal,
            }
        }
        // A release comes after each of its pre-releases.
        match (self.pre, other.pre) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(a), Some(b)) => a.cmp(&b),
        }
    }
}

impl PartialEq for Release {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Release {}

impl PartialOrd for Release {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Why an upgrade from one release to another is refused before any write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpgradeRefusal {
    #[error("{to} is older than {from}, which the server runs: a downgrade is not supported")]
    Downgrade { from: String, to: String },
    #[error(
        "{from} and {to} are releases of different products (Uyuni's calendar releases and SUSE Multi-Linux Manager's numbered ones): an upgrade does not switch products"
    )]
    ProductSwitch { from: String, to: String },
    #[error(
        "{from} to {to} skips a minor release: upgrade to the latest {next} first, then to {to}"
    )]
    Jump {
        from: String,
        to: String,
        next: String,
    },
}

/// What an upgrade from `from` to `to` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The same release: nothing to upgrade.
    Same,
    /// A newer release.
    Newer,
}

/// Checks an upgrade from `from` to `to`: no downgrade, no switch between Uyuni's calendar
/// releases and the numbered ones, and for the numbered ones at most one minor release at a
/// time (`5.0.x` → `5.1.y`, not `5.0` → `5.2`; a new major only from the last minor it
/// supports is not known here and is allowed).
pub fn check_upgrade(from: &Release, to: &Release) -> Result<Step, UpgradeRefusal> {
    if from.is_calendar() != to.is_calendar() {
        return Err(UpgradeRefusal::ProductSwitch {
            from: from.text.clone(),
            to: to.text.clone(),
        });
    }
    match to.cmp(from) {
        Ordering::Less => Err(UpgradeRefusal::Downgrade {
            from: from.text.clone(),
            to: to.text.clone(),
        }),
        Ordering::Equal => Ok(Step::Same),
        Ordering::Greater => {
            if !from.is_calendar()
                && to.number(0) == from.number(0)
                && to.number(1) > from.number(1) + 1
            {
                return Err(UpgradeRefusal::Jump {
                    from: from.text.clone(),
                    to: to.text.clone(),
                    next: format!("{}.{}", from.number(0), from.number(1) + 1),
                });
            }
            Ok(Step::Newer)
        }
    }
}
