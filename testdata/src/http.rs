//! The HTTPS front end: TLS, authentication, routing, fault injection, the request log, and
//! the streaming answers (watches, followed logs).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::ReceiverStream;

use crate::discovery;
use crate::engine::{ApiError, PatchType, Shared, WriteOk, WriteOpts, lock};
use crate::resources::ResourceType;
use crate::scenario::Verb;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::sim::RequestRecord;
use crate::store::{GENERATED_LINE_BYTES, Key, generated_lines};

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The service asked for the connection to be closed without an answer.
#[derive(Debug)]
pub struct DroppedConnection;

impl std::fmt::Display for DroppedConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by fault injection")
    }
}

impl std::error::Error for DroppedConnection {}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

fn json_response(code: u16, v: &Value) -> Response<Body> {
    let mut resp = Response::new(full(v.to_string()));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn error_response(e: &ApiError) -> Response<Body> {
    let mut resp = json_response(e.code, &e.status());
    if let Some(secs) = e.retry_after
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

fn write_response(ok: WriteOk) -> Response<Body> {
    let mut resp = json_response(ok.code, &ok.object);
    for w in ok.warnings {
        if let Ok(v) = HeaderValue::from_str(&format!("299 - {}", json!(w))) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

/// Decodes `%XX` and `+` in a query component.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Query parameters; empty parts (kube-rs sends `?&…`) are skipped.
#[derive(Debug, Default, Clone)]
pub struct Query(Vec<(String, String)>);

// parse, get and flag pub for the unit tests in tests/unit/
impl Query {
    pub fn parse(q: &str) -> Query {
        Query(
            q.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (percent_decode(k), percent_decode(v)),
                    None => (percent_decode(p), String::new()),
                })
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true") | Some("1"))
    }
}

/// A request to a resource path.
// pub for the unit tests in tests/unit/
#[derive(Debug, Clone, Default)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub plural: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

// pub for the unit tests in tests/unit/
pub fn parse_resource_path(path: &str) -> Option<ResourcePath> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    if rest.is_empty() {
        return None;
    }
    let (namespace, rest) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some(ns.to_string()), tail),
        _ => (None, rest),
    };
    Some(ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        namespace,
        plural: rest.first()?.to_string(),
        name: rest.get(1).map(|s| s.to_string()),
        subresource: rest.get(2).map(|s| s.to_string()),
    })
}

/// What the request log needs to know about a request, filled in as it is understood.
struct Ctx {
    start: Instant,
    method: String,
    path: String,
    query_raw: String,
    content_type: Option<String>,
    accept: Option<String>,
    user_agent: Option<String>,
    authenticated: bool,
    verb: Option<Verb>,
    resource: Option<String>,
    group: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    dry_run: bool,
    fault: Option<String>,
}

fn header_str(req: &Request<Incoming>, name: header::HeaderName) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

impl Shared {
    fn record(&self, ctx: &Ctx, status: u16) {
        let write = ctx.verb.is_some_and(Verb::is_write)
            && !ctx.dry_run
            && !matches!(
                ctx.resource.as_deref(),
                Some("selfsubjectaccessreviews" | "selfsubjectrulesreviews")
            );
        let mut requests = lock(&self.requests);
        let record = RequestRecord {
            seq: requests.len() as u64,
            method: ctx.method.clone(),
            path: ctx.path.clone(),
            query: ctx.query_raw.clone(),
            content_type: ctx.content_type.clone(),
            accept: ctx.accept.clone(),
            user_agent: ctx.user_agent.clone(),
            status,
            write,
            dry_run: ctx.dry_run,
            verb: ctx.verb.map(|v| v.as_str().to_string()),
            group: ctx.group.clone(),
            resource: ctx.resource.clone(),
            namespace: ctx.namespace.clone(),
            name: ctx.name.clone(),
            fault: ctx.fault.clone(),
            authenticated: ctx.authenticated,
            duration_ms: ctx.start.elapsed().as_millis() as u64,
            at_us: self.micros_since_start(ctx.start),
        };
        if let Some(file) = &self.request_log_file {
            use std::io::Write as _;
            if let Ok(line) = serde_json::to_string(&record) {
                let _ = writeln!(lock(file), "{line}");
            }
        }
        requests.push(record);
    }
}

