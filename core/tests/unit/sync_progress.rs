use uyuni_core::sync_progress::{Counts, Estimate, SyncLine, SyncProgress, VolumeState, parse};

#[test]
fn status_lines_parse_with_or_without_the_volume_prefix() {
    assert_eq!(
        parse("uyuni-sync: pass=serving volumes=a,b"),
        Some(SyncLine::Pass {
            pass: "serving".into(),
            volumes: vec!["a".into(), "b".into()]
        })
    );
    assert_eq!(
        parse("[var-pgsql] uyuni-sync: volume=var-pgsql state=copying bytes=1048576 percent=45"),
        Some(SyncLine::Volume {
            volume: "var-pgsql".into(),
            state: VolumeState::Copying {
                bytes: Some(1_048_576),
                percent: Some(45)
            }
        })
    );
    assert_eq!(
        parse("uyuni-sync: volume=a state=copying"),
        Some(SyncLine::Volume {
            volume: "a".into(),
            state: VolumeState::Copying {
                bytes: None,
                percent: None
            }
        })
    );
    assert_eq!(
        parse("uyuni-sync: volume=a state=done bytes=12 ms=340 later=1"),
        Some(SyncLine::Volume {
            volume: "a".into(),
            state: VolumeState::Done {
                bytes: 12,
                millis: 340
            }
        }),
        "an unknown key is ignored"
    );
    assert_eq!(
        parse("uyuni-sync: volume=a state=failed code=23"),
        Some(SyncLine::Volume {
            volume: "a".into(),
            state: VolumeState::Failed { code: 23 }
        })
    );
    assert_eq!(
        parse("uyuni-sync: estimate delta_bytes=1 scan_ms=2 copied_bytes=3 copy_ms=4 rest_ms=5"),
        Some(SyncLine::Estimate(Estimate {
            delta_bytes: 1,
            scan_ms: 2,
            copied_bytes: 3,
            copy_ms: 4,
            rest_ms: 5
        }))
    );
    for not in [
        "Synchronizing /var/lib/pgsql/data (var-pgsql: quick (size+mtime))",
        "uyuni-sync: volume=a state=sleeping",
        "uyuni-sync: volume=a state=done bytes=x ms=1",
        "uyuni-sync: estimate delta_bytes=1",
        "uyuni-sync: state=done bytes=1 ms=1",
        "[a uyuni-sync: volume=a state=skipped",
        "say uyuni-sync: volume=a state=skipped",
        "",
    ] {
        assert_eq!(parse(not), None, "{not:?}");
    }
}

#[test]
fn the_progress_follows_each_volume_through_a_pass_and_starts_over_with_the_next() {
    let mut p = SyncProgress::default();
    assert!(!p.update("Connecting to uyuni.example.com..."));
    assert!(!p.started());
    assert!(p.update("uyuni-sync: pass=serving volumes=a,b,c,d"));
    assert_eq!(
        p.counts(),
        Counts {
            waiting: 4,
            ..Counts::default()
        }
    );
    p.update("[a] uyuni-sync: volume=a state=copying");
    p.update("[a] uyuni-sync: volume=a state=copying bytes=10 percent=50");
    p.update("[b] uyuni-sync: volume=b state=skipped");
    p.update("[c] uyuni-sync: volume=c state=copying");
    p.update("[c] uyuni-sync: volume=c state=done bytes=7 ms=3");
    p.update("[d] uyuni-sync: volume=d state=failed code=12");
    assert_eq!(
        p.counts(),
        Counts {
            copying: 1,
            done: 1,
            skipped: 1,
            failed: 1,
            ..Counts::default()
        }
    );
    assert_eq!(
        p.state("a"),
        Some(&VolumeState::Copying {
            bytes: Some(10),
            percent: Some(50)
        })
    );
    // A repeated start line keeps the figures.
    p.update("uyuni-sync: volume=a state=copying");
    assert_eq!(
        p.state("a"),
        Some(&VolumeState::Copying {
            bytes: Some(10),
            percent: Some(50)
        })
    );
    p.update("uyuni-sync: pass=stopped volumes=a,b");
    assert_eq!(p.pass.as_deref(), Some("stopped"));
    assert_eq!(p.volumes.len(), 2);
    assert_eq!(p.counts().waiting, 2);
}

#[test]
fn the_final_copy_is_the_scan_then_the_delta_at_the_runs_rate() {
    let e = Estimate {
        delta_bytes: 50 << 20,
        scan_ms: 4_000,
        copied_bytes: 1000 << 20,
        copy_ms: 20_000,
        rest_ms: 3_000,
    };
    assert_eq!(e.bytes_per_second(), Some(50 << 20));
    assert_eq!(e.final_copy_ms(), Some(5_000));
    let nothing_left = Estimate {
        delta_bytes: 0,
        copied_bytes: 0,
        ..e
    };
    assert_eq!(nothing_left.bytes_per_second(), None);
    assert_eq!(nothing_left.final_copy_ms(), Some(4_000));
    let no_rate = Estimate {
        copied_bytes: 0,
        ..e
    };
    assert_eq!(no_rate.final_copy_ms(), None);
}
