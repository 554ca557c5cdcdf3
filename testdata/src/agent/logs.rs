//! Container logs: what the scenario's containers "print", and the kubelet's
//! `/containerLogs/{namespace}/{pod}/{container}` endpoint that `kubectl logs` reaches through
//! the apiserver (which proxies `GET pods/NAME/log` there: `LogLocation` in upstream's
//! `pkg/registry/core/pod/strategy.go`, the node address from `pkg/kubelet/client/kubelet_client.go`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// One container's output so far.
#[derive(Debug, Default, Clone)]
struct ContainerLog {
    lines: Vec<(Timestamp, String)>,
    /// The lines of the instance before the last restart (`previous=true`).
    previous: Option<Vec<(Timestamp, String)>>,
    /// The container terminated: followed streams end.
    done: bool,
}

/// The logs of every container the agent plays, by (namespace, pod, container).
#[derive(Debug)]
pub struct LogStore {
    logs: Mutex<HashMap<(String, String, String), ContainerLog>>,
    /// Pods the agent plays whose containers have not started: why they wait.
    waiting: Mutex<HashMap<(String, String), String>>,
    changed: tokio::sync::watch::Sender<u64>,
}

impl Default for LogStore {
    fn default() -> Self {
        LogStore {
            logs: Mutex::new(HashMap::new()),
            waiting: Mutex::new(HashMap::new()),
            changed: tokio::sync::watch::channel(0).0,
        }
    }
}

fn key(ns: &str, pod: &str, container: &str) -> (String, String, String) {
    (ns.to_owned(), pod.to_owned(), container.to_owned())
}

impl LogStore {
    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String, String), ContainerLog>> {
        self.logs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn notify(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The pod's containers wait (ContainerCreating, ImagePullBackOff, …): logs are refused
    /// with that reason, as kubelet refuses them.
    pub fn waiting(&self, ns: &str, pod: &str, reason: &str) {
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((ns.to_owned(), pod.to_owned()), reason.to_owned());
    }

    fn waiting_reason(&self, ns: &str, pod: &str) -> Option<String> {
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(ns.to_owned(), pod.to_owned()))
            .cloned()
    }

    /// The container started (again: the last instance's lines become the previous log).
    pub fn start(&self, ns: &str, pod: &str, container: &str) {
        let mut logs = self.lock();
        let previous = logs.remove(&key(ns, pod, container)).map(|l| l.lines);
        logs.insert(
            key(ns, pod, container),
            ContainerLog {
                previous,
                ..ContainerLog::default()
            },
        );
        drop(logs);
        self.notify();
    }

    pub fn append(&self, ns: &str, pod: &str, container: &str, line: &str) {
        self.lock()
            .entry(key(ns, pod, container))
            .or_default()
            .lines
            .push((Timestamp::now(), line.to_owned()));
        self.notify();
    }

    /// The container terminated: no more lines; followed streams end.
    pub fn finish(&self, ns: &str, pod: &str, container: &str) {
        if let Some(log) = self.lock().get_mut(&key(ns, pod, container)) {
            log.done = true;
        }
        self.notify();
    }

    /// Ends every stream of the pod (it is being deleted).
    pub fn finish_pod(&self, ns: &str, pod: &str) {
        for ((n, p, _), log) in self.lock().iter_mut() {
            if n == ns && p == pod {
                log.done = true;
            }
        }
        self.notify();
    }

    /// Forgets a deleted pod.
    pub fn remove_pod(&self, ns: &str, pod: &str) {
        self.lock().retain(|(n, p, _), _| !(n == ns && p == pod));
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(ns.to_owned(), pod.to_owned()));
        self.notify();
    }

    fn snapshot(&self, ns: &str, pod: &str, container: &str) -> Option<ContainerLog> {
        self.lock().get(&key(ns, pod, container)).cloned()
    }

    fn has_pod(&self, ns: &str, pod: &str) -> bool {
        self.lock().keys().any(|(n, p, _)| n == ns && p == pod)
    }
}

/// The query of a `/containerLogs` request, as the apiserver passes `PodLogOptions` on
/// (`pkg/kubelet/server/server.go`'s `getContainerLogs` parses the same names).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LogQuery {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub tail_lines: Option<usize>,
    pub limit_bytes: Option<usize>,
    pub since_seconds: Option<u64>,
    pub since_time: Option<Timestamp>,
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_bool(name: &str, v: &str) -> Result<bool, String> {
    match v {
        "" | "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!(
            "invalid value {v:?} for {name}: want true or false"
        )),
    }
}

fn parse_number<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("invalid value {v:?} for {name}: want a non-negative integer"))
}

