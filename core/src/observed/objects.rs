//! The snapshot's objects, and its Jobs filed by step.
//!
//! Jobs are never deleted automatically, so a namespace that has seen many runs holds many old
//! attempts; the planner asks about the Jobs of a step many times per plan, and the dry-run
//! preview plans once per step. A scan of every object per question made planning grow with
//! the whole history (issue 12); the index answers from the attempts of one step instead.
//!
//! Objects are shared between copies of a snapshot (each behind an `Arc`, copied on write), so
//! a copy costs a reference per object, not the objects: a snapshot with thousands of old Job
//! attempts is copied cheaply by `simulate` and the preview.
//!
//! The index is kept by the few mutations [`Objects`] offers. Reads are those of the
//! `BTreeMap<ObjectRef, Object>` the field used to be: `get`, `contains_key`, `keys`, `values`,
//! `iter`, `len`, `is_empty` and indexing.

use std::collections::{BTreeMap, BTreeSet, btree_map};
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Serialize, Serializer};

use super::{JobState, job_state};
use crate::labels;
use crate::object::{Object, ObjectRef};

/// The observed objects by reference, read like a `BTreeMap<ObjectRef, Object>`.
#[derive(Clone, Default)]
pub struct Objects {
    map: BTreeMap<ObjectRef, Arc<Object>>,
    /// Built on first use from `map`, then kept up to date by `insert` and `remove`; dropped by
    /// the mutations that could change a Job in place (`get_mut`, `retain`).
    jobs: OnceLock<JobIndex>,
}

impl PartialEq for Objects {
    fn eq(&self, other: &Self) -> bool {
        self.map == other.map
    }
}

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.map.fmt(f)
    }
}

impl Serialize for Objects {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl From<BTreeMap<ObjectRef, Object>> for Objects {
    fn from(map: BTreeMap<ObjectRef, Object>) -> Self {
        map.into_iter().collect()
    }
}

impl FromIterator<(ObjectRef, Object)> for Objects {
    fn from_iter<I: IntoIterator<Item = (ObjectRef, Object)>>(iter: I) -> Self {
        Objects {
            map: iter.into_iter().map(|(k, o)| (k, Arc::new(o))).collect(),
            jobs: OnceLock::new(),
        }
    }
}

impl Extend<(ObjectRef, Object)> for Objects {
    fn extend<I: IntoIterator<Item = (ObjectRef, Object)>>(&mut self, iter: I) {
        for (key, object) in iter {
            self.insert(key, object);
        }
    }
}

impl std::ops::Index<&ObjectRef> for Objects {
    type Output = Object;

    fn index(&self, key: &ObjectRef) -> &Object {
        &self.map[key]
    }
}

impl<'a> IntoIterator for &'a Objects {
    type Item = (&'a ObjectRef, &'a Object);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl IntoIterator for Objects {
    type Item = (ObjectRef, Object);
    type IntoIter = std::iter::Map<
        btree_map::IntoIter<ObjectRef, Arc<Object>>,
        fn((ObjectRef, Arc<Object>)) -> (ObjectRef, Object),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.map
            .into_iter()
            .map(|(k, o)| (k, Arc::unwrap_or_clone(o)))
    }
}

/// The objects with their references, in order.
pub type Iter<'a> = std::iter::Map<
    btree_map::Iter<'a, ObjectRef, Arc<Object>>,
    fn((&'a ObjectRef, &'a Arc<Object>)) -> (&'a ObjectRef, &'a Object),
>;

/// The objects, in the order of their references.
pub type Values<'a> =
    std::iter::Map<btree_map::Values<'a, ObjectRef, Arc<Object>>, fn(&Arc<Object>) -> &Object>;

impl Objects {
    pub fn get(&self, key: &ObjectRef) -> Option<&Object> {
        self.map.get(key).map(|o| &**o)
    }

    pub fn contains_key(&self, key: &ObjectRef) -> bool {
        self.map.contains_key(key)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn keys(&self) -> btree_map::Keys<'_, ObjectRef, Arc<Object>> {
        self.map.keys()
    }

    pub fn values(&self) -> Values<'_> {
        self.map.values().map(|o| &**o)
    }

    pub fn iter(&self) -> Iter<'_> {
        self.map.iter().map(|(k, o)| (k, &**o))
    }

    pub fn insert(&mut self, key: ObjectRef, object: Object) -> Option<Object> {
        let filed = filing(&key, &object);
        let old = self.map.insert(key.clone(), Arc::new(object));
        if let Some(index) = self.jobs.get_mut() {
            if let Some(Object::Job(old)) = old.as_deref() {
                index.unfile(&key, old);
            }
            if let Some(filed) = filed {
                index.file(filed);
            }
        }
        old.map(Arc::unwrap_or_clone)
    }

    pub fn remove(&mut self, key: &ObjectRef) -> Option<Object> {
        let old = self.map.remove(key);
        if let (Some(index), Some(Object::Job(old))) = (self.jobs.get_mut(), old.as_deref()) {
            index.unfile(key, old);
        }
        old.map(Arc::unwrap_or_clone)
    }

    /// The object to change in place (copied first when another snapshot shares it). A Job
    /// may change its step or state that way, so the index is built again on its next use.
    pub fn get_mut(&mut self, key: &ObjectRef) -> Option<&mut Object> {
        let object = self.map.get_mut(key)?;
        if matches!(**object, Object::Job(_)) {
            self.jobs = OnceLock::new();
        }
        Some(Arc::make_mut(object))
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&ObjectRef, &Object) -> bool) {
        self.map.retain(|k, o| keep(k, o));
        self.jobs = OnceLock::new();
    }

    pub fn clear(&mut self) {
        self.map.clear();
        self.jobs = OnceLock::new();
    }

    pub(super) fn job_index(&self) -> &JobIndex {
        self.jobs.get_or_init(|| {
            let mut index = JobIndex::default();
            for (key, object) in self.iter() {
                if let Some(filed) = filing(key, object) {
                    index.file(filed);
                }
            }
            index
        })
    }

    fn job(&self, key: &ObjectRef) -> Option<&Job> {
        match self.get(key) {
            Some(Object::Job(job)) => Some(job),
            _ => None,
        }
    }
}

