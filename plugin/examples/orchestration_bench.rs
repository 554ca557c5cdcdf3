//! Orchestration benchmark (issue 12), printed as one table of figures and ratios:
//!
//! - a full simulated `migrate` (zero-length Jobs) against `uyuni-sim` at 0, 20 and 80 ms of
//!   latency per request — wall time and requests by verb — beside a **baseline** that performs
//!   the same writes, reads and waits the way the Go tool we replace did (see [`baseline`]),
//!   against the same simulator at the same latency, in the same run;
//! - **reaction latency**: from a Job's end in `uyuni-sim` to the plugin's next write, over
//!   200 Jobs (see [`reaction`]);
//! - **footprint**: the binary's size, `--version` start-up, peak RSS during a full migration,
//!   and RSS while following 1 GiB of Job log (see [`log_follow`]);
//! - the planning time of `plan` and of the whole dry-run preview.
//!
//! ```text
//! cargo build --bins -p kubectl-uyuni && cargo run -p kubectl-uyuni --example orchestration_bench
//! ```
//! (`--release` on both for release figures.) The plugin runs as built next to this example,
//! directly, not through kubectl: the figures are the plugin's own. Knobs:
//! `UYUNI_BENCH_PLUGIN=PATH` measures another build (say, before a change; the bench needs
//! nothing of it but the CLI); `UYUNI_BENCH_LATENCIES=0,20` picks latencies;
//! `UYUNI_BENCH_REACTION_JOBS=200`, `UYUNI_BENCH_LOG_MB=1024`;
//! `UYUNI_BENCH_SKIP=baseline,reaction,log,planning` leaves parts out; `UYUNI_BENCH_VERBOSE=1` prints
//! each Job's reaction with the requests in between (where the time goes); the baseline's kubectl is
//! `UYUNI_BENCH_KUBECTL`, else `UYUNI_KUBECTL_137` (when that file exists), else `kubectl` on
//! PATH.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use uyuni_testdata::{
    Faults, RequestRecord, Scenario, SimCluster, SimConfig, WrittenObject, scenarios,
};

const NS: &str = "uyuni";
const SOURCE: &str = "uyuni.example.com";
const VERBS: [&str; 6] = ["GET", "LIST", "WATCH", "CREATE/PATCH", "DELETE", "OTHER"];
/// The Go tool polled every wait once a second.
const POLL: Duration = Duration::from_secs(1);

/// `UYUNI_BENCH_PLUGIN` (another build, to compare) or the plugin built beside this example.
fn plugin() -> PathBuf {
    if let Some(path) = std::env::var_os("UYUNI_BENCH_PLUGIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the example's path");
    // target/<profile>/examples/orchestration_bench → target/<profile>/kubectl-uyuni
    exe.parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("kubectl-uyuni"))
        .expect("target directory")
}

fn kubectl() -> PathBuf {
    if let Some(path) = std::env::var_os("UYUNI_BENCH_KUBECTL") {
        return PathBuf::from(path);
    }
    if let Some(path) = std::env::var_os("UYUNI_KUBECTL_137").map(PathBuf::from)
        && path.is_file()
    {
        return path;
    }
    PathBuf::from("kubectl")
}

fn skipped(part: &str) -> bool {
    std::env::var("UYUNI_BENCH_SKIP").is_ok_and(|s| s.split(',').any(|p| p.trim() == part))
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/fixtures/ssh")
}

/// The migration scenario with zero-length Jobs: what is measured is the orchestration.
fn zero_length_jobs() -> Scenario {
    let mut scenario = scenarios::migration();
    for job in scenario.jobs.values_mut() {
        job.duration_ms = 0;
    }
    scenario
}

/// A remote API server answers discovery, OpenAPI and `/version` no faster than the rest: the
/// latency hits them too (the baseline's kubectl processes make most of those).
fn start_sim(scenario: Scenario, latency_ms: u64) -> SimCluster {
    let sim = SimCluster::start_blocking(SimConfig {
        scenario,
        faults: Faults {
            latency_ms,
            include_discovery: true,
            include_version: true,
            ..Faults::default()
        },
        ..SimConfig::default()
    })
    .expect("uyuni-sim starts");
    sim.clear_request_log();
    sim
}

/// A process run to its end, with its memory sampled from /proc while it ran.
struct Measured {
    wall: Duration,
    success: bool,
    /// VmHWM: the peak resident set, as the kernel counts it (KiB).
    peak_rss_kib: u64,
    /// (time since start, VmRSS KiB), every 10 ms.
    rss: Vec<(Duration, u64)>,
}

