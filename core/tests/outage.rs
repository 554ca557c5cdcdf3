//! The outage report of a final run (`core::outage`), from the times the cluster recorded.

use crate::common;

use common::{DATA_SECRET, after_migration, params};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use uyuni_core::builders::{data_sync, server::SERVER_DEPLOYMENT};
use uyuni_core::catalogue::names;
use uyuni_core::object::{Kind, Object};
use uyuni_core::observed::Observed;
use uyuni_core::outage::{self, OutageReport};
use uyuni_core::scripts::data_keys;

const T0: i64 = 1_800_000_000;

fn time(s: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(s).expect("time"))
}

/// A finished migration whose final sync ran from `sync.0` to `sync.1`, whose database became
/// Available at `db` and the server at `server`; `stop` is what the sync recorded.
fn migrated(sync: (i64, i64), db: i64, server: i64, stop: Option<(i64, i64)>) -> Observed {
    let params = params();
    let mut o = after_migration(&params);
    let job_name = data_sync::data_sync_job(&params)
        .metadata
        .name
        .expect("name");
    let Some(Object::Job(job)) = o.get(Kind::Job, &job_name).cloned() else {
        panic!("the final sync Job");
    };
    let mut job = job;
    let status = job.status.get_or_insert_with(Default::default);
    status.start_time = Some(time(sync.0));
    status.completion_time = Some(time(sync.1));
    o.insert(Object::Job(job));
    for (name, at) in [(names::DB_DEPLOYMENT, db), (SERVER_DEPLOYMENT, server)] {
        let Some(Object::Deployment(mut d)) = o.get(Kind::Deployment, name).cloned() else {
            panic!("Deployment {name}");
        };
        let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        d.metadata.generation = Some(1);
        d.status = Some(DeploymentStatus {
            observed_generation: Some(1),
            replicas: Some(replicas),
            updated_replicas: Some(replicas),
            ready_replicas: Some(replicas),
            available_replicas: Some(replicas),
            conditions: Some(vec![DeploymentCondition {
                type_: "Available".into(),
                status: "True".into(),
                last_transition_time: Some(time(at)),
                ..Default::default()
            }]),
            ..Default::default()
        });
        o.insert(Object::Deployment(d));
    }
    if let Some((started, stopped)) = stop {
        let Some(Object::Secret(mut s)) = o.get(Kind::Secret, DATA_SECRET).cloned() else {
            panic!("the data Secret");
        };
        let data = s.data.get_or_insert_with(Default::default);
        for (key, value) in [
            (data_keys::OUTAGE_STARTED_AT, started),
            (data_keys::SERVICES_STOPPED_AT, stopped),
        ] {
            data.insert(key.into(), ByteString(value.to_string().into_bytes()));
        }
        o.insert(Object::Secret(s));
    }
    o
}

fn phases(report: &OutageReport) -> Vec<(&str, i64)> {
    report.phases.iter().map(|p| (p.name, p.seconds)).collect()
}

#[test]
fn the_outage_runs_from_the_recorded_stop_to_the_server_being_ready() {
    let o = migrated((T0, T0 + 130), T0 + 190, T0 + 250, Some((T0 + 10, T0 + 14)));
    let report = outage::report(&o).expect("a report");
    assert!(report.stop_recorded);
    assert_eq!(report.seconds, 240);
    assert_eq!(
        phases(&report),
        [
            ("stop", 4),
            ("copy", 116),
            ("database", 60),
            ("server-start", 60)
        ]
    );
    assert_eq!(report.phases.iter().map(|p| p.seconds).sum::<i64>(), 240);
    assert_eq!(
        report.text(),
        "The source was down for 4m 00s until the server was ready (the source's services stopped 4s, the final copy 1m 56s, database fix-up, upgrade and start 1m 00s, TLS, services and the server's start 1m 00s)."
    );
}