/// Serves connections until shutdown.
pub async fn serve(shared: Arc<Shared>, listener: TcpListener, acceptor: TlsAcceptor) {
    let mut shutdown = shared.shutdown.clone();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => return,
        };
        let Ok((tcp, _)) = accepted else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let shared = shared.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let mut shutdown = shared.shutdown.clone();
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let drop_signal = Arc::new(Notify::new());
            let svc_shared = shared.clone();
            let svc_drop = drop_signal.clone();
            let svc = hyper::service::service_fn(move |req| {
                let shared = svc_shared.clone();
                let drop_signal = svc_drop.clone();
                async move {
                    match handle(shared, req).await {
                        Ok(resp) => Ok(resp),
                        Err(DroppedConnection) => {
                            drop_signal.notify_one();
                            // Never answer: the connection task drops the connection.
                            std::future::pending::<Result<Response<Body>, DroppedConnection>>()
                                .await
                        }
                    }
                }
            });
            let builder = hyper::server::conn::http1::Builder::new();
            let conn = builder.serve_connection(TokioIo::new(tls), svc);
            tokio::select! {
                _ = conn => {}
                _ = drop_signal.notified() => {}
                _ = shutdown.changed() => {}
            }
        });
    }
}

/// Answers one request (or asks for the connection to be dropped).
async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Body>, DroppedConnection> {
    let mut ctx = Ctx {
        start: Instant::now(),
        method: req.method().to_string(),
        path: req.uri().path().to_string(),
        query_raw: req.uri().query().unwrap_or_default().to_string(),
        content_type: header_str(&req, header::CONTENT_TYPE),
        accept: header_str(&req, header::ACCEPT),
        user_agent: header_str(&req, header::USER_AGENT),
        authenticated: false,
        verb: None,
        resource: None,
        group: None,
        namespace: None,
        name: None,
        dry_run: false,
        fault: None,
    };
    let query = Query::parse(&ctx.query_raw);
    let token_ok = header_str(&req, header::AUTHORIZATION)
        .is_some_and(|a| a == format!("Bearer {}", shared.token));
    ctx.authenticated = token_ok;
    let path = ctx.path.clone();
    let public = matches!(
        path.as_str(),
        "/version" | "/healthz" | "/livez" | "/readyz"
    );
    if !token_ok && !public {
        let resp = error_response(&ApiError::new(401, "Unauthorized", "Unauthorized"));
        shared.record(&ctx, 401);
        return Ok(resp);
    }
    let resource_path = parse_resource_path(&path);
    let is_resource = resource_path.is_some()
        && resource_path.as_ref().is_some_and(|rp| {
            shared
                .state()
                .find_type(&rp.group, &rp.version, &rp.plural)
                .is_some()
                || rp.namespace.is_some()
        });
    if let (Some(rp), true) = (&resource_path, is_resource) {
        ctx.verb = Some(classify(req.method(), rp, &query));
        ctx.group = Some(rp.group.clone());
        ctx.resource = Some(match &rp.subresource {
            Some(sub) => format!("{}/{}", rp.plural, sub),
            None => rp.plural.clone(),
        });
        ctx.namespace = rp.namespace.clone();
        ctx.name = rp.name.clone();
        ctx.dry_run = query.get("dryRun").is_some_and(|d| d == "All");
    }
    // Faults: latency first, then one-shot failures, drops and error rates.
    let faults_apply = if path == "/version" {
        lock(&shared.faults).faults.include_version
    } else if is_resource {
        true
    } else {
        lock(&shared.faults).faults.include_discovery
    };
    if faults_apply {
        let latency = lock(&shared.faults).faults.latency_ms;
        if latency > 0 {
            tokio::time::sleep(Duration::from_millis(latency)).await;
        }
        let verb = ctx.verb.unwrap_or(Verb::Get);
        let resource = ctx.resource.clone().unwrap_or_default();
        let decision = decide_fault(&shared, verb, &resource, ctx.name.as_deref());
        match decision {
            Some(FaultDecision::Drop) => {
                ctx.fault = Some("drop".to_string());
                shared.record(&ctx, 0);
                return Err(DroppedConnection);
            }
            Some(FaultDecision::Status(code, retry)) => {
                ctx.fault = Some(format!("status {code}"));
                let mut e = match code {
                    429 => ApiError::new(
                        429,
                        "TooManyRequests",
                        "Too many requests, please try again later.",
                    ),
                    503 => ApiError::new(
                        503,
                        "ServiceUnavailable",
                        "the server is currently unable to handle the request",
                    ),
                    500 => ApiError::new(
                        500,
                        "InternalError",
                        "Internal error occurred: injected fault",
                    ),
                    // As RBAC words a refusal (an injected one: the sim authorizes everything).
                    403 => {
                        let plural = ctx.resource.clone().unwrap_or_default();
                        let group = ctx.group.clone().unwrap_or_default();
                        let kind = if group.is_empty() {
                            plural.clone()
                        } else {
                            format!("{plural}.{group}")
                        };
                        let object = match &ctx.name {
                            Some(name) => format!("{kind} \"{name}\""),
                            None => kind,
                        };
                        let scope = match &ctx.namespace {
                            Some(ns) => format!(" in the namespace \"{ns}\""),
                            None => " at the cluster scope".to_owned(),
                        };
                        ApiError::new(
                            403,
                            "Forbidden",
                            format!(
                                "{object} is forbidden: User \"uyuni-sim-user\" cannot {} resource \"{plural}\" in API group \"{group}\"{scope} (injected fault)",
                                verb.as_str()
                            ),
                        )
                    }
                    other => {
                        ApiError::new(other, "InternalError", format!("injected fault {other}"))
                    }
                };
                // The real API server sends Retry-After with 429 (priority and fairness).
                if code == 429 {
                    e.retry_after = Some(retry);
                }
                let resp = error_response(&e);
                shared.record(&ctx, code);
                return Ok(resp);
            }
            None => {}
        }
    }
    let method = req.method().clone();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            shared.record(&ctx, 0);
            return Err(DroppedConnection);
        }
    };
    let resp = if let (Some(rp), true) = (resource_path, is_resource) {
        match resource_request(&shared, &method, &rp, &query, &body, &mut ctx).await {
            Ok(r) => r,
            Err(e) => error_response(&e),
        }
    } else {
        match non_resource_request(&shared, &method, &path, ctx.accept.as_deref().unwrap_or("")) {
            Ok(r) => r,
            Err(e) => error_response(&e),
        }
    };
    shared.record(&ctx, resp.status().as_u16());
    let counted = ctx.verb.is_some_and(Verb::is_write)
        && !ctx.dry_run
        && resp.status().is_success()
        && !matches!(
            ctx.resource.as_deref(),
            Some("selfsubjectaccessreviews" | "selfsubjectrulesreviews" | "leases")
        )
        // The plugin's record of its operation (`uyuni_core::operation`): bookkeeping beside
        // the steps, whose writes would double the boundaries a test interrupts at.
        && !(ctx.resource.as_deref() == Some("configmaps")
            && ctx
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("uyuni-operation-")));
    if counted {
        let hold = {
            let mut fs = lock(&shared.faults);
            fs.writes += 1;
            let hold = fs.faults.hold_after_write == Some(fs.writes);
            fs.holding |= hold;
            hold
        };
        if hold {
            // Carried out, never answered: the connection stays open until the client is gone.
            std::future::pending::<()>().await;
        }
    }
    Ok(resp)
}

