//! Unit tests of `src/output.rs`.

use std::time::{Duration, Instant};

use kubectl_uyuni::cli::{ColorChoice, OutputFormat};
use kubectl_uyuni::output::*;
use serde::Serialize;
use std::ffi::OsStr;
use uyuni_core::sync_progress::SyncProgress;

#[test]
fn color_follows_flag_then_no_color_then_terminal() {
    assert!(use_color(ColorChoice::Always, false, Some(OsStr::new("1"))));
    assert!(!use_color(ColorChoice::Never, true, None));
    assert!(use_color(ColorChoice::Auto, true, None));
    assert!(use_color(ColorChoice::Auto, true, Some(OsStr::new(""))));
    assert!(!use_color(ColorChoice::Auto, true, Some(OsStr::new("1"))));
    assert!(!use_color(ColorChoice::Auto, false, None));
    assert_eq!(paint("x", RED, false), "x");
    assert_eq!(paint("x", RED, true), "\x1b[31mx\x1b[0m");
}

#[test]
fn durations_and_sizes_read_well() {
    assert_eq!(human_elapsed(Duration::from_millis(420)), "0.4s");
    assert_eq!(human_elapsed(Duration::from_secs(12)), "12s");
    assert_eq!(human_elapsed(Duration::from_secs(62)), "1m02s");
    assert_eq!(human_elapsed(Duration::from_secs(7500)), "2h05m");
    assert_eq!(human_bytes(512), "512 B");
    assert_eq!(human_bytes(1536), "1.5 KiB");
    assert_eq!(human_bytes(1_288_490_189), "1.2 GiB");
    assert_eq!(plain_stamp(Duration::from_millis(12_340)), "[   12.3s]");
}

#[test]
fn rsync_progress2_lines_are_understood() {
    let p = RsyncProgress::parse(
        "  1,234,567,890  45%   11.84MB/s    0:01:39 (xfr#1234, to-chk=10/5678)",
    )
    .expect("a progress2 line");
    assert_eq!(p.bytes, 1_234_567_890);
    assert_eq!(p.percent, 45);
    assert_eq!(p.rate, "11.84MB/s");
    assert_eq!(p.time, "0:01:39");
    assert_eq!(p.files_transferred, Some(1234));
    assert_eq!(p.to_check, Some((10, 5678)));
    assert_eq!(
        p.summary(),
        " 45%  1.1 GiB  11.84MB/s  0:01:39  1234 files sent, 10 of 5678 left to check"
    );
    let ir =
        RsyncProgress::parse("     32,768   0%    0.00kB/s    0:00:00 (xfr#1, ir-chk=1000/1002)")
            .expect("ir-chk");
    assert_eq!(ir.to_check, Some((1000, 1002)));
    // The simulated cluster's lines carry no parenthesis.
    let bare = RsyncProgress::parse("  5,368,709,120 100%   232.73MB/s    0:00:22").expect("bare");
    assert_eq!((bare.percent, bare.files_transferred), (100, None));
    for not in [
        "Synchronizing /var/lib/pgsql ...",
        "sent 1,234 bytes  received 56 bytes",
        "",
        "12 45% fast 0:01",
    ] {
        assert_eq!(RsyncProgress::parse(not), None, "{not:?}");
    }
    assert_eq!(last_segment("a 1%\r b 2%\r"), " b 2%");
}

#[test]
fn the_live_view_lists_steps_with_times_and_the_running_jobs_log() {
    let t0 = Instant::now();
    let s = |secs| t0 + Duration::from_secs(secs);
    let state = LiveState {
        steps: vec![
            StepState {
                id: "namespace".into(),
                line: "create the namespace (namespace/uyuni)".into(),
                started: s(0),
                ended: Some((s(1), Outcome::Done)),
            },
            StepState {
                id: "data-sync".into(),
                line: "run the data sync (job/uyuni-data-sync-1)".into(),
                started: s(1),
                ended: None,
            },
        ],
        position: (2, 4),
        activity: Some("pod p of job/j: Running".into()),
        log_tail: ["Synchronizing /var/lib/pgsql ...".to_owned()].into(),
        rsync: RsyncProgress::parse("  1,024  45%  1.00MB/s  0:00:09"),
        sync: SyncProgress::default(),
        last_plain_progress: None,
    };
    let text = render_live(&state, s(63), false, 200, 0, true);
    assert_eq!(
        text,
        "✔ create the namespace (namespace/uyuni)  1.0s\n\
         ⠋ run the data sync (job/uyuni-data-sync-1)  1m02s\n    \
         pod p of job/j: Running\n    \
         rsync  45%  1.0 KiB  1.00MB/s  0:00:09\n    \
         │ Synchronizing /var/lib/pgsql ...\n  \
         … 2 more steps planned"
    );
    let narrow = render_live(&state, s(63), false, 30, 1, true);
    assert!(narrow.lines().all(|l| l.chars().count() <= 30), "{narrow}");
    assert!(narrow.contains('⠙'));
    let coloured = render_live(&state, s(63), true, 200, 0, true);
    assert!(coloured.contains("\x1b[32m✔\x1b[0m"), "{coloured}");

    // Finished steps beyond the last three fold into one line while running, not at the end.
    let mut many = LiveState::default();
    for i in 0..6 {
        many.steps.push(StepState {
            id: format!("s{i}"),
            line: format!("step {i}"),
            started: s(i),
            ended: Some((s(i + 1), Outcome::Done)),
        });
    }
    many.steps.push(StepState {
        id: "running".into(),
        line: "running".into(),
        started: s(6),
        ended: None,
    });
    let live = render_live(&many, s(7), false, 200, 0, true);
    assert_eq!(
        live.lines().collect::<Vec<_>>(),
        [
            "✔ 3 steps done  3.0s",
            "✔ step 3  1.0s",
            "✔ step 4  1.0s",
            "✔ step 5  1.0s",
            "⠋ running  1.0s"
        ]
    );
    assert_eq!(
        render_live(&many, s(7), false, 200, 0, false)
            .lines()
            .count(),
        7
    );
}