impl LogQuery {
    /// Parses the query string; `Err` is the 400 message, naming the parameter.
    pub fn parse(query: &str) -> Result<LogQuery, String> {
        let mut q = LogQuery::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value);
            match name {
                "follow" => q.follow = parse_bool(name, &value)?,
                "previous" => q.previous = parse_bool(name, &value)?,
                "timestamps" => q.timestamps = parse_bool(name, &value)?,
                "tailLines" => q.tail_lines = Some(parse_number(name, &value)?),
                "limitBytes" => {
                    let n: usize = parse_number(name, &value)?;
                    if n == 0 {
                        // PodLogOptions validation: "must be greater than 0".
                        return Err("limitBytes: must be greater than 0".to_owned());
                    }
                    q.limit_bytes = Some(n);
                }
                "sinceSeconds" => {
                    let n: u64 = parse_number(name, &value)?;
                    if n == 0 {
                        return Err("sinceSeconds: must be greater than 0".to_owned());
                    }
                    q.since_seconds = Some(n);
                }
                "sinceTime" => {
                    q.since_time = Some(value.parse().map_err(|e| {
                        format!("invalid value {value:?} for sinceTime: want RFC 3339 ({e})")
                    })?)
                }
                // Others (stream, insecureSkipTLSVerifyBackend, …) change nothing here.
                _ => {}
            }
        }
        if q.since_seconds.is_some() && q.since_time.is_some() {
            return Err("at most one of sinceTime or sinceSeconds may be specified".to_owned());
        }
        Ok(q)
    }

    fn since(&self, now: Timestamp) -> Option<Timestamp> {
        self.since_time.or_else(|| {
            self.since_seconds.and_then(|s| {
                now.checked_sub(SignedDuration::from_secs(i64::try_from(s).ok()?))
                    .ok()
            })
        })
    }
}

/// Formats the lines the query selects from `lines` (all of them so far): since, then tail.
/// The byte limit is applied by the caller over the whole stream.
pub fn select(query: &LogQuery, lines: &[(Timestamp, String)], now: Timestamp) -> Vec<String> {
    let since = query.since(now);
    let kept: Vec<&(Timestamp, String)> = lines
        .iter()
        .filter(|(t, _)| since.is_none_or(|s| *t >= s))
        .collect();
    let skip = query.tail_lines.map_or(0, |n| kept.len().saturating_sub(n));
    kept[skip..]
        .iter()
        .map(|(t, l)| format_line(query, *t, l))
        .collect()
}

fn format_line(query: &LogQuery, t: Timestamp, line: &str) -> String {
    if query.timestamps {
        format!("{} {line}\n", rfc3339_nano(t))
    } else {
        format!("{line}\n")
    }
}

/// Go's `time.RFC3339Nano` in UTC (trailing zeros of the fraction dropped, and the dot with
/// them), which kubelet prints with timestamps=true (`timeFormatOut` in
/// `pkg/kubelet/kuberuntime/logs/logs.go`).
pub fn rfc3339_nano(t: Timestamp) -> String {
    let seconds = t.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    let fraction = format!("{:09}", t.subsec_nanosecond());
    let fraction = fraction.trim_end_matches('0');
    if fraction.is_empty() {
        format!("{seconds}Z")
    } else {
        format!("{seconds}.{fraction}Z")
    }
}

/// Cuts `chunk` so that at most `left` bytes go out; updates `left`.
// pub for the unit tests in tests/unit/
#[doc(hidden)]
pub fn limit(chunk: String, left: &mut Option<usize>) -> String {
    match left {
        None => chunk,
        Some(n) => {
            let bytes = chunk.into_bytes();
            let take = bytes.len().min(*n);
            *n -= take;
            String::from_utf8_lossy(&bytes[..take]).into_owned()
        }
    }
}

/// `/containerLogs/{ns}/{pod}/{container}` → its three parts.
pub fn parse_path(path: &str) -> Option<(String, String, String)> {
    let rest = path.strip_prefix("/containerLogs/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        [ns, pod, container] if !ns.is_empty() && !pod.is_empty() && !container.is_empty() => {
            Some((
                percent_decode(ns),
                percent_decode(pod),
                percent_decode(container),
            ))
        }
        _ => None,
    }
}

