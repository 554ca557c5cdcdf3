//! Carrying out one step: one function per [`Action`] variant, behind one exhaustive match.

use k8s_openapi::api::batch::v1::Job;
use uyuni_core::labels::PRODUCES_ANNOTATION;
use uyuni_core::object::{CustomKind, CustomObject};
use uyuni_core::plan::DeploymentWait;
use uyuni_core::{Action, JobWait, Kind, Object, ObjectRef, Step};

use crate::apply::{Prior, apply_namespaced, apply_object};
use crate::deployment::{DeploymentWaitContext, await_ready, scale as scale_deployment};
use crate::error::{EffectsError, Target, Verb};
use crate::job::{JobWaitContext, await_job};
use crate::observe::Observer;
use crate::progress::{Progress, ProgressEvent};

/// Carries out `step.action` in `namespace` (the namespace of the plan; objects that name their
/// own namespace go there). Dropping the returned future stops at the next await point: an apply
/// in flight either reached the server or not, and a Job being waited for keeps running.
pub async fn execute(
    client: &kube::Client,
    namespace: &str,
    step: &Step,
    progress: &dyn Progress,
) -> Result<(), EffectsError> {
    execute_step(client, namespace, step, &Prior::Unknown, None, progress)
        .await
        .map(|_| ())
}

/// One object a step wrote or waited for, at the last resourceVersion the step saw of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub target: ObjectRef,
    /// Its namespace; `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    pub resource_version: String,
}

/// What a step leaves for the next observation to include ([`crate::Observer::expect`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Executed {
    pub versions: Vec<Version>,
}

impl Executed {
    fn of(target: ObjectRef, namespace: Option<&str>, version: Option<String>) -> Executed {
        Executed {
            versions: version
                .map(|resource_version| Version {
                    target,
                    namespace: namespace.map(str::to_owned),
                    resource_version,
                })
                .into_iter()
                .collect(),
        }
    }
}

/// [`execute`], told what the planner's snapshot held of an Apply's object (which spares the
/// read before the write), returning the versions the step saw last. With `observer` (the
/// migrate loop's), a wait reads the Job, Deployment and pods it waits for from the observer's
/// watches instead of opening its own.
pub async fn execute_step(
    client: &kube::Client,
    namespace: &str,
    step: &Step,
    prior: &Prior,
    observer: Option<&Observer>,
    progress: &dyn Progress,
) -> Result<Executed, EffectsError> {
    tracing::debug!(step = %step.id, target = %step.target, "execute");
    match &step.action {
        Action::Apply(object) => apply(client, namespace, step, object, prior, progress).await,
        Action::RunJob { job, wait } => {
            run_job(
                client, namespace, step, job, *wait, prior, observer, progress,
            )
            .await
        }
        Action::AwaitJob { name, wait } => {
            let ended = await_job(JobWaitContext {
                client,
                namespace,
                step: &step.id,
                job: name,
                wait: *wait,
                progress,
                observer,
                version: None,
            })
            .await?;
            let mut executed = Executed::of(
                ObjectRef::new(Kind::Job, name.clone()),
                Some(namespace),
                ended
                    .job
                    .as_ref()
                    .and_then(|j| j.metadata.resource_version.clone()),
            );
            executed
                .versions
                .extend(produced(client, namespace, &step.id, &ended, progress).await?);
            Ok(executed)
        }
        Action::WaitDeployment { name, wait } => {
            let version =
                wait_deployment(client, namespace, step, name, *wait, observer, progress).await?;
            Ok(Executed::of(
                ObjectRef::new(Kind::Deployment, name.clone()),
                Some(namespace),
                version,
            ))
        }
        Action::Scale {
            name,
            replicas,
            wait,
            restarted_at,
            hardened,
        } => {
            let version = scale(
                client,
                namespace,
                step,
                name,
                (*replicas, restarted_at.as_deref(), hardened.as_deref()),
                *wait,
                observer,
                progress,
            )
            .await?;
            Ok(Executed::of(
                ObjectRef::new(Kind::Deployment, name.clone()),
                Some(namespace),
                version,
            ))
        }
        Action::WaitReady { target, wait } => {
            let ready =
                wait_ready(client, namespace, step, target, *wait, observer, progress).await?;
            let ns = match target.kind {
                Kind::Custom(kind) => kind.fixed_namespace().unwrap_or(namespace),
                _ => namespace,
            };
            let mut executed = Executed::of(
                target.clone(),
                Some(ns),
                ready.metadata.resource_version.clone(),
            );
            // A Certificate is Ready once cert-manager wrote its Secret: the next observation
            // must hold that Secret too.
            if ready.kind == CustomKind::Certificate
                && let Some(secret) = ready.spec["secretName"].as_str()
            {
                executed.versions.extend(
                    secret_version(client, ns, &ObjectRef::new(Kind::Secret, secret), progress)
                        .await?,
                );
            }
            Ok(executed)
        }
        Action::Delete {
            target,
            propagation,
            wait,
        } => {
            delete(
                client,
                namespace,
                step,
                target,
                *propagation,
                *wait,
                observer,
                progress,
            )
            .await
        }
        Action::None => Ok(Executed::default()),
    }
}