#[test]
fn without_a_recorded_stop_the_outage_counts_from_the_syncs_start_and_says_so() {
    let o = migrated((T0, T0 + 30), T0 + 40, T0 + 45, None);
    let report = outage::report(&o).expect("a report");
    assert!(!report.stop_recorded);
    assert_eq!(report.seconds, 45);
    assert_eq!(
        phases(&report),
        [("copy", 30), ("database", 10), ("server-start", 5)]
    );
    assert!(
        report
            .text()
            .ends_with("; counted from the final sync's start.")
    );
}

#[test]
fn clocks_a_little_apart_never_give_a_negative_phase() {
    // The database Deployment seen Available a second before the Job's completion time.
    let o = migrated((T0, T0 + 30), T0 + 29, T0 + 60, Some((T0 + 2, T0 + 3)));
    let report = outage::report(&o).expect("a report");
    assert!(report.phases.iter().all(|p| p.seconds >= 0), "{report:?}");
    assert_eq!(report.seconds, 58);
    // A recorded stop after the Job's end is not believed.
    let o = migrated((T0, T0 + 30), T0 + 40, T0 + 50, Some((T0 + 35, T0 + 36)));
    assert!(!outage::report(&o).expect("a report").stop_recorded);
}

#[test]
fn no_report_before_the_server_is_ready_or_for_data_of_another_job() {
    let mut o = migrated((T0, T0 + 30), T0 + 40, T0 + 45, Some((T0 + 1, T0 + 2)));
    let Some(Object::Deployment(mut d)) = o.get(Kind::Deployment, SERVER_DEPLOYMENT).cloned()
    else {
        panic!("uyuni");
    };
    d.status.as_mut().expect("status").ready_replicas = Some(0);
    o.insert(Object::Deployment(d));
    assert_eq!(outage::report(&o), None);

    // Times recorded by another Job's run are not this sync's.
    let mut o = migrated((T0, T0 + 30), T0 + 40, T0 + 45, Some((T0 + 1, T0 + 2)));
    data_of_another_job(&mut o);
    assert!(!outage::report(&o).expect("a report").stop_recorded);
}

#[test]
fn a_prepare_only_state_has_no_report() {
    let p = uyuni_core::params::MigrateParams {
        prepare: true,
        ..params()
    };
    assert_eq!(outage::report(&common::after_sync(&p)), None);
}

/// The data Secret says another Job wrote it.
fn data_of_another_job(o: &mut Observed) {
    let Some(Object::Secret(mut s)) = o.get(Kind::Secret, DATA_SECRET).cloned() else {
        panic!("secret");
    };
    s.data.as_mut().expect("data").insert(
        data_keys::JOB.into(),
        ByteString(b"uyuni-data-sync-other".to_vec()),
    );
    o.insert(Object::Secret(s));
}

/// A prepare run's state whose data Secret holds `measure` (key, value) pairs.
fn prepared(measure: &[(&str, &str)]) -> Observed {
    let p = uyuni_core::params::MigrateParams {
        prepare: true,
        ..params()
    };
    let mut o = common::after_sync(&p);
    let Some(Object::Secret(mut s)) = o.get(Kind::Secret, DATA_SECRET).cloned() else {
        panic!("the data Secret");
    };
    let data = s.data.get_or_insert_with(Default::default);
    for (key, value) in measure {
        data.insert((*key).into(), ByteString(value.as_bytes().to_vec()));
    }
    o.insert(Object::Secret(s));
    o
}

const MEASURE: &[(&str, &str)] = &[
    (data_keys::DELTA_BYTES, "104857600"),
    (data_keys::SCAN_MS, "4200"),
    (data_keys::COPIED_BYTES, "10737418240"),
    (data_keys::COPY_MS, "204800"),
    (data_keys::REST_MS, "2500"),
];