/// Where Jobs of one step sort: by creation time, then name, then the snapshot's own order
/// (which a stable sort of the snapshot's Jobs by the first two keeps).
type Order = (Option<Time>, Option<String>, ObjectRef);

/// Where one Job is filed.
struct Filed {
    step: String,
    spec_hash: Option<String>,
    state: JobState,
    order: Order,
}

#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub fn annotation(job: &Job, key: &str) -> Option<String> {
    job.metadata.annotations.as_ref()?.get(key).cloned()
}

/// A Job with a step annotation is filed under that step; anything else is not.
fn filing(key: &ObjectRef, object: &Object) -> Option<Filed> {
    match object {
        Object::Job(job) => job_filing(key, job),
        _ => None,
    }
}

fn job_filing(key: &ObjectRef, job: &Job) -> Option<Filed> {
    Some(Filed {
        step: annotation(job, labels::STEP_ANNOTATION)?,
        spec_hash: annotation(job, labels::SPEC_HASH_ANNOTATION),
        state: job_state(job),
        order: (
            job.metadata.creation_timestamp.clone(),
            job.metadata.name.clone(),
            key.clone(),
        ),
    })
}

#[derive(Clone, Default)]
pub(super) struct JobIndex {
    steps: BTreeMap<String, StepJobs>,
}

/// The Jobs of one step, each set oldest first.
#[derive(Clone, Default)]
struct StepJobs {
    all: BTreeSet<Order>,
    running: BTreeSet<Order>,
    succeeded: BTreeSet<Order>,
    by_spec: BTreeMap<String, SpecJobs>,
}

/// The Jobs of one step that ran one spec (one hash).
#[derive(Clone, Default)]
struct SpecJobs {
    all: BTreeSet<Order>,
    succeeded: BTreeSet<Order>,
}

impl JobIndex {
    fn file(&mut self, filed: Filed) {
        let step = self.steps.entry(filed.step).or_default();
        match filed.state {
            JobState::Running => {
                step.running.insert(filed.order.clone());
            }
            JobState::Succeeded => {
                step.succeeded.insert(filed.order.clone());
            }
            JobState::Failed => {}
        }
        if let Some(hash) = filed.spec_hash {
            let spec = step.by_spec.entry(hash).or_default();
            if filed.state == JobState::Succeeded {
                spec.succeeded.insert(filed.order.clone());
            }
            spec.all.insert(filed.order.clone());
        }
        step.all.insert(filed.order);
    }

    fn unfile(&mut self, key: &ObjectRef, job: &Job) {
        let Some(filed) = job_filing(key, job) else {
            return;
        };
        let Some(step) = self.steps.get_mut(&filed.step) else {
            return;
        };
        step.all.remove(&filed.order);
        step.running.remove(&filed.order);
        step.succeeded.remove(&filed.order);
        if let Some(hash) = &filed.spec_hash
            && let Some(spec) = step.by_spec.get_mut(hash)
        {
            spec.all.remove(&filed.order);
            spec.succeeded.remove(&filed.order);
            if spec.all.is_empty() {
                step.by_spec.remove(hash);
            }
        }
        if step.all.is_empty() {
            self.steps.remove(&filed.step);
        }
    }
}

/// The attempts of one step (Jobs carrying its step annotation), oldest first: by creation
/// time, then name.
pub struct StepAttempts<'a> {
    objects: &'a Objects,
    step: Option<&'a StepJobs>,
}

impl<'a> StepAttempts<'a> {
    #[doc(hidden)]
    // pub for the unit tests in tests/unit/
    pub fn new(objects: &'a Objects, step: &str) -> Self {
        StepAttempts {
            objects,
            step: objects.job_index().steps.get(step),
        }
    }

    fn jobs(&self, orders: impl Iterator<Item = &'a Order>) -> impl Iterator<Item = &'a Job> {
        let objects = self.objects;
        orders.filter_map(move |(_, _, key)| objects.job(key))
    }

    /// Every attempt, oldest first.
    pub fn all(&self) -> Vec<&'a Job> {
        match self.step {
            Some(step) => self.jobs(step.all.iter()).collect(),
            None => Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.step.is_none_or(|s| s.all.is_empty())
    }

    /// The oldest attempt still running.
    pub fn running(&self) -> Option<&'a Job> {
        self.jobs(self.step?.running.iter()).next()
    }

    /// The newest attempt that succeeded.
    pub fn last_succeeded(&self) -> Option<&'a Job> {
        self.jobs(self.step?.succeeded.iter().rev()).next()
    }

    /// The oldest attempt of this spec (spec-hash annotation) that succeeded.
    pub fn first_succeeded_of_spec(&self, hash: &str) -> Option<&'a Job> {
        self.jobs(self.step?.by_spec.get(hash)?.succeeded.iter())
            .next()
    }

    /// The newest attempt of this spec, whatever its state.
    pub fn last_of_spec(&self, hash: &str) -> Option<&'a Job> {
        self.jobs(self.step?.by_spec.get(hash)?.all.iter().rev())
            .next()
    }
}