fn status_field(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

fn run_measured(mut command: Command) -> Measured {
    let start = Instant::now();
    let mut child = command
        .spawn()
        .expect("the plugin runs (cargo build --bins first)");
    let status_path = format!("/proc/{}/status", child.id());
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            let mut rss = Vec::new();
            while !done.load(Ordering::Relaxed) {
                if let Ok(status) = std::fs::read_to_string(&status_path) {
                    peak = peak.max(status_field(&status, "VmHWM:").unwrap_or(0));
                    if let Some(kib) = status_field(&status, "VmRSS:") {
                        rss.push((start.elapsed(), kib));
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            (peak, rss)
        })
    };
    let status = child.wait().expect("the plugin ends");
    let wall = start.elapsed();
    done.store(true, Ordering::Relaxed);
    let (peak_rss_kib, rss) = sampler.join().expect("sampler");
    Measured {
        wall,
        success: status.success(),
        peak_rss_kib,
        rss,
    }
}

/// The plugin's `migrate` against `sim`, stderr to `stderr` (a file, or nowhere).
fn migrate_command(sim: &SimCluster, stderr: Stdio) -> Command {
    let f = fixtures();
    let mut command = Command::new(plugin());
    command
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["-n", NS, "migrate", SOURCE, "--yes"])
        .arg("--ssh-key-private")
        .arg(f.join("id_ed25519"))
        .arg("--ssh-key-public")
        .arg(f.join("id_ed25519.pub"))
        .arg("--ssh-knownhosts")
        .arg(f.join("known_hosts"))
        .arg("--ssh-config")
        .arg(f.join("config"))
        // The CA password reaches the plugin as the environment, never argv.
        .env("UYUNI_SSL_PASSWORD", "ca secret #1")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    command
}

/// One full migration by the plugin; panics with its stderr when it fails.
fn migrate(sim: &SimCluster) -> Measured {
    let log = tempfile::NamedTempFile::new().expect("temp file");
    let measured = run_measured(migrate_command(
        sim,
        Stdio::from(log.reopen().expect("temp file")),
    ));
    assert!(
        measured.success,
        "migrate failed:\n{}",
        std::fs::read_to_string(log.path()).unwrap_or_default()
    );
    measured
}

fn by_verb(log: &[RequestRecord]) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for r in log {
        *counts.entry(r.verb_class()).or_insert(0) += 1;
    }
    counts
}

/// Wall time, requests by verb, and (for the plugin's run) what it wrote.
struct Orchestration {
    wall: Duration,
    requests: BTreeMap<&'static str, usize>,
    writes: usize,
}

impl Orchestration {
    fn total(&self) -> usize {
        self.requests.values().sum()
    }

