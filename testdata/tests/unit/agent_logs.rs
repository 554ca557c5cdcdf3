use std::sync::Arc;

use http::{Method, Response, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::jiff::Timestamp;
use uyuni_testdata::agent::logs::{
    Body, LogQuery, LogStore, handle, limit, parse_path, rfc3339_nano, select,
};

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

#[test]
fn query_parsing() {
    let q = LogQuery::parse("follow=true&tailLines=2&timestamps=true&limitBytes=10&sinceSeconds=5")
        .expect("parses");
    assert_eq!(
        q,
        LogQuery {
            follow: true,
            timestamps: true,
            tail_lines: Some(2),
            limit_bytes: Some(10),
            since_seconds: Some(5),
            ..LogQuery::default()
        }
    );
    let q = LogQuery::parse("sinceTime=2026-12-01T10%3A00%3A00Z&previous=false").expect("parses");
    assert_eq!(q.since_time, Some(ts("2026-12-01T10:00:00Z")));
    assert!(!q.previous);
    assert!(
        LogQuery::parse("tailLines=-1")
            .expect_err("refused")
            .contains("tailLines")
    );
    assert!(
        LogQuery::parse("follow=maybe")
            .expect_err("refused")
            .contains("follow")
    );
    assert!(
        LogQuery::parse("limitBytes=0")
            .expect_err("refused")
            .contains("limitBytes")
    );
    assert!(LogQuery::parse("sinceSeconds=1&sinceTime=2026-12-01T10:00:00Z").is_err());
    assert_eq!(LogQuery::parse("").expect("empty"), LogQuery::default());
}

#[test]
fn selection_since_tail_timestamps() {
    let lines = vec![
        (ts("2026-12-01T10:00:00Z"), "one".to_owned()),
        (ts("2026-12-01T10:00:05Z"), "two".to_owned()),
        (ts("2026-12-01T10:00:09Z"), "three".to_owned()),
    ];
    let now = ts("2026-12-01T10:00:10Z");
    let all = LogQuery::default();
    assert_eq!(select(&all, &lines, now), ["one\n", "two\n", "three\n"]);
    let tail = LogQuery {
        tail_lines: Some(2),
        ..LogQuery::default()
    };
    assert_eq!(select(&tail, &lines, now), ["two\n", "three\n"]);
    let since = LogQuery {
        since_seconds: Some(6),
        ..LogQuery::default()
    };
    assert_eq!(select(&since, &lines, now), ["two\n", "three\n"]);
    let stamped = LogQuery {
        timestamps: true,
        tail_lines: Some(1),
        ..LogQuery::default()
    };
    assert_eq!(
        select(&stamped, &lines, now),
        ["2026-12-01T10:00:09Z three\n"]
    );
    assert_eq!(
        rfc3339_nano(ts("2026-12-01T10:00:09.120Z")),
        "2026-12-01T10:00:09.12Z"
    );
    let mut left = Some(5);
    assert_eq!(limit("one\ntwo\n".to_owned(), &mut left), "one\nt");
    assert_eq!(left, Some(0));
}

#[test]
fn paths() {
    assert_eq!(
        parse_path("/containerLogs/ns/pod-1/main"),
        Some(("ns".to_owned(), "pod-1".to_owned(), "main".to_owned()))
    );
    assert_eq!(parse_path("/containerLogs/ns/pod-1"), None);
    assert_eq!(parse_path("/exec/ns/pod/c"), None);
}

#[tokio::test]
async fn answers_like_kubelet() {
    let store = Arc::new(LogStore::default());
    store.start("ns", "p", "main");
    store.append("ns", "p", "main", "hello");
    store.append("ns", "p", "main", "world");
    let body = |r: Response<Body>| async move {
        let status = r.status();
        let bytes = r.into_body().collect().await.expect("body").to_bytes();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    };
    let (s, b) = body(
        handle(
            store.clone(),
            &Method::GET,
            "/containerLogs/ns/p/main",
            "tailLines=1",
        )
        .await,
    )
    .await;
    assert_eq!((s, b.as_str()), (StatusCode::OK, "world\n"));
    let (s, b) = body(
        handle(
            store.clone(),
            &Method::GET,
            "/containerLogs/ns/p/main",
            "previous=true",
        )
        .await,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(b.contains("previous terminated container \"main\""), "{b}");
    let (s, _) =
        body(handle(store.clone(), &Method::GET, "/containerLogs/ns/q/main", "").await).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, b) =
        body(handle(store.clone(), &Method::GET, "/containerLogs/ns/p/other", "").await).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(b.contains("waiting to start"), "{b}");
    // After a restart, the last instance's lines are the previous log.
    store.finish("ns", "p", "main");
    store.start("ns", "p", "main");
    let (s, b) = body(
        handle(
            store.clone(),
            &Method::GET,
            "/containerLogs/ns/p/main",
            "previous=true",
        )
        .await,
    )
    .await;
    assert_eq!((s, b.as_str()), (StatusCode::OK, "hello\nworld\n"));
    store.append("ns", "p", "main", "hello");
    store.append("ns", "p", "main", "world");
    // A followed stream ends when the container terminates.
    let follow = handle(
        store.clone(),
        &Method::GET,
        "/containerLogs/ns/p/main",
        "follow=true",
    )
    .await;
    let writer = store.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        writer.append("ns", "p", "main", "later");
        writer.finish("ns", "p", "main");
    });
    let (s, b) = tokio::time::timeout(std::time::Duration::from_secs(5), body(follow))
        .await
        .expect("the followed stream ends");
    assert_eq!((s, b.as_str()), (StatusCode::OK, "hello\nworld\nlater\n"));
}