enum FaultDecision {
    Drop,
    Status(u16, u32),
}

fn decide_fault(
    shared: &Shared,
    verb: Verb,
    resource: &str,
    name: Option<&str>,
) -> Option<FaultDecision> {
    let mut fs = lock(&shared.faults);
    let fs = &mut *fs;
    for (i, once) in fs.faults.fail_once.iter().enumerate() {
        if !fs.fired[i] && once.target.matches(verb, resource, name) {
            fs.fired[i] = true;
            return Some(if once.status == 0 {
                FaultDecision::Drop
            } else {
                FaultDecision::Status(once.status, once.retry_after_seconds)
            });
        }
    }
    for drop in &fs.faults.drops {
        if drop.target.matches(verb, resource, name) && fs.rng.next_f64() < drop.rate {
            return Some(FaultDecision::Drop);
        }
    }
    for err in &fs.faults.errors {
        if err.target.matches(verb, resource, name) && fs.rng.next_f64() < err.rate {
            return Some(FaultDecision::Status(err.status, err.retry_after_seconds));
        }
    }
    None
}

fn classify(method: &Method, rp: &ResourcePath, query: &Query) -> Verb {
    match (method.as_str(), rp.name.is_some()) {
        ("GET", true) => Verb::Get,
        ("GET", false) if query.flag("watch") => Verb::Watch,
        ("GET", false) => Verb::List,
        ("POST", _) => Verb::Create,
        ("PUT", _) => Verb::Update,
        ("PATCH", _) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::Deletecollection,
        _ => Verb::Get,
    }
}