/// The body of [`handle`]'s responses.
pub type Body = BoxBody<Bytes, std::convert::Infallible>;

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed());
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// Answers one request to the log server.
pub async fn handle(
    store: Arc<LogStore>,
    method: &Method,
    path: &str,
    query: &str,
) -> Response<Body> {
    if method != Method::GET {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "{method} is not supported here: only GET /containerLogs/NAMESPACE/POD/CONTAINER\n"
            ),
        );
    }
    if path == "/healthz" {
        return text(StatusCode::OK, "ok".to_owned());
    }
    let Some((ns, pod, container)) = parse_path(path) else {
        return text(
            StatusCode::NOT_FOUND,
            format!(
                "404 page not found: {path} (this node agent serves only /containerLogs/NAMESPACE/POD/CONTAINER)\n"
            ),
        );
    };
    let query = match LogQuery::parse(query) {
        Ok(q) => q,
        Err(e) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    let Some(log) = store.snapshot(&ns, &pod, &container) else {
        // kubelet: a known pod whose container has not started is a 400 ("waiting to start",
        // `validateContainerLogStatus` in pkg/kubelet/kubelet_pods.go); a pod it does not run
        // is a 404.
        let reason = store.waiting_reason(&ns, &pod);
        if reason.is_some() || store.has_pod(&ns, &pod) {
            let reason = reason.unwrap_or_else(|| "ContainerCreating".to_owned());
            return text(
                StatusCode::BAD_REQUEST,
                format!(
                    "container \"{container}\" in pod \"{pod}\" is waiting to start: {reason}\n"
                ),
            );
        }
        return text(
            StatusCode::NOT_FOUND,
            format!(
                "pod \"{ns}/{pod}\" not found on this node (or its container \"{container}\" has not started yet)\n"
            ),
        );
    };
    if query.previous {
        let Some(lines) = &log.previous else {
            // kubelet's message when the container never restarted.
            return text(
                StatusCode::BAD_REQUEST,
                format!(
                    "previous terminated container \"{container}\" in pod \"{pod}\" not found\n"
                ),
            );
        };
        let mut left = query.limit_bytes;
        let out = limit(select(&query, lines, Timestamp::now()).concat(), &mut left);
        return text(StatusCode::OK, out);
    }
    let mut left = query.limit_bytes;
    let first: String = select(&query, &log.lines, Timestamp::now()).concat();
    let first = limit(first, &mut left);
    if !query.follow || log.done || left == Some(0) {
        return text(StatusCode::OK, first);
    }
    // Follow: what is there, then each new line as it comes, until the container terminates.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(16);
    let mut changes = store.changed.subscribe();
    let mut sent = log.lines.len();
    tokio::spawn(async move {
        if !first.is_empty() && tx.send(Ok(Frame::data(Bytes::from(first)))).await.is_err() {
            return;
        }
        loop {
            if changes.changed().await.is_err() {
                return;
            }
            let Some(log) = store.snapshot(&ns, &pod, &container) else {
                return;
            };
            let fresh: String = log.lines[sent.min(log.lines.len())..]
                .iter()
                .map(|(t, l)| format_line(&query, *t, l))
                .collect();
            sent = log.lines.len();
            let fresh = limit(fresh, &mut left);
            if !fresh.is_empty() && tx.send(Ok(Frame::data(Bytes::from(fresh)))).await.is_err() {
                return;
            }
            if log.done || left == Some(0) {
                return;
            }
        }
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    let mut resp = Response::new(StreamBody::new(stream).boxed());
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// The TLS configuration: our serving certificate, and client certificates required and
/// verified against `client_ca` (the apiserver presents `--kubelet-client-certificate`).
pub fn tls_config(
    cert_pem: &[u8],
    key_pem: &[u8],
    client_ca_pem: &[u8],
) -> anyhow::Result<rustls::ServerConfig> {
    use anyhow::Context;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .context("the --tls-cert file is not PEM certificates")?;
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .context("the --tls-key file holds no PEM private key")?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(client_ca_pem) {
        roots
            .add(ca.context("the --client-ca file is not PEM certificates")?)
            .context("a --client-ca certificate is not a usable CA")?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .context("cannot build the client certificate verifier from --client-ca")?;
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("no TLS protocol versions")?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .context("the --tls-cert and --tls-key do not make a serving certificate")?;
    Ok(config)
}

/// Serves logs on `listener` until `shutdown` changes.
pub async fn serve(
    listener: TcpListener,
    tls: rustls::ServerConfig,
    store: Arc<LogStore>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    loop {
        let (tcp, peer): (tokio::net::TcpStream, SocketAddr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("log server: accept failed: {e}");
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let acceptor = acceptor.clone();
        let store = store.clone();
        tokio::spawn(async move {
            let tls = match acceptor.accept(tcp).await {
                Ok(t) => t,
                Err(e) => {
                    // A client without a certificate chained to --client-ca ends here.
                    tracing::info!("log server: TLS handshake with {peer} failed: {e}");
                    return;
                }
            };
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let store = store.clone();
                async move {
                    let path = req.uri().path().to_owned();
                    let query = req.uri().query().unwrap_or_default().to_owned();
                    tracing::debug!("log server: {} {path}?{query}", req.method());
                    Ok::<_, std::convert::Infallible>(
                        handle(store, req.method(), &path, &query).await,
                    )
                }
            });
            let builder = hyper::server::conn::http1::Builder::new();
            if let Err(e) = builder.serve_connection(TokioIo::new(tls), svc).await {
                tracing::debug!("log server: connection from {peer}: {e}");
            }
        });
    }
}
