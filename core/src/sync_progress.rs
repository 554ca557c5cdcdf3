//! The data-sync Job's status lines (`core/scripts/data-sync.sh`), parsed. The script prints
//! them among its other log lines, each on a line of its own (a Job's log is cut into lines at
//! newlines only: rsync's carriage-return progress would reach the tool only at a copy's end),
//! possibly after the `[volume] ` prefix of a copy running beside others:
//!
//! ```text
//! uyuni-sync: pass=serving volumes=var-pgsql,var-spacewalk    a pass starts: every volume waits
//! uyuni-sync: volume=var-pgsql state=copying                   its rsync started
//! uyuni-sync: volume=var-pgsql state=copying bytes=1048576 percent=45
//! uyuni-sync: volume=var-pgsql state=done bytes=2097152 ms=812
//! uyuni-sync: volume=var-spacewalk state=skipped               not on the source
//! uyuni-sync: volume=var-spacewalk state=failed code=23        rsync's exit code
//! uyuni-sync: estimate delta_bytes=N scan_ms=N copied_bytes=N copy_ms=N rest_ms=N
//! ```
//!
//! Passes are `serving` (a copy while the source serves), `stopped` (the final copy) and
//! `measure` (a prepare run's `rsync --dry-run` of every volume: what a final copy would still
//! move). `bytes` of a done volume is what rsync transferred (or, measuring, would transfer);
//! the estimate line ends a prepare run ([`Estimate`]). Words are `key=value`; an unknown key is
//! ignored, so the script may add some; a line that does not parse is not a status line.
//!
//! [`SyncProgress`] folds the lines into where each volume stands, for the live view. Pure.

use serde::Serialize;

/// What starts every status line (after an optional `[volume] ` prefix).
pub const PREFIX: &str = "uyuni-sync: ";

/// Where one volume stands in the current pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum VolumeState {
    Waiting,
    /// Its rsync runs; the figures once rsync printed some.
    Copying {
        bytes: Option<u64>,
        percent: Option<u32>,
    },
    Done {
        bytes: u64,
        millis: u64,
    },
    /// Not on the source (an optional directory).
    Skipped,
    Failed {
        code: i32,
    },
}

/// What a prepare run measured, for the final run's expected window (the last status line of a
/// prepare run, and keys of Secret `uyuni-migration-data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Estimate {
    /// What a copy right after this run's would still transfer: the delta left.
    pub delta_bytes: u64,
    /// How long that measure took: a scan of every volume in the final copy's compare modes
    /// (the database with checksums), which the final copy pays too.
    pub scan_ms: u64,
    /// What this run's copy transferred, and how long it took.
    pub copied_bytes: u64,
    pub copy_ms: u64,
    /// The script's steps after the copy (distributions, configuration, extraction): the final
    /// run makes them inside the window.
    pub rest_ms: u64,
}

impl Estimate {
    /// The copy rate of the run, in bytes per second: what it transferred over how long its
    /// copy took, scans included (so rather low than high). `None` when it copied nothing.
    pub fn bytes_per_second(&self) -> Option<u64> {
        (self.copied_bytes > 0 && self.copy_ms > 0).then(|| {
            u64::try_from(u128::from(self.copied_bytes) * 1000 / u128::from(self.copy_ms))
                .unwrap_or(u64::MAX)
        })
    }

    /// The final copy's expected duration: the scan, then the delta at this run's rate.
    /// `None` when there is a delta and no rate to move it at.
    pub fn final_copy_ms(&self) -> Option<u64> {
        if self.delta_bytes == 0 {
            return Some(self.scan_ms);
        }
        let rate = self.bytes_per_second()?;
        let transfer = u128::from(self.delta_bytes) * 1000 / u128::from(rate.max(1));
        Some(self.scan_ms + u64::try_from(transfer).unwrap_or(u64::MAX))
    }
}

/// One status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncLine {
    Pass { pass: String, volumes: Vec<String> },
    Volume { volume: String, state: VolumeState },
    Estimate(Estimate),
}