fn non_resource_request(
    shared: &Shared,
    method: &Method,
    path: &str,
    accept: &str,
) -> Result<Response<Body>, ApiError> {
    if method != Method::GET {
        return Err(ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        ));
    }
    let minor = shared.config.server_minor;
    let types = shared.state().types.clone();
    let not_found = || {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    match path.trim_end_matches('/') {
        "/version" => Ok(json_response(
            200,
            &discovery::version(minor, shared.config.flavour),
        )),
        "/healthz" | "/livez" | "/readyz" => {
            let mut r = Response::new(full("ok"));
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            Ok(r)
        }
        "/api" | "/apis" => {
            let core = path.trim_end_matches('/') == "/api";
            if let Some(v) = discovery::aggregated_version(accept) {
                let doc = discovery::aggregated(&types, core, v);
                let mut r = json_response(200, &doc);
                let ct = format!(
                    "application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList"
                );
                if let Ok(h) = HeaderValue::from_str(&ct) {
                    r.headers_mut().insert(header::CONTENT_TYPE, h);
                }
                Ok(r)
            } else if core {
                Ok(json_response(
                    200,
                    &discovery::api_versions(&lock(&shared.server_addr)),
                ))
            } else {
                Ok(json_response(200, &discovery::api_group_list(&types)))
            }
        }
        "/openapi/v2" => {
            if accept.contains("protobuf") {
                let mut r = Response::new(full(discovery::openapi_v2_proto(&types, minor)));
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(
                        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
                    ),
                );
                Ok(r)
            } else {
                Ok(json_response(
                    200,
                    &discovery::openapi_v2_json(&types, minor),
                ))
            }
        }
        "/openapi/v3" => Ok(json_response(200, &discovery::openapi_root(&types, minor))),
        p => {
            let segs: Vec<&str> = p.trim_matches('/').split('/').collect();
            let doc = match segs.as_slice() {
                ["api", v] => discovery::api_resource_list(&types, "", v),
                ["apis", g] => discovery::api_group(&types, g),
                ["apis", g, v] => discovery::api_resource_list(&types, g, v),
                ["openapi", "v3", "api", v] => discovery::openapi_gv(&types, "", v, minor),
                ["openapi", "v3", "apis", g, v] => discovery::openapi_gv(&types, g, v, minor),
                _ => None,
            };
            doc.map(|d| json_response(200, &d)).ok_or_else(not_found)
        }
    }
}

/// Parses a request body: JSON, or YAML for server-side apply.
fn parse_body(body: &[u8], content_type: Option<&str>) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    if content_type.is_some_and(|ct| ct.contains("protobuf"))
        && let Some(v) = crate::protobuf::decode(body)
    {
        return Ok(v);
    }
    let is_yaml = content_type.is_some_and(|ct| ct.contains("yaml"));
    if is_yaml {
        let text = std::str::from_utf8(body)
            .map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
        return serde_saphyr::from_str::<Value>(text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")));
    }
    // Protobuf (what client-go's typed clients send for built-in kinds) is not spoken here:
    // 415 makes client-go retry the request as JSON.
    Err(ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json, application/yaml (got {})",
            content_type.unwrap_or("no content type")
        ),
    ))
}

fn write_opts(query: &Query, ctx: &Ctx) -> WriteOpts {
    WriteOpts {
        dry_run: ctx.dry_run,
        field_manager: query.get("fieldManager").map(str::to_string),
        field_validation: query.get("fieldValidation").map(str::to_string),
        force: query.flag("force"),
        user_agent: ctx.user_agent.clone().unwrap_or_default(),
        from_client: true,
    }
}

