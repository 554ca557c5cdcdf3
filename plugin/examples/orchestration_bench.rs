//! Orchestration benchmark (issue 12): a full simulated `migrate` (zero-length Jobs) against
//! `uyuni-sim` at 0, 20 and 80 ms of latency per request — wall time and requests by verb —
//! and the planning time of `plan` and of the whole dry-run preview.
//!
//! ```text
//! cargo build --bins -p kubectl-uyuni && cargo run -p kubectl-uyuni --example orchestration_bench
//! ```
//! (`--release` on both for release figures.) The plugin runs as built next to this example,
//! directly, not through kubectl: the figures are the plugin's own. `UYUNI_BENCH_PLUGIN=PATH`
//! measures another build (say, before a change); `UYUNI_BENCH_LATENCIES=0,20` picks latencies.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use uyuni_testdata::{SimCluster, SimConfig, scenarios};

const NS: &str = "uyuni";
const SOURCE: &str = "uyuni.example.com";
const VERBS: [&str; 6] = ["GET", "LIST", "WATCH", "CREATE/PATCH", "DELETE", "OTHER"];

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

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/fixtures/ssh")
}

/// One full migration at `latency_ms`: wall time and requests by verb.
fn migrate(latency_ms: u64) -> (Duration, BTreeMap<&'static str, usize>) {
    let mut scenario = scenarios::migration();
    for job in scenario.jobs.values_mut() {
        job.duration_ms = 0;
    }
    let sim = SimCluster::start_blocking(SimConfig {
        scenario,
        latency_ms: Some(latency_ms),
        ..SimConfig::default()
    })
    .expect("uyuni-sim starts");
    sim.clear_request_log();
    let f = fixtures();
    let start = Instant::now();
    let out = Command::new(plugin())
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
        .env("UYUNI_SSL_PASSWORD", "ca secret #1")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("the plugin runs (cargo build --bins first)");
    let wall = start.elapsed();
    assert!(
        out.status.success(),
        "migrate failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (wall, sim.request_counts())
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
fn planning() -> (Duration, Duration) {
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
    eprintln!("preview of {steps} steps");
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
    (plan, t.elapsed() / N)
}

fn main() {
    println!("| latency | wall time | requests | {} |", VERBS.join(" | "));
    println!("|---|---|---|{}", "---|".repeat(VERBS.len()));
    // UYUNI_BENCH_LATENCIES=0,20 for a shorter run.
    let latencies: Vec<u64> = std::env::var("UYUNI_BENCH_LATENCIES")
        .ok()
        .map(|l| l.split(',').filter_map(|v| v.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![0, 20, 80]);
    for latency in latencies {
        let (wall, counts) = migrate(latency);
        let total: usize = counts.values().sum();
        let by_verb: Vec<String> = VERBS
            .iter()
            .map(|v| counts.get(v).copied().unwrap_or(0).to_string())
            .collect();
        println!(
            "| {latency} ms | {:.2} s | {total} | {} |",
            wall.as_secs_f64(),
            by_verb.join(" | ")
        );
    }
    let (plan, preview) = planning();
    println!();
    println!("| planning (empty namespace) | time |");
    println!("|---|---|");
    println!("| `plan` | {:.3} ms |", plan.as_secs_f64() * 1e3);
    println!(
        "| dry-run preview | {:.3} ms |",
        preview.as_secs_f64() * 1e3
    );
}