    fn verbs(&self) -> String {
        VERBS
            .iter()
            .map(|v| self.requests.get(v).copied().unwrap_or(0).to_string())
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// The Go tool's way, replayed with the real kubectl: the objects the plugin wrote in its run
/// (`written`, in order), each written by one `kubectl apply -f -` process, and each wait a
/// one-second poll of `kubectl get`, against a fresh `uyuni-sim` with the same scenario and
/// latency.
///
/// How faithful it is (`reference/uyuni-k8s-behaviour.md`, §2.7 and D38):
/// - Writes: mgradm wrote manifests with client-side `kubectl apply -f`, which reads the object
///   (GET) before creating or patching it; here it is one process per object (mgradm sometimes
///   put several objects in one manifest: fewer processes, the same requests).
/// - Waits: a Job until `.status.succeeded` or `.status.failed` (mgradm: `kubectl get job`,
///   once a second, checking first); a Certificate until its Secret exists (mgradm waited for
///   Secret `uyuni-cert` and `db-cert`); the Issuer until `Ready`; a Deployment until it has its
///   ready replicas. Each poll is one `kubectl get -o json` process.
/// - Reads: after the data-sync Job, `kubectl get secret uyuni-migration-data -o json` (mgradm
///   read what the source reported with `kubectl get` too). mgradm's other checks (the node
///   lookup, `kubectl explain` for the ingress, existence checks that client-side apply's GET
///   stands for here) are not replayed: the baseline errs on the fast side.
/// - Each wait follows its own write, where the plugin may write a few objects before waiting
///   (the Certificates); the order of writes is the plugin's.
/// - kubectl's discovery cache is a fresh directory per run: cold for the first process,
///   then warm, as on an administrator's machine.
fn baseline(latency_ms: u64, written: &[WrittenObject], kubectl: &Path) -> Orchestration {
    let sim = start_sim(zero_length_jobs(), latency_ms);
    let cache = tempfile::tempdir().expect("temp dir");
    let kubectl_cmd = |args: &[&str]| {
        let mut c = Command::new(kubectl);
        c.arg("--kubeconfig")
            .arg(sim.kubeconfig_path())
            .arg("--cache-dir")
            .arg(cache.path())
            .args(["-n", NS])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let get = |kind: &str, name: &str| -> Option<Value> {
        let out = kubectl_cmd(&["get", kind, name, "-o", "json"])
            .output()
            .expect("kubectl runs");
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).ok())
            .flatten()
    };
    let poll = |kind: &str, name: &str, done: &dyn Fn(&Value) -> bool| loop {
        if get(kind, name).is_some_and(|o| done(&o)) {
            return;
        }
        std::thread::sleep(POLL);
    };
    let start = Instant::now();
    for w in written.iter().filter(|w| w.verb != "delete") {
        let body = &w.body;
        let kind = body["kind"].as_str().unwrap_or_default();
        let name = body["metadata"]["name"].as_str().unwrap_or_default();
        let mut apply = kubectl_cmd(&["apply", "-f", "-"]);
        apply.stdin(Stdio::piped());
        let mut child = apply.spawn().expect("kubectl runs");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(body.to_string().as_bytes())
            .expect("manifest written");
        let out = child.wait_with_output().expect("kubectl ends");
        assert!(
            out.status.success(),
            "kubectl apply of {kind} {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        match kind {
            "Job" => {
                poll("job", name, &|j| {
                    j["status"]["succeeded"].as_i64() == Some(1)
                        || j["status"]["failed"].as_i64() == Some(1)
                });
                if body["metadata"]["annotations"]["kubectl-uyuni.io/step"] == "data-sync" {
                    get("secret", "uyuni-migration-data");
                }
            }
            "Certificate" => {
                let secret = body["spec"]["secretName"].as_str().unwrap_or(name);
                poll("secret", secret, &|_| true);
            }
            "Issuer" => poll("issuer", name, &|i| {
                i["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            }),
            "Deployment" => {
                let replicas = body["spec"]["replicas"].as_i64().unwrap_or(1);
                if replicas > 0 {
                    poll("deployment", name, &|d| {
                        d["status"]["readyReplicas"].as_i64().unwrap_or(0) >= replicas
                    });
                }
            }
            _ => {}
        }
    }
    let wall = start.elapsed();
    let log = sim.request_log();
    Orchestration {
        wall,
        requests: by_verb(&log),
        writes: log.iter().filter(|r| r.is_successful_write()).count(),
    }
}

/// One migration by the plugin at `latency_ms`, with what it wrote (for the baseline) and its
/// peak RSS.
fn ours(latency_ms: u64) -> (Orchestration, Vec<WrittenObject>, u64) {
    let sim = start_sim(zero_length_jobs(), latency_ms);
    let measured = migrate(&sim);
    let log = sim.request_log();
    (
        Orchestration {
            wall: measured.wall,
            requests: by_verb(&log),
            writes: log.iter().filter(|r| r.is_successful_write()).count(),
        },
        sim.written(),
        measured.peak_rss_kib,
    )
}

/// Reaction latency: full migrations (zero-length Jobs, no added latency) until `jobs` Jobs
/// have ended; for each Job, the time from the instant the simulated Job controller wrote its
/// final status to the arrival of the plugin's next successful write (the next step's Job or
/// object), both on the simulator's clock. That is the plugin's real path: the watch event,
/// the end of the log, re-observing, planning and the write. Jobs after which the plugin wrote
/// nothing more are not counted.
fn reaction(jobs: usize) -> Vec<Duration> {
    let mut samples = Vec::new();
    while samples.len() < jobs {
        let sim = start_sim(zero_length_jobs(), 0);
        migrate(&sim);
        let log = sim.request_log();
        let writes: Vec<u64> = log
            .iter()
            .filter(|r| r.is_successful_write())
            .map(|r| r.at_us)
            .collect();
        for end in sim.job_ends() {
            if let Some(next) = writes.iter().find(|&&at| at >= end.at_us) {
                let sample = Duration::from_micros(next - end.at_us);
                if std::env::var_os("UYUNI_BENCH_VERBOSE").is_some() {
                    // What the plugin asked in between, to see where the time goes.
                    let between: Vec<String> = log
                        .iter()
                        .filter(|r| (end.at_us..*next).contains(&r.at_us))
                        .map(|r| {
                            format!(
                                "{}ms {} {}",
                                (r.at_us - end.at_us) / 1000,
                                r.verb_class(),
                                r.resource.as_deref().unwrap_or(&r.path)
                            )
                        })
                        .collect();
                    eprintln!(
                        "  {:>9} after Job {}: {}",
                        millis(sample),
                        end.name,
                        between.join(", ")
                    );
                }
                samples.push(sample);
            }
        }
    }
    samples.sort();
    samples
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `--version` start-up: the median of `runs` runs (the bench's fork and exec included, as
/// for any caller).
fn startup(runs: usize) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let out = Command::new(plugin())
                .arg("--version")
                .stdout(Stdio::null())
                .output()
                .expect("the plugin runs");
            assert!(out.status.success());
            t.elapsed()
        })
        .collect();
    times.sort();
    (percentile(&times, 50.0), percentile(&times, 90.0))
}

/// RSS while following a huge Job log: a full migration whose `db-upgrade` Job writes `mib`
/// MiB of generated log first (uyuni-sim makes it as the plugin reads it, so the Job lasts as
/// long as the reading). stderr, where the plugin prints the lines, goes to /dev/null. Returns
/// the wall time, the peak RSS and the RSS at each quarter of the run.
fn log_follow(mib: u64) -> (Duration, u64, [u64; 4]) {
    let mut scenario = zero_length_jobs();
    scenario
        .jobs
        .get_mut("db-upgrade")
        .expect("the migration scenario has a db-upgrade Job")
        .log_bytes = mib << 20;
    let sim = start_sim(scenario, 0);
    let measured = run_measured(migrate_command(&sim, Stdio::null()));
    assert!(measured.success, "migrate with a {mib} MiB log failed");
    let at = |fraction: f64| {
        let t = measured.wall.mul_f64(fraction);
        measured
            .rss
            .iter()
            .rev()
            .find(|(at, _)| *at <= t)
            .map_or(0, |(_, kib)| *kib)
    };
    (
        measured.wall,
        measured.peak_rss_kib,
        [at(0.25), at(0.5), at(0.75), at(0.99)],
    )
}

fn file(name: &str) -> Option<uyuni_core::params::FileInput> {
    let path = fixtures().join(name);
    let content = std::fs::read_to_string(&path).expect("fixture");
    Some(uyuni_core::params::FileInput {
        path: path.display().to_string(),
        content: uyuni_core::secret::SecretString::new(&content),
    })
}

/// `plan` and the whole preview of a migration into an empty namespace, per call.
fn planning() -> (Duration, Duration, usize) {
    let args = uyuni_core::MigrateArgs {
        namespace: NS.into(),
        source_fqdn: SOURCE.into(),
        ssh_user: "root".into(),
        run_id: "20261129180000".into(),
        tool_version: "0.1.0".into(),
        ssh_key_private: file("id_ed25519"),
        ssh_key_public: file("id_ed25519.pub"),
        ssh_known_hosts: file("known_hosts"),
        ..uyuni_core::MigrateArgs::default()
    };
    let params = uyuni_core::MigrateParams::from_args(&args).expect("valid parameters");
    // cert-manager installed, as in the migration run above.
    let mut observed = uyuni_core::Observed::default();
    observed.serve(uyuni_core::object::CustomKind::Issuer);
    observed.serve(uyuni_core::object::CustomKind::Certificate);
    let steps = uyuni_core::preview(&params, &observed)
        .expect("a migration into an empty namespace plans")
        .executed
        .len();
    const N: u32 = 50;
    let t = Instant::now();
    for _ in 0..N {
        std::hint::black_box(uyuni_core::plan(&params, &observed).ok());
    }
    let plan = t.elapsed() / N;
    let t = Instant::now();
    for _ in 0..N {
        std::hint::black_box(uyuni_core::preview(&params, &observed).ok());
    }
    (plan, t.elapsed() / N, steps)
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// One row of the table: what, ours, the baseline, the ratio, the target.
type Row = [String; 5];

fn row(what: &str, ours: String, base: &str, ratio: &str, target: &str) -> Row {
    [what.into(), ours, base.into(), ratio.into(), target.into()]
}

fn main() {
    let plugin_path = plugin();
    let kubectl = kubectl();
    let build = if plugin_path.components().any(|c| c.as_os_str() == "release") {
        "release"
    } else if plugin_path.components().any(|c| c.as_os_str() == "debug") {
        "debug"
    } else {
        "UYUNI_BENCH_PLUGIN"
    };
    eprintln!("plugin {} ({build})", plugin_path.display());
    let latencies: Vec<u64> = std::env::var("UYUNI_BENCH_LATENCIES")
        .ok()
        .map(|l| l.split(',').filter_map(|v| v.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![0, 20, 80]);
    let mut rows: Vec<Row> = Vec::new();
    let mut migration_peak = 0;
    if !skipped("baseline") {
        let version = Command::new(&kubectl)
            .args(["version", "--client"])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_owned()
            })
            .unwrap_or_else(|e| panic!("{} does not run: {e}", kubectl.display()));
        eprintln!("baseline: {} ({version})", kubectl.display());
    }
    for &latency in &latencies {
        eprintln!("migrate at {latency} ms …");
        let (ours, written, peak) = ours(latency);
        migration_peak = migration_peak.max(peak);
        let requests =
            |o: &Orchestration| format!("{} ({}; {} writes)", o.total(), o.verbs(), o.writes);
        let target = if latency == 80 {
            "≥ 10×, < 15 s"
        } else {
            "≥ 10×"
        };
        if skipped("baseline") {
            rows.push(row(
                &format!("migrate, {latency} ms: wall"),
                secs(ours.wall),
                "",
                "",
                target,
            ));
            rows.push(row(
                &format!("migrate, {latency} ms: requests"),
                requests(&ours),
                "",
                "",
                "",
            ));
            continue;
        }
        eprintln!("baseline at {latency} ms …");
        let base = baseline(latency, &written, &kubectl);
        let ratio = ours.wall.as_secs_f64() / base.wall.as_secs_f64();
        rows.push(row(
            &format!("migrate, {latency} ms: wall"),
            secs(ours.wall),
            &secs(base.wall),
            &format!("{ratio:.3} ({:.1}× faster)", 1.0 / ratio),
            target,
        ));
        rows.push(row(
            &format!("migrate, {latency} ms: requests"),
            requests(&ours),
            &requests(&base),
            &format!("{:.2}", ours.total() as f64 / base.total() as f64),
            "",
        ));
    }
    if !skipped("reaction") {
        let jobs = env_u64("UYUNI_BENCH_REACTION_JOBS", 200) as usize;
        eprintln!("reaction over {jobs} Jobs …");
        let samples = reaction(jobs);
        let n = samples.len();
        rows.push(row(
            &format!("reaction, Job end → next write, p50 of {n}"),
            millis(percentile(&samples, 50.0)),
            "",
            "",
            "< 20 ms",
        ));
        rows.push(row(
            &format!(
                "reaction, p99 (max {})",
                millis(percentile(&samples, 100.0))
            ),
            millis(percentile(&samples, 99.0)),
            "",
            "",
            "< 100 ms",
        ));
    }
    let size = std::fs::metadata(&plugin_path).map_or(0, |m| m.len());
    rows.push(row(
        &format!("binary size ({build})"),
        format!("{:.1} MiB", size as f64 / (1 << 20) as f64),
        "",
        "",
        "",
    ));
    let (median, p90) = startup(200);
    rows.push(row(
        &format!("`--version` start-up, median of 200 (p90 {})", millis(p90)),
        millis(median),
        "",
        "",
        "< 10 ms",
    ));
    if migration_peak > 0 {
        rows.push(row(
            "peak RSS, full migration",
            mib(migration_peak),
            "",
            "",
            "< 50 MiB",
        ));
    }
    if !skipped("log") {
        let size = env_u64("UYUNI_BENCH_LOG_MB", 1024);
        eprintln!("following {size} MiB of Job log …");
        let (wall, peak, quarters) = log_follow(size);
        let [a, b, c, d] = quarters.map(mib);
        rows.push(row(
            &format!(
                "RSS following {size} MiB of log ({}): at ¼ ½ ¾ end",
                secs(wall)
            ),
            format!("{a}, {b}, {c}, {d}"),
            "",
            "",
            "flat",
        ));
        rows.push(row(
            "peak RSS, migration following that log",
            mib(peak),
            "",
            "",
            "< 50 MiB",
        ));
    }
    if !skipped("planning") {
        let (plan, preview, steps) = planning();
        rows.push(row("`plan`, empty namespace", millis(plan), "", "", ""));
        rows.push(row(
            &format!("dry-run preview, {steps} steps"),
            millis(preview),
            "",
            "",
            "",
        ));
    }

    println!("| | kubectl-uyuni | baseline (a kubectl per operation) | ours / baseline | target |");
    println!("|---|---|---|---|---|");
    for r in rows {
        println!("| {} |", r.join(" | "));
    }
    println!();
    println!("requests: total (GET/LIST/WATCH/CREATE-PATCH/DELETE/OTHER; successful writes)");
}