async fn resource_request(
    shared: &Arc<Shared>,
    method: &Method,
    rp: &ResourcePath,
    query: &Query,
    body: &[u8],
    ctx: &mut Ctx,
) -> Result<Response<Body>, ApiError> {
    // `/api/v1/namespaces/{name}` (and its status) address the Namespace itself.
    let mut rp = rp.clone();
    if rp.group.is_empty() && rp.namespace.is_some() {
        let known = shared
            .state()
            .find_type("", &rp.version, &rp.plural)
            .is_some();
        if !known && let Some(ns) = rp.namespace.take() {
            rp.subresource = Some(rp.plural.clone());
            rp.name = Some(ns);
            rp.plural = "namespaces".to_string();
        }
    }
    let rt = shared
        .state()
        .find_type(&rp.group, &rp.version, &rp.plural)
        .ok_or_else(|| {
            ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
        })?;
    if rt.namespaced && rp.namespace.is_none() && !matches!(*method, Method::GET) {
        return Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    }
    if let Some(sub) = &rp.subresource
        && !rt.subresources.contains(sub)
    {
        return Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    }
    let ns = rp.namespace.clone().unwrap_or_default();
    let opts = write_opts(query, ctx);
    let verb = ctx.verb.unwrap_or(Verb::Get);
    match (verb, rp.name.as_deref()) {
        (Verb::Get, Some(name)) => match rp.subresource.as_deref() {
            Some("log") => pod_log(shared, &rt, &ns, name, query).await,
            sub => {
                let key = Key::new(&rt, &ns, name);
                let obj = shared
                    .state()
                    .get(&key)
                    .cloned()
                    .ok_or_else(|| ApiError::not_found(&rt, name))?;
                let obj = if sub == Some("scale") {
                    crate::engine::object_to_scale(&obj)
                } else {
                    obj
                };
                Ok(json_response(200, &obj))
            }
        },
        (Verb::List, _) => list(
            shared,
            &rt,
            rp.namespace.as_deref(),
            query,
            ctx.accept.as_deref(),
        ),
        (Verb::Watch, _) => watch(shared, &rt, rp.namespace.as_deref(), query),
        (Verb::Create, None) => {
            let body = parse_body(body, ctx.content_type.as_deref())?;
            if rt.create_only && rt.plural == "selfsubjectrulesreviews" {
                // Everything is allowed: one rule says so. With denials configured, which a
                // rule list cannot express, the answer is `incomplete` and lists nothing, as
                // a server with an authorizer that cannot enumerate its rules answers
                // (authorization.k8s.io/v1 SubjectRulesReviewStatus): clients then ask
                // SelfSubjectAccessReviews.
                let mut review = body;
                review["status"] = if shared.config.denied_access.is_empty() {
                    json!({
                        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                        "incomplete": false,
                    })
                } else {
                    json!({
                        "resourceRules": [],
                        "nonResourceRules": [],
                        "incomplete": true,
                        "evaluationError": "denied by SimConfig::denied_access; ask SelfSubjectAccessReviews",
                    })
                };
                if review["metadata"].is_null() {
                    review["metadata"] = json!({"creationTimestamp": null});
                }
                return Ok(json_response(201, &review));
            }
            if rt.create_only {
                let mut review = body;
                let attributes = &review["spec"]["resourceAttributes"];
                let resource = attributes["resource"].as_str().unwrap_or_default();
                let asked = (
                    attributes["verb"].as_str().unwrap_or_default().to_owned(),
                    match attributes["subresource"].as_str().filter(|s| !s.is_empty()) {
                        Some(sub) => format!("{resource}/{sub}"),
                        None => resource.to_owned(),
                    },
                );
                review["status"] = if shared.config.denied_access.contains(&asked) {
                    json!({"allowed": false, "reason": "denied by SimConfig::denied_access"})
                } else {
                    json!({"allowed": true, "reason": "the simulated cluster allows everything"})
                };
                if review["metadata"].is_null() {
                    review["metadata"] = json!({"creationTimestamp": null});
                }
                return Ok(json_response(201, &review));
            }
            shared
                .create(&rt, &ns, body, &opts, false)
                .map(write_response)
        }
        (Verb::Update, Some(name)) => {
            let body = parse_body(body, ctx.content_type.as_deref())?;
            shared
                .update(&rt, &ns, name, rp.subresource.as_deref(), body, &opts)
                .map(write_response)
        }
        (Verb::Patch, Some(name)) => {
            let ct = ctx.content_type.clone().unwrap_or_default();
            let patch_type = PatchType::from_content_type(&ct).ok_or_else(|| {
                ApiError::new(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {ct:?})"))
            })?;
            let body = parse_body(body, Some(&ct))?;
            shared
                .patch(
                    &rt,
                    &ns,
                    name,
                    rp.subresource.as_deref(),
                    patch_type,
                    body,
                    &opts,
                )
                .map(write_response)
        }
        (Verb::Delete, Some(name)) => {
            let options = parse_body(body, ctx.content_type.as_deref()).unwrap_or(Value::Null);
            let mut opts = opts;
            if options["dryRun"]
                .as_array()
                .is_some_and(|a| a.iter().any(|d| d == "All"))
            {
                opts.dry_run = true;
                ctx.dry_run = true;
            }
            let propagation = query
                .get("propagationPolicy")
                .map(str::to_string)
                .or_else(|| options["propagationPolicy"].as_str().map(str::to_string));
            let precondition = options["preconditions"]["resourceVersion"].as_str();
            shared
                .delete(&rt, &ns, name, propagation.as_deref(), precondition, &opts)
                .map(write_response)
        }
        (Verb::Deletecollection, None) => {
            let label = LabelSelector::parse(query.get("labelSelector").unwrap_or(""))
                .map_err(ApiError::bad_request)?;
            let field = FieldSelector::parse(query.get("fieldSelector").unwrap_or(""))
                .map_err(ApiError::bad_request)?;
            let names: Vec<String> = shared
                .state()
                .list(&rt, rp.namespace.as_deref())
                .into_iter()
                .filter(|o| label.matches(o) && field.matches(o))
                .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
                .collect();
            let mut items = Vec::new();
            for name in names {
                if let Ok(ok) = shared.delete(&rt, &ns, &name, None, None, &opts) {
                    items.push(ok.object);
                }
            }
            let rv = shared.state().rv;
            Ok(json_response(
                200,
                &json!({
                    "kind": format!("{}List", rt.kind),
                    "apiVersion": rt.api_version(),
                    "metadata": {"resourceVersion": rv.to_string()},
                    "items": items,
                }),
            ))
        }
        _ => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )),
    }
}

