//! Reads for `status` and `logs`: the pods of the namespace by label selector, and one
//! container's log as a stream of lines (kube-rs's log parameters: follow, tail, since,
//! timestamps). Reads only, retried on transient API errors like every read.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};

use crate::error::{EffectsError, Target, Verb};
use crate::job::LogChunk;
use crate::progress::NoProgress;
use crate::retry::with_retry;

/// Every pod `selector` selects in `namespace` (none when the namespace does not exist).
pub async fn pods(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
) -> Result<Vec<Pod>, EffectsError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let what = Target::selected("pod", selector, namespace);
    crate::observe::paged(&NoProgress, &what, |params| {
        let api = api.clone();
        let params = params.labels(selector);
        async move { api.list(&params).await }
    })
    .await
}

/// The pods of Job `job` (by the Job controller's `job-name` label).
pub async fn job_pods(
    client: &kube::Client,
    namespace: &str,
    job: &str,
) -> Result<Vec<Pod>, EffectsError> {
    pods(client, namespace, &format!("job-name={job}")).await
}

/// What to read of a log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub container: Option<String>,
    pub follow: bool,
    pub tail_lines: Option<i64>,
    pub since_seconds: Option<i64>,
    pub timestamps: bool,
}

/// Why a log could not be read to its end.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error(transparent)]
    Open(#[from] EffectsError),
    #[error("the log of pod {pod} broke off: {source}")]
    Read {
        pod: String,
        #[source]
        source: std::io::Error,
    },
    /// What `on_line` returned (stdout gone, for instance). Its source is the `io::Error`
    /// itself, so that the plugin sees a closed stdout (`… | head`) in the error's chain.
    #[error("cannot write the log")]
    Write(#[source] std::io::Error),
}

/// The log of `pod`'s container, handed to `on_line` line by line as it arrives; with
/// `follow`, until the container ends (or the caller's future is dropped).
pub async fn read_log(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    options: &LogOptions,
    mut on_line: impl FnMut(String) -> std::io::Result<()>,
) -> Result<(), LogError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = LogParams {
        container: options.container.clone(),
        follow: options.follow,
        tail_lines: options.tail_lines,
        since_seconds: options.since_seconds,
        timestamps: options.timestamps,
        ..LogParams::default()
    };
    let target = Target::named("pod", pod, Some(namespace));
    let reader = with_retry(&NoProgress, Verb::Log, &target, || {
        api.log_stream(pod, &params)
    })
    .await?;
    let mut lines = crate::job::lines(Box::pin(reader)).boxed();
    while let Some(chunk) = lines.next().await {
        match chunk {
            LogChunk::Line(line) => on_line(line).map_err(LogError::Write)?,
            LogChunk::ReadFailed(source) => {
                return Err(LogError::Read {
                    pod: pod.to_owned(),
                    source,
                });
            }
            LogChunk::OpenFailed(_) => {}
        }
    }
    Ok(())
}