#[test]
fn the_live_view_shows_each_volume_of_a_data_sync() {
    let t0 = Instant::now();
    let mut state = LiveState {
        steps: vec![StepState {
            id: "data-sync".into(),
            line: "run the data sync (job/j)".into(),
            started: t0,
            ended: None,
        }],
        ..LiveState::default()
    };
    for line in [
        "uyuni-sync: pass=serving volumes=var-pgsql,var-spacewalk,srv-www,etc-rhn,var-cache",
        "[var-pgsql] uyuni-sync: volume=var-pgsql state=copying",
        "[var-pgsql] uyuni-sync: volume=var-pgsql state=copying bytes=1610612736 percent=45",
        "[var-spacewalk] uyuni-sync: volume=var-spacewalk state=copying",
        "[srv-www] uyuni-sync: volume=srv-www state=done bytes=10 ms=20",
        "[etc-rhn] uyuni-sync: volume=etc-rhn state=failed code=23",
    ] {
        assert!(state.sync.update(line), "{line}");
    }
    let text = render_live(&state, t0 + Duration::from_secs(5), false, 200, 0, true);
    assert_eq!(
        text.lines().skip(1).collect::<Vec<_>>(),
        [
            "    volumes (copy while the source serves): 1 done, 2 copying, 1 waiting, 1 failed",
            "      var-pgsql: copying  45%  1.5 GiB",
            "      var-spacewalk: copying",
            "      etc-rhn: failed (rsync exit code 23)",
        ],
        "{text}"
    );
    // A new pass starts every volume over; before the first, nothing is shown.
    state
        .sync
        .update("uyuni-sync: pass=stopped volumes=var-pgsql,srv-www");
    assert_eq!(sync_lines(&state.sync), ["volumes (final copy): 2 waiting"]);
    assert!(sync_lines(&SyncProgress::default()).is_empty());
}

#[test]
fn data_renders_in_each_format() {
    #[derive(Serialize)]
    struct D {
        name: &'static str,
        n: u32,
    }
    let d = D { name: "x", n: 2 };
    let human = |d: &D| format!("{} {}\n", d.name, d.n);
    assert_eq!(
        render_data(OutputFormat::Human, &d, human).expect("human"),
        "x 2\n"
    );
    let json = render_data(OutputFormat::Json, &d, human).expect("json");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&json).expect("parses"),
        serde_json::json!({"name": "x", "n": 2})
    );
    let yaml = render_data(OutputFormat::Yaml, &d, human).expect("yaml");
    assert_eq!(
        serde_saphyr::from_str::<serde_json::Value>(&yaml).expect("parses"),
        serde_json::json!({"name": "x", "n": 2})
    );
}

#[test]
fn error_chains_do_not_repeat_themselves() {
    let io = std::io::Error::other("disk on fire");
    let err = anyhow::Error::new(io)
        .context("cannot read x: disk on fire")
        .context("cannot start");
    assert_eq!(
        error_chain(&err),
        "cannot start: cannot read x: disk on fire"
    );
}

#[test]
fn plain_options_are_plain() {
    let r = Reporter::new(ReporterOptions::plain());
    assert_eq!(r.display(), Display::Plain);
    let q = Reporter::new(ReporterOptions {
        quiet: true,
        ..ReporterOptions::plain()
    });
    assert_eq!(q.display(), Display::Quiet);
}
