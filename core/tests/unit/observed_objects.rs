use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use uyuni_core::labels;
use uyuni_core::object::{Kind, Object, ObjectRef};
use uyuni_core::observed::objects::annotation;
use uyuni_core::observed::{JobState, Objects, StepAttempts, job_state};

fn job(name: &str, step: &str, hash: &str, state: JobState, created: Option<i64>) -> Object {
    let condition = |type_: &str| JobCondition {
        type_: type_.to_owned(),
        status: "True".to_owned(),
        ..JobCondition::default()
    };
    let conditions = match state {
        JobState::Running => vec![],
        JobState::Succeeded => vec![condition("Complete")],
        JobState::Failed => vec![condition("Failed")],
    };
    let mut annotations = BTreeMap::new();
    if !step.is_empty() {
        annotations.insert(labels::STEP_ANNOTATION.to_owned(), step.to_owned());
    }
    if !hash.is_empty() {
        annotations.insert(labels::SPEC_HASH_ANNOTATION.to_owned(), hash.to_owned());
    }
    Object::Job(Job {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            annotations: Some(annotations),
            creation_timestamp: created
                .map(|s| Time(k8s_openapi::jiff::Timestamp::from_second(s).expect("a time"))),
            ..ObjectMeta::default()
        },
        status: Some(JobStatus {
            conditions: Some(conditions),
            ..JobStatus::default()
        }),
        ..Job::default()
    })
}

/// The answers of a scan of every object, as the planner asked before the index.
fn scanned(objects: &Objects, step: &str) -> Vec<String> {
    let mut jobs: Vec<&Job> = objects
        .values()
        .filter_map(|o| match o {
            Object::Job(j) => Some(j),
            _ => None,
        })
        .filter(|j| annotation(j, labels::STEP_ANNOTATION).as_deref() == Some(step))
        .collect();
    jobs.sort_by_key(|j| {
        (
            j.metadata.creation_timestamp.clone(),
            j.metadata.name.clone(),
        )
    });
    let name = |j: &&Job| j.metadata.name.clone().unwrap_or_default();
    let of_spec = |hash: &str| -> Vec<&&Job> {
        jobs.iter()
            .filter(|j| annotation(j, labels::SPEC_HASH_ANNOTATION).as_deref() == Some(hash))
            .collect()
    };
    let mut answers = vec![
        format!("all {:?}", jobs.iter().map(name).collect::<Vec<_>>()),
        format!("empty {}", jobs.is_empty()),
        format!(
            "running {:?}",
            jobs.iter()
                .find(|j| job_state(j) == JobState::Running)
                .map(name)
        ),
        format!(
            "last succeeded {:?}",
            jobs.iter()
                .rev()
                .find(|j| job_state(j) == JobState::Succeeded)
                .map(name)
        ),
    ];
    for hash in ["h1", "h2", ""] {
        let same = of_spec(hash);
        answers.push(format!(
            "{hash}: first succeeded {:?}, last {:?}",
            same.iter()
                .find(|j| job_state(j) == JobState::Succeeded)
                .map(|j| name(j)),
            same.last().map(|j| name(j))
        ));
    }
    answers
}

fn indexed(objects: &Objects, step: &str) -> Vec<String> {
    let attempts = StepAttempts::new(objects, step);
    let name = |j: &Job| j.metadata.name.clone().unwrap_or_default();
    let mut answers = vec![
        format!(
            "all {:?}",
            attempts.all().into_iter().map(name).collect::<Vec<_>>()
        ),
        format!("empty {}", attempts.is_empty()),
        format!("running {:?}", attempts.running().map(name)),
        format!("last succeeded {:?}", attempts.last_succeeded().map(name)),
    ];
    for hash in ["h1", "h2", ""] {
        answers.push(format!(
            "{hash}: first succeeded {:?}, last {:?}",
            attempts.first_succeeded_of_spec(hash).map(name),
            attempts.last_of_spec(hash).map(name)
        ));
    }
    answers
}

fn agree(objects: &Objects, when: &str) {
    for step in ["a", "b", "none"] {
        assert_eq!(
            indexed(objects, step),
            scanned(objects, step),
            "{when}, step {step}"
        );
    }
}

#[test]
fn the_index_answers_as_a_scan_through_every_change() {
    use JobState::{Failed, Running, Succeeded};
    let mut objects = Objects::default();
    let put = |objects: &mut Objects, o: Object| {
        objects.insert(o.object_ref(), o);
    };
    agree(&objects, "empty");
    put(&mut objects, job("a-3", "a", "h1", Failed, Some(30)));
    // Built from the map on first use, then kept by each change.
    agree(&objects, "first use");
    put(&mut objects, job("a-1", "a", "h1", Succeeded, Some(10)));
    put(&mut objects, job("a-2", "a", "h2", Running, Some(10)));
    put(&mut objects, job("a-0", "a", "h1", Failed, None));
    put(&mut objects, job("b-1", "b", "", Succeeded, Some(5)));
    put(&mut objects, job("no-step", "", "h1", Running, Some(1)));
    agree(&objects, "inserted");
    put(&mut objects, job("a-2", "a", "h2", Succeeded, Some(10)));
    put(&mut objects, job("b-1", "a", "h1", Running, Some(5)));
    agree(&objects, "replaced, one moved to another step");
    objects.remove(&ObjectRef::new(Kind::Job, "a-1"));
    agree(&objects, "removed");
    if let Some(Object::Job(j)) = objects.get_mut(&ObjectRef::new(Kind::Job, "a-3")) {
        j.status = None;
    }
    agree(&objects, "changed in place");
    put(&mut objects, job("b-2", "b", "h1", Failed, Some(7)));
    agree(&objects, "inserted after a change in place");
    objects.retain(|r, _| r.name != "a-2");
    agree(&objects, "retained");
    // A Job filed under another key than its own name still sorts as the scan sorts it.
    objects.insert(
        ObjectRef::new(Kind::Job, "zz"),
        job("a-9", "a", "h1", Failed, Some(10)),
    );
    agree(&objects, "odd key");
    let copy = objects.clone();
    objects.clear();
    agree(&objects, "cleared");
    agree(&copy, "the copy keeps its own");
}
