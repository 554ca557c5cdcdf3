//! Benchmark of the data-sync script's copy (issue 15): `core/scripts/data-sync.sh` run under
//! bash against a generated source tree through the real rsync, with a local transport in place of
//! ssh (the tests' ssh stub), side by side with a plain `rsync -a` of the same tree in the same
//! run; then a 1 % change and the final run, whose outage window (from `spacewalk-service stop`
//! to the script's end) is set against a plain rsync of that delta.
//!
//! `cargo bench -p kubectl-uyuni-core --bench data_sync` (size: `UYUNI_BENCH_SYNC_MB`, default
//! 2048; the tree lives in the temporary directory, three copies of it). It prints figures;
//! it asserts nothing. With `UYUNI_BENCH_LOG_DIR` set, the logs of the script's runs are written
//! there (`prepare.log`, `compress.log`, `final.log`): their status lines carry each volume's
//! copy time, for profiling.

#[path = "../tests/data_sync_script/world.rs"]
mod world;

use std::fs;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use uyuni_core::sync_progress::{Estimate, SyncLine};
use world::{World, script};

/// Files of the generated tree: packages of 4 MiB, database segments of 64 MiB (the split of a
/// real server is more packages than database; half and half keeps both kinds of file big
/// enough to matter).
const PACKAGE: usize = 4 << 20;
const SEGMENT: usize = 64 << 20;

fn random_file(path: &Path, size: usize, urandom: &mut fs::File) {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).expect("mkdir");
    }
    let mut data = vec![0u8; size];
    urandom.read_exact(&mut data).expect("urandom");
    fs::File::create(path)
        .and_then(|mut f| f.write_all(&data))
        .expect("write");
}

/// The generated files, relative to the source root.
fn generate(src: &Path, megabytes: usize) -> Vec<String> {
    let mut urandom = fs::File::open("/dev/urandom").expect("/dev/urandom");
    let half = megabytes << 19;
    let mut files = Vec::new();
    for i in 0..half.div_ceil(PACKAGE) {
        let rel = format!("/var/spacewalk/packages/1/bench/p{i:05}.rpm");
        random_file(&src.join(&rel[1..]), PACKAGE, &mut urandom);
        files.push(rel);
    }
    for i in 0..half.div_ceil(SEGMENT) {
        let rel = format!("/var/lib/pgsql/data/base/16384/{}", 20000 + i);
        random_file(&src.join(&rel[1..]), SEGMENT, &mut urandom);
        files.push(rel);
    }
    files
}

/// Times `f` after writing back what earlier copies left dirty, so that no copy pays for the
/// one before it.
fn timed(f: impl FnOnce()) -> Duration {
    let _ = Command::new("sync").status();
    let t = Instant::now();
    f();
    t.elapsed()
}

fn plain_rsync(from: &Path, to: &Path) {
    let out = Command::new("rsync")
        .arg("-a")
        .arg(format!("{}/", from.display()))
        .arg(format!("{}/", to.display()))
        .output()
        .expect("rsync runs");
    assert!(out.status.success(), "plain rsync: {out:?}");
}

/// The same plain `rsync -a`, but through the script's transport (the ssh stub): what the
/// script's copy can be held to, since rsync over a remote shell moves data through a pipe
/// and a local copy does not.
fn transport_rsync(w: &World, to: &Path) {
    let out = Command::new("rsync")
        .arg("-a")
        .arg("-e")
        .arg(w.base.join("bin/ssh"))
        .arg("root@uyuni.example.com:/")
        .arg(format!("{}/", to.display()))
        .env("FAKE_SRC", &w.src)
        .env("FAKE_STATE", &w.state)
        .env("FAKE_LOG", w.state.join("transport-log"))
        .output()
        .expect("rsync runs");
    assert!(out.status.success(), "rsync through the transport: {out:?}");
}

