//! Carrying out one step: one function per [`Action`] variant, behind one exhaustive match.

use k8s_openapi::api::batch::v1::Job;
use uyuni_core::plan::DeploymentWait;
use uyuni_core::{Action, JobWait, Kind, Object, ObjectRef, Step};

use crate::apply::{apply_namespaced, apply_object};
use crate::deployment::{DeploymentWaitContext, await_ready, scale as scale_deployment};
use crate::error::{EffectsError, Target, Verb};
use crate::job::{JobWaitContext, await_job};
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
    tracing::debug!(step = %step.id, target = %step.target, "execute");
    match &step.action {
        Action::Apply(object) => apply(client, namespace, step, object, progress).await,
        Action::RunJob { job, wait } => {
            run_job(client, namespace, step, job, *wait, progress).await
        }
        Action::AwaitJob { name, wait } => {
            await_job(JobWaitContext {
                client,
                namespace,
                step: &step.id,
                job: name,
                wait: *wait,
                progress,
            })
            .await
        }
        Action::WaitDeployment { name, wait } => {
            wait_deployment(client, namespace, step, name, *wait, progress).await
        }
        Action::Scale {
            name,
            replicas,
            wait,
        } => scale(client, namespace, step, name, *replicas, *wait, progress).await,
        Action::WaitReady { target, wait } => {
            wait_ready(client, namespace, step, target, *wait, progress).await
        }
        Action::None => Ok(()),
    }
}

async fn wait_ready(
    client: &kube::Client,
    namespace: &str,
    step: &Step,
    target: &ObjectRef,
    wait: DeploymentWait,
    progress: &dyn Progress,
) -> Result<(), EffectsError> {
    crate::custom::await_ready(client, namespace, &step.id, target, wait, progress).await
}

async fn wait_deployment(
    client: &kube::Client,
    namespace: &str,
    step: &Step,
    name: &str,
    wait: DeploymentWait,
    progress: &dyn Progress,
) -> Result<(), EffectsError> {
    await_ready(DeploymentWaitContext {
        client,
        namespace,
        step: &step.id,
        deployment: name,
        wait,
        progress,
    })
    .await
}

async fn scale(
    client: &kube::Client,
    namespace: &str,
    step: &Step,
    name: &str,
    replicas: i32,
    wait: DeploymentWait,
    progress: &dyn Progress,
) -> Result<(), EffectsError> {
    scale_deployment(
        DeploymentWaitContext {
            client,
            namespace,
            step: &step.id,
            deployment: name,
            wait,
            progress,
        },
        replicas,
    )
    .await
}

async fn apply(
    client: &kube::Client,
    namespace: &str,
    step: &Step,
    object: &Object,
    progress: &dyn Progress,
) -> Result<(), EffectsError> {
    let applied = apply_object(client, namespace, &step.id, object, progress).await?;
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
    Ok(())
}

async fn run_job(
    client: &kube::Client,
    namespace: &str,
    step: &Step,
    job: &Job,
    wait: JobWait,
    progress: &dyn Progress,
) -> Result<(), EffectsError> {
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
    let applied = apply_namespaced(client, ns, &target, job, progress).await?;
    progress.event(ProgressEvent::JobCreated {
        job: name,
        namespace: ns,
        created: applied.created,
    });
    await_job(JobWaitContext {
        client,
        namespace: ns,
        step: &step.id,
        job: name,
        wait,
        progress,
    })
    .await
}