fn selectors(query: &Query) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let label = LabelSelector::parse(query.get("labelSelector").unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    let field = FieldSelector::parse(query.get("fieldSelector").unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    Ok((label, field))
}

fn list(
    shared: &Shared,
    rt: &ResourceType,
    namespace: Option<&str>,
    query: &Query,
    accept: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let (label, field) = selectors(query)?;
    let (items, rv) = {
        let state = shared.state();
        let items: Vec<Value> = state
            .list(rt, namespace)
            .into_iter()
            .filter(|o| label.matches(o) && field.matches(o))
            .collect();
        (items, state.rv)
    };
    if accept.is_some_and(|a| a.contains("as=Table")) {
        return Ok(json_response(200, &crate::table::table(rt, &items, rv)));
    }
    Ok(json_response(
        200,
        &json!({
            "kind": format!("{}List", rt.kind),
            "apiVersion": rt.api_version(),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items,
        }),
    ))
}

/// One line of a watch stream: `{"type":…,"object":…}` and a newline. Written straight from the
/// stored object: `json!` copied the whole object into a new Value first (a fifth of the
/// simulator's CPU in the simulated migrations went to watch streams).
fn event_line(etype: &str, object: &Value) -> Bytes {
    let mut line = Vec::with_capacity(4096);
    line.extend_from_slice(b"{\"type\":");
    // Neither can fail: a String and a Value serialize to a Vec without I/O errors.
    let _ = serde_json::to_writer(&mut line, etype);
    line.extend_from_slice(b",\"object\":");
    let _ = serde_json::to_writer(&mut line, object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

/// A chunked stream of watch events.
fn watch(
    shared: &Arc<Shared>,
    rt: &ResourceType,
    namespace: Option<&str>,
    query: &Query,
) -> Result<Response<Body>, ApiError> {
    let (label, field) = selectors(query)?;
    let send_initial = query.flag("sendInitialEvents");
    let rv: u64 = query
        .get("resourceVersion")
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let (close_after_events, expire_after_events, close_after_ms, event_delay) = {
        let f = lock(&shared.faults);
        (
            f.faults.watch_close_after_events,
            f.faults.watch_expire_after_events,
            f.faults.watch_close_after_ms,
            f.faults.watch_event_delay_ms.map(Duration::from_millis),
        )
    };
    // What the API server sends when the watch's resourceVersion is compacted away
    // (k8s.io/apiserver pkg/storage/cacher: "too old resource version", 410 Expired), as an
    // ERROR event on the open stream; the client must list again.
    let expired = event_line(
        "ERROR",
        &json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!("too old resource version: {rv} (injected fault)"),
            "reason": "Expired",
            "code": 410,
        }),
    );
    let deadline = tokio::time::Instant::now()
        + close_after_ms
            .map(Duration::from_millis)
            .map_or(timeout, |d| d.min(timeout));
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let shared = shared.clone();
    let rt = rt.clone();
    let namespace = namespace.map(str::to_string);
    let matches = move |key: &Key, obj: &Value, rt: &ResourceType| {
        key.group == rt.group
            && key.plural == rt.plural
            && namespace
                .as_deref()
                .is_none_or(|ns| !rt.namespaced || key.namespace == ns)
            && label.matches(obj)
            && field.matches(obj)
    };
    tokio::spawn(async move {
        let mut changes = shared.changes.subscribe();
        changes.borrow_and_update();
        let mut shutdown = shared.shutdown.clone();
        let mut sent: u32 = 0;
        let closes = |sent: u32| close_after_events.is_some_and(|n| sent >= n);
        let expires = |sent: u32| expire_after_events.is_some_and(|n| sent >= n);
        let mut cursor;
        let initial: Vec<Bytes>;
        {
            let state = shared.state();
            if send_initial || rv == 0 {
                initial = state
                    .objects
                    .iter()
                    .filter(|(k, v)| matches(k, v, &rt))
                    .map(|(_, v)| event_line("ADDED", v))
                    .collect();
                cursor = state.rv;
            } else {
                initial = Vec::new();
                cursor = rv;
            }
        }
        for line in initial {
            if tx.send(line).await.is_err() {
                return;
            }
            sent += 1;
            if expires(sent) {
                let _ = tx.send(expired.clone()).await;
                return;
            }
            if closes(sent) {
                return;
            }
        }
        if send_initial {
            let bookmark = json!({
                "kind": rt.kind,
                "apiVersion": rt.api_version(),
                "metadata": {
                    "resourceVersion": cursor.to_string(),
                    "annotations": {"k8s.io/initial-events-end": "true"},
                },
            });
            if tx.send(event_line("BOOKMARK", &bookmark)).await.is_err() {
                return;
            }
        }
        loop {
            let lines: Vec<Bytes> = {
                let state = shared.state();
                let events = state.events_after(cursor);
                let lines = events
                    .iter()
                    .filter(|e| matches(&e.key, &e.object, &rt))
                    .map(|e| event_line(e.etype.as_str(), &e.object))
                    .collect();
                cursor = state.rv.max(cursor);
                lines
            };
            if let Some(delay) = event_delay.filter(|_| !lines.is_empty()) {
                tokio::time::sleep(delay).await;
            }
            for line in lines {
                if tx.send(line).await.is_err() {
                    return;
                }
                sent += 1;
                if expires(sent) {
                    let _ = tx.send(expired.clone()).await;
                    return;
                }
                if closes(sent) {
                    return;
                }
            }
            tokio::select! {
                r = changes.changed() => if r.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => return,
                _ = shutdown.changed() => return,
                _ = tx.closed() => return,
            }
        }
    });
    let stream = ReceiverStream::new(rx).map(|b| Ok::<_, Infallible>(Frame::data(b)));
    let mut resp = Response::new(StreamBody::new(stream).boxed_unsync());
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// `GET pods/{name}/log`: the container's log as text; `follow` streams until it ends.
async fn pod_log(
    shared: &Arc<Shared>,
    rt: &ResourceType,
    ns: &str,
    name: &str,
    query: &Query,
) -> Result<Response<Body>, ApiError> {
    let pod = shared
        .state()
        .get(&Key::new(rt, ns, name))
        .cloned()
        .ok_or_else(|| ApiError::not_found(rt, name))?;
    let containers: Vec<String> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect();
    let container = match query.get("container") {
        Some(c) if !c.is_empty() => {
            if !containers.iter().any(|x| x == c) {
                return Err(ApiError::bad_request(format!(
                    "container {c} is not valid for pod {name}"
                )));
            }
            c.to_string()
        }
        _ if containers.len() == 1 => containers[0].clone(),
        _ => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            )));
        }
    };
    let log_key = (ns.to_string(), name.to_string(), container.clone());
    let existing = shared.state().logs.get(&log_key).cloned();
    let Some(log) = existing else {
        if pod["status"]["phase"] == json!("Pending") || pod["status"]["phase"].is_null() {
            let waiting = pod["status"]["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|s| s["name"].as_str() == Some(container.as_str()))
                .and_then(|s| s["state"]["waiting"]["reason"].as_str())
                .unwrap_or("ContainerCreating")
                .to_string();
            let why = match waiting.as_str() {
                "ImagePullBackOff" | "ErrImagePull" => {
                    "trying and failing to pull image".to_string()
                }
                other => other.to_string(),
            };
            return Err(ApiError::bad_request(format!(
                "container \"{container}\" in pod \"{name}\" is waiting to start: {why}"
            )));
        }
        return Ok(text_response(String::new()));
    };
    let tail = query.get("tailLines").and_then(|t| t.parse::<usize>().ok());
    if log.generated_bytes > 0 && tail.is_none() {
        let (tx, rx) = mpsc::channel::<Bytes>(4);
        let shared = shared.clone();
        let follow = query.flag("follow");
        let bytes = log.generated_bytes;
        tokio::spawn(async move {
            // 64 KB at a time; the channel's bound holds the generator to the reader's pace.
            const CHUNK_LINES: u64 = 640;
            let total = bytes.div_ceil(GENERATED_LINE_BYTES);
            let mut next = 0;
            while next < total {
                let count = CHUNK_LINES.min(total - next);
                if tx
                    .send(Bytes::from(generated_lines(next, count)))
                    .await
                    .is_err()
                {
                    return;
                }
                next += count;
            }
            if let Some(log) = shared.state().logs.get_mut(&log_key) {
                log.generated_read = true;
            }
            shared.notify_change();
            stream_log_lines(shared, log_key, 0, follow, tx).await;
        });
        return Ok(text_stream(rx));
    }
    let start = tail.map_or(0, |n| log.lines.len().saturating_sub(n));
    let first: String = log.lines[start..]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    if !query.flag("follow") || log.done {
        return Ok(text_response(first));
    }
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let shared = shared.clone();
    let cursor = log.lines.len();
    tokio::spawn(async move {
        if !first.is_empty() && tx.send(Bytes::from(first)).await.is_err() {
            return;
        }
        stream_log_lines(shared, log_key, cursor, true, tx).await;
    });
    Ok(text_stream(rx))
}