#[test]
fn a_prepare_run_expects_its_scan_the_delta_at_its_rate_and_its_later_steps() {
    let window = outage::expected(&prepared(MEASURE)).expect("an expected window");
    // 10 GiB in 204.8 s: 50 MiB/s; 100 MiB at that rate is 2 s, after a 4.2 s scan.
    assert_eq!(window.copy_bytes_per_second, Some(50 << 20));
    assert_eq!(window.delta_bytes, 100 << 20);
    assert_eq!(window.scan_seconds, 5);
    assert_eq!(window.copy_seconds, Some(7));
    assert_eq!(window.after_copy_seconds, 3);
    // No final run in this namespace yet: the stop and the start are unknown.
    assert_eq!(window.stop_and_start_seconds, None);
    assert_eq!(window.seconds, None);
    let text = window.text();
    assert!(
        text.starts_with("Expected window of the final run: about 10s plus the services' stop and the server's start."),
        "{text}"
    );
    assert!(
        text.contains("100.0 MiB left after this copy at this run's 50.0 MiB/s"),
        "{text}"
    );
    assert!(text.contains("server's start: unknown"), "{text}");
    let json = serde_json::to_value(&window).expect("json");
    assert_eq!(json["deltaBytes"], 100 << 20);
    assert_eq!(json["copySeconds"], 7);
    assert!(json["stopAndStartSeconds"].is_null());
}

#[test]
fn no_expected_window_without_a_measure_of_this_prepare_job() {
    assert_eq!(
        outage::expected(&prepared(&[])),
        None,
        "data of an older version"
    );
    let mut o = prepared(MEASURE);
    data_of_another_job(&mut o);
    assert_eq!(outage::expected(&o), None, "another Job's measure");
    // A delta and nothing copied to measure a rate on: the copy is unknown, and said so.
    let mut measure = MEASURE.to_vec();
    measure[2] = (data_keys::COPIED_BYTES, "0");
    let window = outage::expected(&prepared(&measure)).expect("a window");
    assert_eq!(
        (window.copy_seconds, window.copy_bytes_per_second),
        (None, None)
    );
    assert!(
        window
            .text()
            .starts_with("Expected window of the final run: unknown.")
    );
}

/// The dry run of the final run after a measured `--prepare` expects the outage from that
/// measure (delta left, copy rate, scan), not from how long the prepare's copy took.
#[test]
fn the_final_runs_dry_run_expects_the_outage_the_prepare_measured() {
    let observed = prepared(MEASURE);
    let final_run = params();
    let preview = uyuni_core::preview(&final_run, &observed).expect("the final run plans");
    let safety = uyuni_core::preview::safety(&final_run, &observed, &preview);
    let window = safety
        .expected_window
        .as_ref()
        .expect("the measured window");
    assert_eq!(window.copy_seconds, Some(7));
    let text = safety.render("uyuni.example.com");
    assert!(
        text.contains("Expected outage: the final copy and the data sync's last steps, about 10s (100.0 MiB left after the copy Job"),
        "{text}"
    );
    // Without a measure, the last copy's length is what is expected, as before.
    let unmeasured = prepared(&[]);
    let preview = uyuni_core::preview(&final_run, &unmeasured).expect("the final run plans");
    let safety = uyuni_core::preview::safety(&final_run, &unmeasured, &preview);
    assert_eq!(safety.expected_window, None);
    assert!(
        !safety
            .render("uyuni.example.com")
            .contains("data sync's last steps"),
        "{}",
        safety.render("uyuni.example.com")
    );
    let json = serde_json::to_value(&safety).expect("json");
    assert!(json.get("expectedWindow").is_none(), "{json}");
}

/// The source is down from its final copy until both Deployments are ready: what an
/// interrupted run says (issue 38).
#[test]
fn the_source_is_down_after_the_final_copy_until_the_server_is_ready() {
    let ready = migrated((T0, T0 + 30), T0 + 40, T0 + 45, None);
    assert!(!outage::source_down(&ready), "the server serves");
    let mut starting = ready.clone();
    let Some(Object::Deployment(mut server)) =
        starting.get(Kind::Deployment, SERVER_DEPLOYMENT).cloned()
    else {
        panic!("Deployment {SERVER_DEPLOYMENT}");
    };
    server.status = None;
    starting.insert(Object::Deployment(server));
    assert!(
        outage::source_down(&starting),
        "the server is not ready yet"
    );
    assert!(!outage::source_down(&Observed::default()), "no final copy");
}