/// A deleted object has no version for the next observation to wait for: the wait ended when
/// the observer's store (or the step's own watch) no longer held it.
#[allow(clippy::too_many_arguments)]
async fn delete(
    client: &kube::Client,
    namespace: &str,
    step: &Step,
    target: &ObjectRef,
    propagation: uyuni_core::plan::Propagation,
    wait: uyuni_core::plan::DeleteWait,
    observer: Option<&Observer>,
    progress: &dyn Progress,
) -> Result<Executed, EffectsError> {
    crate::delete::delete(
        client,
        namespace,
        &step.id,
        target,
        propagation,
        wait,
        observer,
        progress,
    )
    .await?;
    Ok(Executed::default())
}

async fn wait_ready(
    client: &kube::Client,
    namespace: &str,
    step: &Step,
    target: &ObjectRef,
    wait: DeploymentWait,
    observer: Option<&Observer>,
    progress: &dyn Progress,
) -> Result<CustomObject, EffectsError> {
    crate::custom::await_ready(
        client, namespace, &step.id, target, wait, observer, progress,
    )
    .await
}

async fn wait_deployment(
    client: &kube::Client,
    namespace: &str,
    step: &Step,
    name: &str,
    wait: DeploymentWait,
    observer: Option<&Observer>,
    progress: &dyn Progress,
) -> Result<Option<String>, EffectsError> {
    await_ready(DeploymentWaitContext {
        client,
        namespace,
        step: &step.id,
        deployment: name,
        wait,
        progress,
        observer,
    })
    .await
}

#[allow(clippy::too_many_arguments)]
async fn scale(
    client: &kube::Client,
    namespace: &str,
    step: &Step,
    name: &str,
    (replicas, restarted_at, hardened): (
        i32,
        Option<&str>,
        Option<&k8s_openapi::api::apps::v1::Deployment>,
    ),
    wait: DeploymentWait,
    observer: Option<&Observer>,
    progress: &dyn Progress,
) -> Result<Option<String>, EffectsError> {
    scale_deployment(
        DeploymentWaitContext {
            client,
            namespace,
            step: &step.id,
            deployment: name,
            wait,
            progress,
            observer,
        },
        replicas,
        restarted_at,
        hardened,
    )
    .await
}

async fn apply(
    client: &kube::Client,
    namespace: &str,
    step: &Step,
    object: &Object,
    prior: &Prior,
    progress: &dyn Progress,
) -> Result<Executed, EffectsError> {
    let applied = apply_object(client, namespace, &step.id, object, prior, progress).await?;
    let target = object.object_ref();
    let ns = object
        .kind()
        .namespaced()
        .then(|| object.metadata().namespace.as_deref().unwrap_or(namespace));
    progress.event(ProgressEvent::Applied {
        target: &target,
        namespace: ns,
        created: applied.created,
        changed: applied.changed,
    });
    Ok(Executed::of(target, ns, applied.resource_version))
}

#[allow(clippy::too_many_arguments)]
async fn run_job(
    client: &kube::Client,
    namespace: &str,
    step: &Step,
    job: &Job,
    wait: JobWait,
    prior: &Prior,
    observer: Option<&Observer>,
    progress: &dyn Progress,
) -> Result<Executed, EffectsError> {
    let ns = job.metadata.namespace.as_deref().unwrap_or(namespace);
    let Some(name) = job.metadata.name.as_deref().filter(|n| !n.is_empty()) else {
        return Err(EffectsError::MalformedObject {
            step: step.id.clone(),
            verb: Verb::Apply,
            target: Target::named("job", "", Some(ns)),
            missing: "metadata.name",
        });
    };
    let target = ObjectRef::new(Kind::Job, name);
    let applied = apply_namespaced(client, ns, &target, job, prior, progress).await?;
    progress.event(ProgressEvent::JobCreated {
        job: name,
        namespace: ns,
        created: applied.created,
    });
    let ended = await_job(JobWaitContext {
        client,
        namespace: ns,
        step: &step.id,
        job: name,
        wait,
        progress,
        observer: observer.filter(|o| o.watches_job(job.metadata.labels.as_ref())),
        version: applied.resource_version.as_deref(),
    })
    .await?;
    let mut executed = Executed::of(
        target,
        Some(ns),
        ended
            .job
            .as_ref()
            .and_then(|j| j.metadata.resource_version.clone())
            .or(applied.resource_version),
    );
    executed
        .versions
        .extend(produced(client, ns, &step.id, &ended, progress).await?);
    Ok(executed)
}