/// Sends a container's stored log lines from `cursor` on; with `follow`, goes on with the lines
/// appended later until the container ends (or the reader goes away).
async fn stream_log_lines(
    shared: Arc<Shared>,
    log_key: (String, String, String),
    mut cursor: usize,
    follow: bool,
    tx: mpsc::Sender<Bytes>,
) {
    let mut changes = shared.changes.subscribe();
    changes.borrow_and_update();
    let mut shutdown = shared.shutdown.clone();
    loop {
        let (chunk, done) = {
            let state = shared.state();
            match state.logs.get(&log_key) {
                None => (String::new(), true),
                Some(log) => {
                    let chunk: String = log.lines[cursor.min(log.lines.len())..]
                        .iter()
                        .map(|l| format!("{l}\n"))
                        .collect();
                    cursor = log.lines.len();
                    (chunk, log.done)
                }
            }
        };
        if !chunk.is_empty() && tx.send(Bytes::from(chunk)).await.is_err() {
            return;
        }
        if done || !follow {
            return;
        }
        tokio::select! {
            r = changes.changed() => if r.is_err() { return },
            _ = shutdown.changed() => return,
            _ = tx.closed() => return,
        }
    }
}

/// A `text/plain` answer streamed from `rx`.
fn text_stream(rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let stream = ReceiverStream::new(rx).map(|b| Ok::<_, Infallible>(Frame::data(b)));
    let mut resp = Response::new(StreamBody::new(stream).boxed_unsync());
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

fn text_response(text: String) -> Response<Body> {
    let mut resp = Response::new(full(text));
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}