/// Runs the script; returns its log (stdout).
fn run(w: &World, prepare: bool, compress: bool) -> String {
    let out = w.run_script(&uyuni_core::scripts::data_sync::DataSyncScript {
        compress,
        ..script(prepare, "root", w.paths())
    });
    assert!(
        out.status.success(),
        "the script failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Keeps a run's log in `UYUNI_BENCH_LOG_DIR`, when set.
fn keep_log(name: &str, log: &str) {
    if let Some(dir) = std::env::var_os("UYUNI_BENCH_LOG_DIR") {
        let dir = Path::new(&dir);
        fs::create_dir_all(dir).expect("log dir");
        fs::write(dir.join(name), log).expect("write log");
    }
}

/// The estimate line of a prepare run's log.
fn estimate(log: &str) -> Option<Estimate> {
    log.lines()
        .find_map(|l| match uyuni_core::sync_progress::parse(l) {
            Some(SyncLine::Estimate(e)) => Some(e),
            _ => None,
        })
}

fn mib_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / d.as_secs_f64()
}

fn main() {
    let megabytes: usize = std::env::var("UYUNI_BENCH_SYNC_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2048);
    let w = World::with_real_rsync(true);
    let files = generate(&w.src, megabytes);
    let total: u64 = files
        .iter()
        .map(|f| {
            fs::metadata(w.src.join(&f[1..]))
                .map(|m| m.len())
                .unwrap_or(0)
        })
        .sum();
    let plain = tempfile::tempdir().expect("tempdir");
    // Read once so that both copies start from the page cache.
    plain_rsync(&w.src, plain.path());
    fs::remove_dir_all(plain.path()).expect("clear");
    fs::create_dir_all(plain.path()).expect("mkdir");

    let t_plain = timed(|| plain_rsync(&w.src, plain.path()));
    let transported = tempfile::tempdir().expect("tempdir");
    let t_transport = timed(|| transport_rsync(&w, transported.path()));
    let mut prepare_log = String::new();
    let t_script = timed(|| prepare_log = run(&w, true, false));
    keep_log("prepare.log", &prepare_log);
    let measured = estimate(&prepare_log).expect("the prepare run prints its estimate");
    let compressed = World::with_real_rsync(true);
    for f in &files {
        let to = compressed.src.join(&f[1..]);
        fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        fs::hard_link(w.src.join(&f[1..]), &to).expect("link");
    }
    let t_compressed = timed(|| keep_log("compress.log", &run(&compressed, true, true)));
    drop(compressed);

    // 1 %: rewrite every hundredth file (at least one), as a day of package syncs would.
    let mut urandom = fs::File::open("/dev/urandom").expect("/dev/urandom");
    let mut delta = 0u64;
    for f in files.iter().step_by(100) {
        let path = w.src.join(&f[1..]);
        let size = fs::metadata(&path).map(|m| m.len()).unwrap_or(0) as usize;
        random_file(&path, size, &mut urandom);
        delta += size as u64;
    }
    let t_final = timed(|| keep_log("final.log", &run(&w, false, false)));
    let ended = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let stopped: f64 = fs::read_to_string(w.state.join("spacewalk-service-stop-at"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .expect("the stub recorded the stop");
    let window = ended - stopped;
    let t_plain_delta = timed(|| plain_rsync(&w.src, plain.path()));
    let t_transport_delta = timed(|| transport_rsync(&w, transported.path()));

    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "data-sync benchmark: {} MiB in {} files, real rsync, local transport, {nproc} cores",
        total >> 20,
        files.len()
    );
    println!(
        "{:<38} {:>9} {:>11} {:>24}",
        "", "seconds", "MiB/s", "against plain rsync -a"
    );
    let row = |name: &str, d: Duration, bytes: u64, base: Duration| {
        println!(
            "{name:<38} {:>9.2} {:>11.0} {:>23.2}×",
            d.as_secs_f64(),
            mib_per_s(bytes, d),
            base.as_secs_f64() / d.as_secs_f64()
        );
    };
    row("plain rsync -a, full copy", t_plain, total, t_plain);
    row(
        "plain rsync -a, same transport",
        t_transport,
        total,
        t_plain,
    );
    row("script (prepare), full copy", t_script, total, t_plain);
    row(
        "script (prepare), its copy pass",
        Duration::from_millis(measured.copy_ms),
        total,
        t_plain,
    );
    row("script --compress, full copy", t_compressed, total, t_plain);
    println!("after a 1 % change ({} MiB):", delta >> 20);
    row(
        "plain rsync -a of the delta",
        t_plain_delta,
        delta,
        t_plain_delta,
    );
    row(
        "plain rsync -a, same transport",
        t_transport_delta,
        delta,
        t_plain_delta,
    );
    row(
        "script (final run), whole Job",
        t_final,
        delta,
        t_plain_delta,
    );
    println!(
        "{:<38} {:>9.2}   (the catch-up copy moved the delta before the stop; goal ≤ 1.2 × {:.2} s + the server's start)",
        "outage window inside the Job",
        window,
        t_plain_delta.as_secs_f64()
    );
    let predicted = measured
        .final_copy_ms()
        .map(|c| (c + measured.rest_ms) as f64 / 1000.0);
    println!(
        "{:<38} {:>9}   (the prepare run's measure: a scan of {:.2} s, {} B left, its later steps {:.2} s; its copy {:.2} s of it)",
        "window predicted by the prepare run",
        predicted.map_or("unknown".to_owned(), |p| format!("{p:.2}")),
        measured.scan_ms as f64 / 1000.0,
        measured.delta_bytes,
        measured.rest_ms as f64 / 1000.0,
        measured.copy_ms as f64 / 1000.0,
    );
    println!(
        "throughput ratio (plain time / script time): {:.2} locally, {:.2} through the same transport (goal ≥ 0.9)",
        t_plain.as_secs_f64() / t_script.as_secs_f64(),
        t_transport.as_secs_f64() / t_script.as_secs_f64()
    );
}