/// The version of what a Job wrote besides its status (its `kubectl-uyuni.io/produces`
/// annotation), read now. The Job's end and that write reach the watches on different streams,
/// the write first on the server but not necessarily first here: the next observation must
/// hold it before the planner reads what the Job found.
async fn produced(
    client: &kube::Client,
    namespace: &str,
    step: &str,
    ended: &crate::job::Ended,
    progress: &dyn Progress,
) -> Result<Option<Version>, EffectsError> {
    let job = ended.job.as_ref();
    let Some(product) = job
        .and_then(|j| j.metadata.annotations.as_ref())
        .and_then(|a| a.get(PRODUCES_ANNOTATION))
    else {
        return Ok(None);
    };
    if product == uyuni_core::catalogue::products::INSPECTION
        && let Some(job) = job
    {
        return copy_inspection(client, namespace, step, job, ended.pod.as_ref(), progress)
            .await
            .map(Some);
    }
    let Some(name) = uyuni_core::catalogue::products::secret(product) else {
        tracing::debug!(%product, "a product that is not a Secret is not read");
        return Ok(None);
    };
    secret_version(
        client,
        namespace,
        &ObjectRef::new(Kind::Secret, name),
        progress,
    )
    .await
}

/// Secret `target`'s resourceVersion now (a GET of its metadata); none when it does not exist.
async fn secret_version(
    client: &kube::Client,
    namespace: &str,
    target: &ObjectRef,
    progress: &dyn Progress,
) -> Result<Option<Version>, EffectsError> {
    use k8s_openapi::api::core::v1::Secret;
    let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
    let what = Target::named(target.kind.resource(), &target.name, Some(namespace));
    let meta = crate::retry::with_retry(progress, Verb::Get, &what, || {
        api.get_metadata_opt(&target.name)
    })
    .await?;
    Ok(meta
        .and_then(|m| m.metadata.resource_version)
        .map(|resource_version| Version {
            target: target.clone(),
            namespace: Some(namespace.to_owned()),
            resource_version,
        }))
}

/// An inspection Job's report: the termination message of its pod's container (the kubelet
/// copies the file at `terminationMessagePath` there, k8s.io/api core/v1 `ContainerStateTerminated`
/// `Message`), copied onto the Job as an annotation, where it outlives the pod's status and
/// every later observation reads it. Returns the Job's version after the patch.
async fn copy_inspection(
    client: &kube::Client,
    namespace: &str,
    step: &str,
    job: &Job,
    seen: Option<&k8s_openapi::api::core::v1::Pod>,
    progress: &dyn Progress,
) -> Result<Version, EffectsError> {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{ListParams, Patch, PatchParams};
    let name = job.metadata.name.clone().unwrap_or_default();
    let succeeded =
        |p: &&Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
    let message = |p: &Pod| {
        p.status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .first()?
            .state
            .as_ref()?
            .terminated
            .as_ref()
            .map(|t| t.message.clone().unwrap_or_default())
    };
    // The pod the wait saw end, when its status had caught up; else read (a resumed run
    // awaiting a Job that ended long ago).
    let from_wait = seen.filter(succeeded).and_then(message);
    let listed = match from_wait {
        Some(_) => Vec::new(),
        None => {
            let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), namespace);
            let selector = format!("job-name={name}");
            let list = ListParams::default().labels(&selector);
            let what = Target::named("pods", &selector, Some(namespace));
            crate::retry::with_retry(progress, Verb::List, &what, || pods.list(&list))
                .await?
                .items
        }
    };
    let report = from_wait
        .or_else(|| listed.iter().filter(succeeded).find_map(message))
        .ok_or_else(|| EffectsError::InspectionReportMissing {
            step: step.to_owned(),
            job: name.clone(),
            namespace: namespace.to_owned(),
        })?;
    let jobs: kube::Api<Job> = kube::Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({"metadata": {"annotations": {
        uyuni_core::labels::INSPECTION_ANNOTATION: report,
    }}});
    let params = PatchParams {
        field_manager: Some(uyuni_core::labels::FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let merge = Patch::Merge(&patch);
    let target = Target::named("job", &name, Some(namespace));
    let patched = crate::retry::with_retry(progress, Verb::Annotate, &target, || {
        jobs.patch(&name, &params, &merge)
    })
    .await?;
    Ok(Version {
        target: ObjectRef::new(Kind::Job, name),
        namespace: Some(namespace.to_owned()),
        resource_version: patched.metadata.resource_version.unwrap_or_default(),
    })
}