/// The status line in `line`, if it is one. A log line may carry rsync's carriage returns: only
/// its last segment counts.
pub fn parse(line: &str) -> Option<SyncLine> {
    let line = line
        .rsplit('\r')
        .find(|s| !s.trim().is_empty())
        .unwrap_or(line)
        .trim();
    let line = match line.strip_prefix('[') {
        Some(rest) => rest.split_once("] ")?.1,
        None => line,
    };
    let rest = line.strip_prefix(PREFIX)?;
    let mut words = rest.split_whitespace();
    let first = words.next()?;
    let pairs: Vec<(&str, &str)> = std::iter::once(first)
        .chain(words)
        .filter_map(|w| w.split_once('='))
        .collect();
    let get = |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let number = |key: &str| get(key).and_then(|v| v.parse::<u64>().ok());
    if first == "estimate" {
        return Some(SyncLine::Estimate(Estimate {
            delta_bytes: number("delta_bytes")?,
            scan_ms: number("scan_ms")?,
            copied_bytes: number("copied_bytes")?,
            copy_ms: number("copy_ms")?,
            rest_ms: number("rest_ms")?,
        }));
    }
    if let Some(pass) = get("pass") {
        let volumes = get("volumes")
            .unwrap_or_default()
            .split(',')
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect();
        return Some(SyncLine::Pass {
            pass: pass.to_owned(),
            volumes,
        });
    }
    let volume = get("volume").filter(|v| !v.is_empty())?.to_owned();
    let state = match get("state")? {
        "waiting" => VolumeState::Waiting,
        "copying" => VolumeState::Copying {
            bytes: number("bytes"),
            percent: get("percent").and_then(|p| p.parse().ok()),
        },
        "done" => VolumeState::Done {
            bytes: number("bytes")?,
            millis: number("ms")?,
        },
        "skipped" => VolumeState::Skipped,
        "failed" => VolumeState::Failed {
            code: get("code")?.parse().ok()?,
        },
        _ => return None,
    };
    Some(SyncLine::Volume { volume, state })
}

/// How many volumes are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub waiting: usize,
    pub copying: usize,
    pub done: usize,
    pub skipped: usize,
    pub failed: usize,
}

/// Where each volume of the current pass stands, from the status lines seen so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncProgress {
    /// The current pass (`serving`, `stopped`, `measure`); `None` before the first.
    pub pass: Option<String>,
    /// In the order the pass named them.
    pub volumes: Vec<(String, VolumeState)>,
    /// The estimate, once the run printed it.
    pub estimate: Option<Estimate>,
}

impl SyncProgress {
    /// Takes one log line in; returns whether it was a status line (the display need not show
    /// it as a log line then).
    pub fn update(&mut self, line: &str) -> bool {
        let Some(parsed) = parse(line) else {
            return false;
        };
        match parsed {
            SyncLine::Pass { pass, volumes } => {
                self.pass = Some(pass);
                self.volumes = volumes
                    .into_iter()
                    .map(|v| (v, VolumeState::Waiting))
                    .collect();
            }
            SyncLine::Volume { volume, state } => {
                let state = match (self.state(&volume), state) {
                    // The line that only says the copy started keeps no figures it replaces.
                    (
                        Some(VolumeState::Copying {
                            bytes: Some(b),
                            percent,
                        }),
                        VolumeState::Copying { bytes: None, .. },
                    ) => VolumeState::Copying {
                        bytes: Some(*b),
                        percent: *percent,
                    },
                    (_, state) => state,
                };
                match self.volumes.iter_mut().find(|(v, _)| *v == volume) {
                    Some((_, s)) => *s = state,
                    None => self.volumes.push((volume, state)),
                }
            }
            SyncLine::Estimate(e) => self.estimate = Some(e),
        }
        true
    }

    pub fn state(&self, volume: &str) -> Option<&VolumeState> {
        self.volumes
            .iter()
            .find(|(v, _)| v == volume)
            .map(|(_, s)| s)
    }

    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for (_, state) in &self.volumes {
            match state {
                VolumeState::Waiting => c.waiting += 1,
                VolumeState::Copying { .. } => c.copying += 1,
                VolumeState::Done { .. } => c.done += 1,
                VolumeState::Skipped => c.skipped += 1,
                VolumeState::Failed { .. } => c.failed += 1,
            }
        }
        c
    }

    /// Whether a pass has been seen: the Job is a data sync that prints status lines.
    pub fn started(&self) -> bool {
        self.pass.is_some()
    }
}
