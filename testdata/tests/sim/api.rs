//! API semantics: discovery, auth, CRUD, patches, dry-run, selectors, watches, logs, validation.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use uyuni_testdata::{Flavour, SimCluster, SimConfig};

use super::{WAIT, client, client_for, fast, job, namespace, parse, raw, start};

#[tokio::test]
async fn starts_and_writes_a_kubeconfig() {
    // How fast it starts is a benchmark's question, not a test's: the machines are shared.
    let sim = start(SimConfig {
        namespace: Some("uyuni".to_string()),
        ..SimConfig::default()
    })
    .await;
    let kubeconfig = std::fs::read_to_string(sim.kubeconfig_path()).expect("kubeconfig");
    assert!(kubeconfig.contains(&format!("server: {}", sim.url())));
    assert!(kubeconfig.contains("certificate-authority-data: "));
    assert!(kubeconfig.contains(&format!("token: {}", sim.token())));
    assert!(kubeconfig.contains("namespace: uyuni"));
    assert_eq!(client(&sim).await.default_namespace(), "uyuni");
}

#[tokio::test]
async fn version_reports_the_configured_minor_and_flavour() {
    for (flavour, minor, git) in [
        (Flavour::K3s, 33, "v1.33.5+k3s1"),
        (Flavour::Rke2, 27, "v1.27.16+rke2r1"),
        (Flavour::Plain, 30, "v1.30.14"),
    ] {
        let sim = start(SimConfig {
            flavour,
            server_minor: minor,
            ..SimConfig::default()
        })
        .await;
        let c = client(&sim).await;
        let v = c.apiserver_version().await.expect("version");
        assert_eq!(v.minor, minor.to_string());
        assert_eq!(v.git_version, git);
        let node = sim.get("v1", "Node", None, "node-1").expect("node");
        assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], json!(git));
    }
}

#[tokio::test]
async fn wrong_or_missing_token_gets_401_but_version_is_public() {
    let sim = start(SimConfig::default()).await;
    let bad = client_for(&sim, Some("uyuni-sim-wrong-token"), false).await;
    let err = Api::<ConfigMap>::namespaced(bad.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect_err("unauthorized");
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 401);
            assert_eq!(s.reason, "Unauthorized");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(bad.apiserver_version().await.is_ok());
    let log = sim.request_log();
    assert!(log.iter().any(|r| r.status == 401 && !r.authenticated));
}

#[tokio::test]
async fn legacy_and_aggregated_discovery() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim).await;
    let (code, _, body) = raw(&c, "GET", "/api", None, None, None).await;
    assert_eq!(code, 200);
    assert_eq!(parse(&body)["versions"], json!(["v1"]));
    let (_, _, body) = raw(&c, "GET", "/api/v1", None, None, None).await;
    let v1 = parse(&body);
    assert_eq!(v1["groupVersion"], json!("v1"));
    let names: Vec<&str> = v1["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(names.contains(&"pods/log") && names.contains(&"secrets"));
    let (_, _, body) = raw(&c, "GET", "/apis/batch/v1", None, None, None).await;
    assert!(body.contains("\"jobs/status\""));
    let (_, _, body) = raw(&c, "GET", "/apis", None, None, None).await;
    let groups = parse(&body);
    assert_eq!(groups["kind"], json!("APIGroupList"));
    assert!(body.contains("cert-manager.io/v1") && body.contains("traefik.io/v1alpha1"));

    for (accept, version) in [
        (
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
            "v2",
        ),
        (
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
            "v2beta1",
        ),
    ] {
        let (code, headers, body) = raw(&c, "GET", "/apis", None, Some(accept), None).await;
        assert_eq!(code, 200);
        let ct = headers["content-type"].to_str().expect("ascii");
        assert!(ct.contains(&format!("v={version}")), "{ct}");
        let doc = parse(&body);
        assert_eq!(doc["kind"], json!("APIGroupDiscoveryList"));
        let batch = doc["items"]
            .as_array()
            .expect("items")
            .iter()
            .find(|i| i["metadata"]["name"] == json!("batch"))
            .expect("batch group");
        let jobs = &batch["versions"][0]["resources"][0];
        assert_eq!(jobs["resource"], json!("jobs"));
        assert_eq!(jobs["subresources"][0]["subresource"], json!("status"));
    }
    // kube-rs's own discovery uses the legacy documents.
    let discovery = kube::Discovery::new(c.clone())
        .run()
        .await
        .expect("discovery");
    assert!(discovery.has_group("cert-manager.io"));
}

#[tokio::test]
async fn flavours_have_their_ingress_class_crds_and_storage() {
    let k3s = start(SimConfig::default()).await;
    assert!(
        k3s.get("networking.k8s.io/v1", "IngressClass", None, "traefik")
            .is_some()
    );
    assert!(
        k3s.get(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            "ingressroutetcps.traefik.io"
        )
        .is_some()
    );
    assert!(
        k3s.get(
            "apps/v1",
            "Deployment",
            Some("cert-manager"),
            "cert-manager"
        )
        .is_some()
    );
    let sc = k3s
        .get("storage.k8s.io/v1", "StorageClass", None, "local-path")
        .expect("sc");
    assert_eq!(
        sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"],
        json!("true")
    );

    let rke2 = start(SimConfig {
        flavour: Flavour::Rke2,
        cert_manager: false,
        default_storage_class: false,
        ..SimConfig::default()
    })
    .await;
    assert!(
        rke2.get("networking.k8s.io/v1", "IngressClass", None, "nginx")
            .is_some()
    );
    assert!(
        rke2.get(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            "helmchartconfigs.helm.cattle.io"
        )
        .is_some()
    );
    assert!(
        rke2.get(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            "certificates.cert-manager.io"
        )
        .is_none()
    );
    assert!(rke2.get("v1", "Namespace", None, "cert-manager").is_none());
    let sc = rke2
        .get("storage.k8s.io/v1", "StorageClass", None, "local-path")
        .expect("sc");
    assert!(sc["metadata"]["annotations"].is_null());

    let plain = start(SimConfig {
        flavour: Flavour::Plain,
        ..SimConfig::default()
    })
    .await;
    assert!(
        plain
            .objects("networking.k8s.io/v1", "IngressClass", None)
            .is_empty()
    );
    let c = client(&plain).await;
    let (code, _, _) = raw(&c, "GET", "/apis/traefik.io/v1alpha1", None, None, None).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn openapi_v3_stubs_name_the_kinds() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim).await;
    let (_, _, body) = raw(&c, "GET", "/openapi/v3", None, None, None).await;
    let root = parse(&body);
    let url = root["paths"]["apis/batch/v1"]["serverRelativeURL"]
        .as_str()
        .expect("batch entry");
    assert!(url.starts_with("/openapi/v3/apis/batch/v1?hash="));
    let (code, _, body) = raw(&c, "GET", url, None, None, None).await;
    assert_eq!(code, 200);
    let doc = parse(&body);
    let patch = &doc["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"]["kind"],
        json!("Job")
    );
    assert!(patch["parameters"].to_string().contains("fieldValidation"));
    // kubectl 1.27 reads v2 (as protobuf) to decide on server-side validation.
    let (code, _, body) = raw(&c, "GET", "/openapi/v2", None, None, None).await;
    assert_eq!(code, 200);
    let v2 = parse(&body);
    assert_eq!(v2["swagger"], json!("2.0"));
    assert_eq!(
        v2["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"]["x-kubernetes-group-version-kind"]
            ["kind"],
        json!("Job")
    );
    let (code, headers, body) = raw(
        &c,
        "GET",
        "/openapi/v2",
        None,
        Some("application/com.github.proto-openapi.spec.v2@v1.0+protobuf"),
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert!(
        headers["content-type"]
            .to_str()
            .expect("ascii")
            .contains("protobuf")
    );
    assert!(body.contains("x-kubernetes-group-version-kind") && body.contains("fieldValidation"));
}

#[tokio::test]
async fn create_get_conflicts_and_not_found() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "a", "labels": {"app": "x"}}, "data": {"k": "v"}
    }))
    .expect("cm");
    let created = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("created");
    let meta = &created.metadata;
    assert!(meta.uid.is_some() && meta.creation_timestamp.is_some());
    let rv: u64 = meta
        .resource_version
        .as_deref()
        .expect("rv")
        .parse()
        .expect("numeric rv");
    assert!(rv > 0);

    match cms.create(&PostParams::default(), &cm).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
        }
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    assert!(cms.get_opt("missing").await.expect("get_opt").is_none());
    let (code, _, body) = raw(
        &c,
        "GET",
        "/api/v1/namespaces/default/configmaps/missing",
        None,
        None,
        None,
    )
    .await;
    assert_eq!(code, 404);
    let status = parse(&body);
    assert_eq!(status["message"], json!("configmaps \"missing\" not found"));
    assert_eq!(
        status["details"],
        json!({"name": "missing", "kind": "configmaps"})
    );

    // A namespace that does not exist.
    let other: Api<ConfigMap> = Api::namespaced(c.clone(), "nowhere");
    match other.create(&PostParams::default(), &cm).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 404);
            assert_eq!(s.message, "namespaces \"nowhere\" not found");
        }
        other => panic!("expected NotFound, got {other:?}"),
    }

    // generateName.
    let generated: ConfigMap =
        serde_json::from_value(json!({"metadata": {"generateName": "gen-"}})).expect("cm");
    let g = cms
        .create(&PostParams::default(), &generated)
        .await
        .expect("created");
    let name = g.metadata.name.expect("name");
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");

    // PUT with a stale resourceVersion.
    let mut stale = created.clone();
    stale.data = Some([("k".to_string(), "v2".to_string())].into());
    cms.replace("a", &PostParams::default(), &stale)
        .await
        .expect("first replace");
    match cms.replace("a", &PostParams::default(), &stale).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict")),
        other => panic!("expected Conflict, got {other:?}"),
    }
    // Deleting answers with the object; afterwards it is gone.
    let deleted = cms
        .delete("a", &DeleteParams::default())
        .await
        .expect("deleted");
    assert!(deleted.left().is_some());
    assert!(cms.get_opt("a").await.expect("get").is_none());
}

#[tokio::test]
async fn secrets_and_jobs_get_server_defaults() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim).await;
    let api = kube::Api::<Secret>::namespaced(c.clone(), "default");
    let s: Secret = serde_json::from_value(json!({
        "metadata": {"name": "s"}, "data": {"a": "YQ=="}, "stringData": {"b": "with space"}
    }))
    .expect("secret");
    let created = api
        .create(&PostParams::default(), &s)
        .await
        .expect("created");
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    assert!(created.string_data.is_none());
    let data = created.data.expect("data");
    assert_eq!(data["b"].0, b"with space");
    assert_eq!(data["a"].0, b"a");
    assert!(
        sim.get("v1", "Secret", Some("default"), "s")
            .expect("stored")["metadata"]["generation"]
            .is_null()
    );

    sim.put(namespace("uyuni")).expect("ns");
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(c.clone(), "uyuni");
    let j = jobs
        .create(
            &PostParams::default(),
            &serde_json::from_value(job("j", None)).expect("job"),
        )
        .await
        .expect("created");
    let uid = j.metadata.uid.clone().expect("uid");
    let spec = j.spec.expect("spec");
    let selector = spec
        .selector
        .expect("selector")
        .match_labels
        .expect("labels");
    assert_eq!(selector["batch.kubernetes.io/controller-uid"], uid);
    let labels = spec
        .template
        .metadata
        .expect("meta")
        .labels
        .expect("labels");
    for k in ["batch.kubernetes.io/controller-uid", "controller-uid"] {
        assert_eq!(labels[k], uid);
    }
    for k in ["batch.kubernetes.io/job-name", "job-name"] {
        assert_eq!(labels[k], "j");
    }
    assert_eq!(j.metadata.generation, Some(1));
}

#[tokio::test]
async fn server_side_apply_creates_updates_and_tracks_managers() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim).await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1", "b": "2"}});
    let uri = "/api/v1/namespaces/default/configmaps/ssa?fieldManager=kubectl-uyuni&force=true";
    let (code, _, body) = raw(
        &c,
        "PATCH",
        uri,
        Some("application/apply-patch+yaml"),
        None,
        Some(cm.clone()),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let obj = parse(&body);
    let managed = &obj["metadata"]["managedFields"][0];
    assert_eq!(managed["manager"], json!("kubectl-uyuni"));
    assert_eq!(managed["operation"], json!("Apply"));
    assert_eq!(managed["fieldsV1"]["f:data"]["f:a"], json!({}));

    // Re-applying without `b` removes it (the manager owned it); same body → 200.
    let cm2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1"}});
    let (code, _, body) = raw(
        &c,
        "PATCH",
        uri,
        Some("application/apply-patch+yaml"),
        None,
        Some(cm2),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(parse(&body)["data"], json!({"a": "1"}));

    // YAML bodies work too.
    let yaml =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"1\"\n  c: three\n";
    let req = http::Request::builder()
        .method("PATCH")
        .uri(uri)
        .header("content-type", "application/apply-patch+yaml")
        .body(kube::client::Body::from(yaml.as_bytes().to_vec()))
        .expect("request");
    let resp = c.send(req).await.expect("sent");
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        sim.get("v1", "ConfigMap", Some("default"), "ssa")
            .expect("cm")["data"]["c"],
        json!("three")
    );

    // Another manager changing an applied field without force conflicts.
    let other = "/api/v1/namespaces/default/configmaps/ssa?fieldManager=someone-else";
    let (code, _, body) = raw(
        &c,
        "PATCH",
        other,
        Some("application/apply-patch+yaml"),
        None,
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "9"}})),
    )
    .await;
    assert_eq!(code, 409, "{body}");
    assert!(
        body.contains("conflict with \\\"kubectl-uyuni\\\""),
        "{body}"
    );

    // kube-rs's typed apply.
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let applied = api
        .patch("typed", &PatchParams::apply("kubectl-uyuni").force(), &Patch::Apply(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "typed"}, "data": {"x": "y"}
        })))
        .await
        .expect("applied");
    assert_eq!(applied.data.expect("data")["x"], "y");

    // fieldManager is required.
    let (code, _, _) = raw(
        &c,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/ssa",
        Some("application/apply-patch+yaml"),
        None,
        Some(cm),
    )
    .await;
    assert_eq!(code, 422);
}

#[tokio::test]
async fn merge_strategic_and_json_patches() {
    let sim = start(SimConfig::default()).await;
    sim.put(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "default"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [
                {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
                {"name": "b", "image": "b:1"}
            ]}}
        }
    }))
    .expect("deployment");
    let c = client(&sim).await;
    let uri = "/apis/apps/v1/namespaces/default/deployments/d";
    let (code, _, body) = raw(
        &c,
        "PATCH",
        uri,
        Some("application/strategic-merge-patch+json"),
        None,
        Some(json!({
            "spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [{"name": "a", "image": "a:2"}]
            }}}
        })),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let d = parse(&body);
    let containers = &d["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers[0]["image"], json!("a:2"));
    assert_eq!(containers[0]["env"][0]["name"], json!("X"));
    assert_eq!(containers[1]["image"], json!("b:1"));
    assert_eq!(d["metadata"]["generation"], json!(2));

    let (code, _, body) = raw(
        &c,
        "PATCH",
        uri,
        Some("application/merge-patch+json"),
        None,
        Some(json!({
            "metadata": {"labels": {"l": "v"}}
        })),
    )
    .await;
    assert_eq!(code, 200);
    let d = parse(&body);
    assert_eq!(d["metadata"]["labels"]["l"], json!("v"));
    assert_eq!(
        d["metadata"]["generation"],
        json!(2),
        "metadata changes keep the generation"
    );

    let (code, _, body) = raw(
        &c,
        "PATCH",
        uri,
        Some("application/json-patch+json"),
        None,
        Some(json!([
            {"op": "replace", "path": "/spec/replicas", "value": 0},
            {"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}},
            {"op": "remove", "path": "/spec/template/spec/containers/1"}
        ])),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let d = parse(&body);
    assert_eq!(d["metadata"]["annotations"]["a"], json!("b"));
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );

    let (code, _, _) = raw(
        &c,
        "PATCH",
        uri,
        Some("application/json-patch+json"),
        None,
        Some(json!([
            {"op": "test", "path": "/spec/replicas", "value": 7}
        ])),
    )
    .await;
    assert_eq!(code, 422);
    let (code, _, _) = raw(
        &c,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/nope",
        Some("application/merge-patch+json"),
        None,
        Some(json!({})),
    )
    .await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn dry_run_writes_nothing() {
    let sim = start(SimConfig {
        scenario: uyuni_testdata::Scenario {
            timing: fast(),
            ..Default::default()
        },
        ..SimConfig::default()
    })
    .await;
    sim.put(namespace("uyuni")).expect("ns");
    let c = client(&sim).await;
    let rv_before =
        sim.get("v1", "Namespace", None, "uyuni").expect("ns")["metadata"]["resourceVersion"]
            .clone();
    let events_rv = |sim: &SimCluster| {
        sim.objects("v1", "Namespace", None)
            .iter()
            .filter_map(|n| {
                n["metadata"]["resourceVersion"]
                    .as_str()?
                    .parse::<u64>()
                    .ok()
            })
            .max()
    };
    let max_before = events_rv(&sim);
    let (code, _, body) = raw(
        &c,
        "POST",
        "/apis/batch/v1/namespaces/uyuni/jobs?dryRun=All",
        Some("application/json"),
        None,
        Some(job("dry", Some("data-sync"))),
    )
    .await;
    assert_eq!(code, 201);
    assert!(parse(&body)["metadata"]["uid"].is_string());
    let (code, _, _) = raw(
        &c,
        "PATCH",
        "/apis/batch/v1/namespaces/uyuni/jobs/dry2?dryRun=All&fieldManager=m",
        Some("application/apply-patch+yaml"),
        None,
        Some(job("dry2", None)),
    )
    .await;
    assert_eq!(code, 201);
    let (code, _, _) = raw(
        &c,
        "DELETE",
        "/api/v1/namespaces/uyuni",
        Some("application/json"),
        None,
        Some(json!({"dryRun": ["All"]})),
    )
    .await;
    assert_eq!(code, 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(sim.objects("batch/v1", "Job", None).is_empty());
    assert!(sim.objects("v1", "Pod", None).is_empty());
    let ns = sim
        .get("v1", "Namespace", None, "uyuni")
        .expect("still there");
    assert_eq!(ns["metadata"]["resourceVersion"], rv_before);
    assert!(ns["metadata"]["deletionTimestamp"].is_null());
    assert_eq!(events_rv(&sim), max_before);
    assert!(sim.write_requests().is_empty());
    assert!(sim.written().is_empty());
    let log = sim.request_log();
    assert_eq!(log.iter().filter(|r| r.dry_run).count(), 3);
}

#[tokio::test]
async fn label_and_field_selectors() {
    let sim = start(SimConfig::default()).await;
    for (name, labels) in [
        ("a", json!({"tier": "db", "app": "uyuni"})),
        ("b", json!({"tier": "web", "app": "uyuni"})),
        ("c", json!({"tier": "cache"})),
    ] {
        sim.put(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", "labels": labels}}))
            .expect("cm");
    }
    let c = client(&sim).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let names = |lp: ListParams| {
        let api = api.clone();
        async move {
            let mut n: Vec<String> = api
                .list(&lp)
                .await
                .expect("list")
                .items
                .into_iter()
                .filter_map(|c| c.metadata.name)
                .collect();
            n.sort();
            n.retain(|n| n.len() == 1);
            n
        }
    };
    assert_eq!(
        names(ListParams::default().labels("app=uyuni")).await,
        ["a", "b"]
    );
    assert_eq!(
        names(ListParams::default().labels("tier!=db")).await,
        ["b", "c"]
    );
    assert_eq!(
        names(ListParams::default().labels("tier in (db,cache)")).await,
        ["a", "c"]
    );
    assert_eq!(
        names(ListParams::default().labels("tier notin (db,cache),app")).await,
        ["b"]
    );
    assert_eq!(names(ListParams::default().labels("!app")).await, ["c"]);
    assert_eq!(
        names(ListParams::default().fields("metadata.name=b")).await,
        ["b"]
    );
    assert_eq!(
        names(
            ListParams::default()
                .fields("metadata.namespace=default,metadata.name!=b")
                .labels("tier")
        )
        .await,
        ["a", "c"]
    );
    let (_, _, body) = raw(
        &c,
        "GET",
        "/api/v1/configmaps?labelSelector=app",
        None,
        None,
        None,
    )
    .await;
    let list = parse(&body);
    assert_eq!(list["kind"], json!("ConfigMapList"));
    assert!(list["metadata"]["resourceVersion"].is_string());
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn validation_rejects_undecodable_and_invalid_objects() {
    let sim = start(SimConfig::default()).await;
    sim.put(namespace("uyuni")).expect("ns");
    let c = client(&sim).await;
    let uri = "/apis/batch/v1/namespaces/uyuni/jobs";
    let mut bad = job("bad", None);
    bad["spec"]["backoffLimit"] = json!("zero");
    let (code, _, body) = raw(&c, "POST", uri, Some("application/json"), None, Some(bad)).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(parse(&body)["reason"], json!("Invalid"));

    let mut always = job("always", None);
    always["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
    let (code, _, body) = raw(
        &c,
        "POST",
        uri,
        Some("application/json"),
        None,
        Some(always),
    )
    .await;
    assert_eq!(code, 422);
    assert!(body.contains("spec.template.spec.restartPolicy"), "{body}");

    let mut unknown = job("unknown", None);
    unknown["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = json!("Always");
    let (code, _, body) = raw(
        &c,
        "POST",
        &format!("{uri}?fieldValidation=Strict"),
        Some("application/json"),
        None,
        Some(unknown.clone()),
    )
    .await;
    assert_eq!(code, 422);
    assert!(
        body.contains("spec.template.spec.containers[0].imagePullPolicyy"),
        "{body}"
    );
    let (code, headers, _) = raw(
        &c,
        "POST",
        &format!("{uri}?fieldValidation=Warn"),
        Some("application/json"),
        None,
        Some(unknown),
    )
    .await;
    assert_eq!(code, 201);
    assert!(
        headers["warning"]
            .to_str()
            .expect("ascii")
            .contains("imagePullPolicyy")
    );

    let (code, _, _) = raw(&c, "POST", uri, Some("application/json"), None, Some(json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "Bad_Name"}, "spec": {}}))).await;
    assert_eq!(code, 422);

    // The template of a Job is immutable.
    let (code, _, _) = raw(
        &c,
        "POST",
        uri,
        Some("application/json"),
        None,
        Some(job("j", None)),
    )
    .await;
    assert_eq!(code, 201);
    let (code, _, body) = raw(
        &c,
        "PATCH",
        &format!("{uri}/j"),
        Some("application/merge-patch+json"),
        None,
        Some(json!({
            "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "other"}]}}}
        })),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("field is immutable"));
}

#[tokio::test]
async fn status_and_scale_subresources() {
    let sim = start(SimConfig::default()).await;
    sim.put(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "default"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "a", "image": "a"}]}}}
    }))
    .expect("deployment");
    let c = client(&sim).await;
    // A status write ignores the spec; a main write ignores the status.
    let (code, _, body) = raw(
        &c,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/d/status",
        Some("application/merge-patch+json"),
        None,
        Some(json!({
            "spec": {"replicas": 5}, "status": {"observedGeneration": 42}
        })),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let d = parse(&body);
    assert_eq!(d["status"]["observedGeneration"], json!(42));
    assert_eq!(d["spec"]["replicas"], json!(0));
    let (_, _, body) = raw(
        &c,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/d",
        Some("application/merge-patch+json"),
        None,
        Some(json!({
            "status": {"observedGeneration": 7}
        })),
    )
    .await;
    // Ignored: the status stays what the status write (42) or, since, the simulated
    // Deployment controller (1) made it; never the main write's 7.
    let observed = &parse(&body)["status"]["observedGeneration"];
    assert!(
        *observed == json!(42) || *observed == json!(1),
        "{observed}"
    );

    let (code, _, body) = raw(
        &c,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/d/scale",
        None,
        None,
        None,
    )
    .await;
    assert_eq!(code, 200);
    let scale = parse(&body);
    assert_eq!(scale["kind"], json!("Scale"));
    assert_eq!(scale["status"]["selector"], json!("app=d"));
    let (code, _, body) = raw(
        &c,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/d/scale",
        Some("application/merge-patch+json"),
        None,
        Some(json!({"spec": {"replicas": 3}})),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(parse(&body)["spec"]["replicas"], json!(3));
    let stored = sim
        .get("apps/v1", "Deployment", Some("default"), "d")
        .expect("d");
    assert_eq!(stored["spec"]["replicas"], json!(3));
}

#[tokio::test]
async fn deletion_collects_garbage() {
    let sim = start(SimConfig {
        scenario: uyuni_testdata::Scenario {
            // The namespace must still be Terminating when the test writes into it: with fast()'s
            // 5 ms it was sometimes gone already on a loaded machine (404, not 403).
            timing: uyuni_testdata::Timing {
                namespace_delete_ms: 1000,
                ..fast()
            },
            ..Default::default()
        },
        ..SimConfig::default()
    })
    .await;
    sim.put(namespace("uyuni")).expect("ns");
    sim.put(job("j", None)).expect("job");
    sim.put(job("orphaning", None)).expect("job");
    assert!(
        sim.wait_until(WAIT, |s| s.objects("v1", "Pod", Some("uyuni")).len() == 2)
            .await
    );
    let c = client(&sim).await;
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(c.clone(), "uyuni");
    jobs.delete("j", &DeleteParams::background())
        .await
        .expect("deleted");
    jobs.delete("orphaning", &DeleteParams::orphan())
        .await
        .expect("deleted");
    let pods = sim.objects("v1", "Pod", Some("uyuni"));
    assert_eq!(pods.len(), 1);
    assert!(
        pods[0]["metadata"]["name"]
            .as_str()
            .expect("name")
            .starts_with("orphaning-")
    );
    assert!(
        pods[0]["metadata"]["ownerReferences"]
            .as_array()
            .is_none_or(Vec::is_empty)
    );

    // A namespace terminates, refuses new content, then goes with everything in it.
    sim.put(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "uyuni"}})).expect("cm");
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(c.clone());
    let terminating = nss
        .delete("uyuni", &DeleteParams::default())
        .await
        .expect("deleted");
    let ns = terminating.left().expect("the namespace");
    assert_eq!(
        ns.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    let (code, _, _) = raw(
        &c,
        "POST",
        "/api/v1/namespaces/uyuni/configmaps",
        Some("application/json"),
        None,
        Some(json!({"metadata": {"name": "late"}})),
    )
    .await;
    assert_eq!(code, 403);
    assert!(
        sim.wait_until(WAIT, |s| s.get("v1", "Namespace", None, "uyuni").is_none())
            .await
    );
    assert!(sim.objects("v1", "ConfigMap", Some("uyuni")).is_empty());
    assert!(sim.objects("v1", "Pod", Some("uyuni")).is_empty());
}

#[tokio::test]
async fn crd_post_registers_a_new_resource() {
    let sim = start(SimConfig {
        cert_manager: false,
        ..SimConfig::default()
    })
    .await;
    let c = client(&sim).await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let (code, _, body) = raw(
        &c,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some("application/json"),
        None,
        Some(crd),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert!(super::has_condition(&parse(&body), "Established", "True"));
    let (_, _, body) = raw(&c, "GET", "/apis", None, None, None).await;
    assert!(body.contains("example.com/v1"));
    let (_, _, body) = raw(&c, "GET", "/openapi/v3", None, None, None).await;
    assert!(body.contains("apis/example.com/v1"));
    let (code, _, body) = raw(&c, "POST", "/apis/example.com/v1/namespaces/default/widgets", Some("application/json"), None, Some(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}
    })))
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(parse(&body)["metadata"]["generation"], json!(1));
    // Deleting the CRD removes the resource and its objects.
    let (code, _, _) = raw(
        &c,
        "DELETE",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com",
        None,
        None,
        None,
    )
    .await;
    assert_eq!(code, 200);
    let (code, _, _) = raw(
        &c,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets",
        None,
        None,
        None,
    )
    .await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn self_subject_access_reviews_are_allowed_and_not_writes() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim).await;
    let (code, _, body) = raw(&c, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", Some("application/json"), None, Some(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "create", "resource": "jobs", "group": "batch", "namespace": "uyuni"}}
    })))
    .await;
    assert_eq!(code, 201);
    assert_eq!(parse(&body)["status"]["allowed"], json!(true));
    assert!(sim.write_requests().is_empty());
}

#[tokio::test]
async fn self_subject_rules_reviews_allow_everything_or_say_they_are_incomplete() {
    let path = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
    let review = json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": "uyuni"}
    });
    let sim = start(SimConfig::default()).await;
    let c = client(&sim).await;
    let (code, _, body) = raw(
        &c,
        "POST",
        path,
        Some("application/json"),
        None,
        Some(review.clone()),
    )
    .await;
    assert_eq!(code, 201);
    let status = &parse(&body)["status"];
    assert_eq!(status["incomplete"], json!(false));
    assert_eq!(
        status["resourceRules"],
        json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}])
    );
    assert!(sim.write_requests().is_empty());
    // Denials cannot be listed as rules: the answer says it is incomplete and lists none.
    let sim = start(SimConfig {
        denied_access: vec![("create".into(), "jobs".into())],
        ..SimConfig::default()
    })
    .await;
    let c = client(&sim).await;
    let (code, _, body) = raw(
        &c,
        "POST",
        path,
        Some("application/json"),
        None,
        Some(review),
    )
    .await;
    assert_eq!(code, 201);
    let status = &parse(&body)["status"];
    assert_eq!(status["incomplete"], json!(true));
    assert_eq!(status["resourceRules"], json!([]));
}

#[tokio::test]
async fn self_subject_access_reviews_deny_the_configured_pairs_only() {
    let sim = start(SimConfig {
        denied_access: vec![("create".into(), "jobs".into())],
        ..SimConfig::default()
    })
    .await;
    let c = client(&sim).await;
    let review = |verb: &str, resource: &str| {
        json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "group": "batch", "namespace": "uyuni"}}
        })
    };
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let (code, _, body) = raw(
        &c,
        "POST",
        path,
        Some("application/json"),
        None,
        Some(review("create", "jobs")),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(parse(&body)["status"]["allowed"], json!(false));
    let (_, _, body) = raw(
        &c,
        "POST",
        path,
        Some("application/json"),
        None,
        Some(review("get", "jobs")),
    )
    .await;
    assert_eq!(parse(&body)["status"]["allowed"], json!(true));
}

#[tokio::test]
async fn self_subject_access_reviews_tell_a_subresource_from_its_resource() {
    let sim = start(SimConfig {
        denied_access: vec![("get".into(), "pods/log".into())],
        ..SimConfig::default()
    })
    .await;
    let c = client(&sim).await;
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    for (subresource, allowed) in [(Some("log"), false), (None, true)] {
        let mut attributes =
            json!({"verb": "get", "resource": "pods", "group": "", "namespace": "uyuni"});
        if let Some(sub) = subresource {
            attributes["subresource"] = json!(sub);
        }
        let (code, _, body) = raw(
            &c,
            "POST",
            path,
            Some("application/json"),
            None,
            Some(json!({
                "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attributes}
            })),
        )
        .await;
        assert_eq!(code, 201);
        assert_eq!(
            parse(&body)["status"]["allowed"],
            json!(allowed),
            "subresource {subresource:?}"
        );
    }
}

#[tokio::test]
async fn watches_honour_resource_versions_bookmarks_and_timeouts() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim).await;
    let cm = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}});
    let first = sim.put(cm("w1")).expect("cm");
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    sim.put(cm("w2")).expect("cm");
    // From rv: only later events; the timeout ends the stream.
    let started = Instant::now();
    let (code, _, body) = raw(
        &c,
        "GET",
        &format!(
            "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=1"
        ),
        None,
        None,
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert!(started.elapsed() >= Duration::from_millis(900));
    let events: Vec<Value> = body.lines().map(super::parse).collect();
    assert_eq!(events.len(), 1, "{body}");
    assert_eq!(events[0]["type"], json!("ADDED"));
    assert_eq!(events[0]["object"]["metadata"]["name"], json!("w2"));

    // resourceVersion 0: the current objects first.
    let (_, _, body) = raw(&c, "GET", "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0&timeoutSeconds=1&fieldSelector=metadata.name%3Dw1", None, None, None).await;
    let events: Vec<Value> = body.lines().map(super::parse).collect();
    assert_eq!(events.len(), 1);

    // WatchList: ADDED for each object, then the initial-events-end bookmark.
    let (_, _, body) = raw(&c, "GET", "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1", None, None, None).await;
    let events: Vec<Value> = body.lines().map(super::parse).collect();
    let last = events.last().expect("events");
    assert_eq!(last["type"], json!("BOOKMARK"));
    assert_eq!(
        last["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        json!("true")
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == json!("ADDED"))
            .count(),
        2
    );

    // Live events: modifications and deletions arrive while watching.
    let watcher = {
        let c = c.clone();
        let rv = sim
            .get("v1", "ConfigMap", Some("default"), "w2")
            .expect("w2")["metadata"]["resourceVersion"]
            .as_str()
            .expect("rv")
            .to_string();
        tokio::spawn(async move {
            raw(&c, "GET", &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=1"), None, None, None).await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    sim.put(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w1", "namespace": "default"}, "data": {"a": "b"}})).expect("update");
    sim.delete("v1", "ConfigMap", Some("default"), "w2")
        .expect("delete");
    let (_, _, body) = watcher.await.expect("watch task");
    let types: Vec<Value> = body
        .lines()
        .map(|l| super::parse(l)["type"].clone())
        .collect();
    assert_eq!(types, vec![json!("MODIFIED"), json!("DELETED")]);
}

/// A simulator running Job `name` of scenario step `step` as `script`, once its pod runs; and
/// that pod's name.
async fn running_job(
    step: &str,
    script: uyuni_testdata::JobScript,
    name: &str,
) -> (SimCluster, String) {
    let sim = start(SimConfig {
        scenario: uyuni_testdata::Scenario {
            timing: fast(),
            jobs: [(step.to_string(), script)].into(),
            ..Default::default()
        },
        ..SimConfig::default()
    })
    .await;
    sim.put(namespace("uyuni")).expect("ns");
    sim.put(job(name, Some(step))).expect("job");
    assert!(
        sim.wait_until(WAIT, |s| s
            .objects("v1", "Pod", Some("uyuni"))
            .iter()
            .any(|p| p["status"]["phase"] == json!("Running")))
            .await
    );
    let pod = sim.objects("v1", "Pod", Some("uyuni"))[0]["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    (sim, pod)
}

#[tokio::test]
async fn pod_logs_tail_container_and_follow() {
    let script = uyuni_testdata::JobScript::succeed(600, &["one", "two", "three", "four", "five"]);
    let (sim, pod) = running_job("slow", script, "logs").await;
    let c = client(&sim).await;
    // Following: lines arrive over time and the stream ends with the container.
    let started = Instant::now();
    let (code, headers, body) = raw(
        &c,
        "GET",
        &format!("/api/v1/namespaces/uyuni/pods/{pod}/log?follow=true&container=main"),
        None,
        None,
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(headers["content-type"], "text/plain");
    assert_eq!(body, "one\ntwo\nthree\nfour\nfive\n");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    let (_, _, body) = raw(
        &c,
        "GET",
        &format!("/api/v1/namespaces/uyuni/pods/{pod}/log?tailLines=2"),
        None,
        None,
        None,
    )
    .await;
    assert_eq!(body, "four\nfive\n");
    let (code, _, _) = raw(
        &c,
        "GET",
        &format!("/api/v1/namespaces/uyuni/pods/{pod}/log?container=nope"),
        None,
        None,
        None,
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(sim.pod_log("uyuni", &pod, None).expect("log").len(), 5);
}

#[tokio::test]
async fn a_generated_log_is_served_first_and_holds_the_job_until_read() {
    let script = uyuni_testdata::JobScript {
        log_bytes: 250_000,
        ..uyuni_testdata::JobScript::succeed(0, &["the end"])
    };
    let (sim, pod) = running_job("chatty", script, "chatty-1").await;
    // Nobody reads: the container goes on writing (it is not done) for as long as that lasts.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let job_of = |s: &SimCluster| s.get("batch/v1", "Job", Some("uyuni"), "chatty-1");
    assert!(job_of(&sim).expect("job")["status"]["succeeded"].is_null());
    assert!(sim.job_ends().is_empty());
    let c = client(&sim).await;
    let (code, _, body) = raw(
        &c,
        "GET",
        &format!("/api/v1/namespaces/uyuni/pods/{pod}/log?follow=true"),
        None,
        None,
        None,
    )
    .await;
    assert_eq!(code, 200);
    let lines: Vec<&str> = body.lines().collect();
    // 2,500 generated lines of 100 bytes (newline included), numbered, then the script's.
    assert_eq!(
        lines.len(),
        2501,
        "{:?}",
        &lines[lines.len().saturating_sub(3)..]
    );
    assert!(lines[..2500].iter().all(|l| l.len() == 99));
    assert!(lines[0].starts_with("000000000000 ") && lines[2499].starts_with("000000002499 "));
    assert_eq!(lines[2500], "the end");
    // Read to the end: the Job has finished, on the request log's clock.
    assert!(
        sim.wait_until(WAIT, |s| job_of(s)
            .is_some_and(|j| j["status"]["succeeded"] == json!(1)))
            .await
    );
    let ends = sim.job_ends();
    assert_eq!(ends.len(), 1);
    assert_eq!(
        (ends[0].name.as_str(), ends[0].succeeded),
        ("chatty-1", true)
    );
    let log_request = sim
        .request_log()
        .into_iter()
        .rfind(|r| r.resource.as_deref() == Some("pods/log"))
        .expect("the log request is recorded");
    assert!(
        log_request.at_us < ends[0].at_us,
        "{log_request:?} {ends:?}"
    );
    // Generated lines are not stored: the stored log is the script's.
    assert_eq!(
        sim.pod_log("uyuni", &pod, None).expect("log"),
        vec!["the end"]
    );
}

#[tokio::test]
async fn request_log_file_and_written_objects() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log_path = dir.path().join("requests.jsonl");
    let sim = start(SimConfig {
        request_log_file: Some(log_path.clone()),
        dir: Some(dir.path().join("sim")),
        ..SimConfig::default()
    })
    .await;
    assert!(sim.kubeconfig_path().starts_with(dir.path()));
    let c = client(&sim).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    api.patch(
        "x",
        &PatchParams::apply("kubectl-uyuni"),
        &Patch::Apply(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}
        })),
    )
    .await
    .expect("applied");
    api.get("x").await.expect("get");
    let lines: Vec<uyuni_testdata::RequestRecord> = std::fs::read_to_string(&log_path)
        .expect("log file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    assert_eq!(lines, sim.request_log());
    let patch = lines.iter().find(|r| r.method == "PATCH").expect("patch");
    assert!(patch.write && patch.is_successful_write());
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    assert_eq!(patch.verb.as_deref(), Some("patch"));
    assert!(patch.query.contains("fieldManager=kubectl-uyuni"));
    let written = sim.written_objects();
    assert_eq!(written.len(), 1);
    assert_eq!(written[0]["data"]["a"], json!("b"));
    let dump = dir.path().join("dump");
    assert_eq!(sim.dump_written(&dump).expect("dump"), 1);
    assert!(dump.join("0000-configmap-default-x.json").exists());
}

#[tokio::test]
async fn seeded_objects_are_stored_as_given() {
    let sim = start(SimConfig {
        objects: vec![json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "old-sync", "namespace": "uyuni", "annotations": {"kubectl-uyuni.io/step": "data-sync"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}},
            "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
        })],
        ..SimConfig::default()
    })
    .await;
    assert!(sim.get("v1", "Namespace", None, "uyuni").is_some());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let job = sim
        .get("batch/v1", "Job", Some("uyuni"), "old-sync")
        .expect("job");
    assert_eq!(job["status"]["succeeded"], json!(1));
    assert!(
        sim.objects("v1", "Pod", Some("uyuni")).is_empty(),
        "controllers ignore seeds"
    );
}

/// The 422 answer is the Status `apierrors.NewInvalid` builds: the message aggregates every
/// error as `Kind.group "name" is invalid: …`, and `details.causes` has one entry per error
/// with the error type as reason (staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go).
#[tokio::test]
async fn an_invalid_object_is_answered_with_kubernetes_status_and_causes() {
    let sim = start(SimConfig::default()).await;
    sim.put(namespace("uyuni")).expect("ns");
    let c = client(&sim).await;
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "uyuni", "namespace": "uyuni"},
        "spec": {
            "selector": {"matchLabels": {"app": "uyuni"}},
            "template": {
                "metadata": {"labels": {"app": "uyuni"}},
                "spec": {"containers": [{
                    "name": "uyuni", "image": "registry.opensuse.org/uyuni/server:latest",
                    "ports": [{"containerPort": 5556, "name": "jmx"},
                              {"containerPort": 5557, "name": "jmx"}],
                    "volumeMounts": [{"name": "certs", "mountPath": "/etc/pki/tls"}],
                }]},
            },
        },
    });
    for query in ["", "?dryRun=All"] {
        let (code, _, body) = raw(
            &c,
            "POST",
            &format!("/apis/apps/v1/namespaces/uyuni/deployments{query}"),
            Some("application/json"),
            None,
            Some(deployment.clone()),
        )
        .await;
        assert_eq!(code, 422, "{body}");
        let status = parse(&body);
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["status"], "Failure");
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(status["code"], 422);
        assert_eq!(
            status["message"],
            "Deployment.apps \"uyuni\" is invalid: [\
             spec.template.spec.containers[0].ports[1].name: Duplicate value: \"jmx\", \
             spec.template.spec.containers[0].volumeMounts[0].name: Not found: \"certs\"]"
        );
        assert_eq!(
            status["details"],
            json!({
                "name": "uyuni", "group": "apps", "kind": "Deployment",
                "causes": [
                    {"reason": "FieldValueDuplicate", "message": "Duplicate value: \"jmx\"",
                     "field": "spec.template.spec.containers[0].ports[1].name"},
                    {"reason": "FieldValueNotFound", "message": "Not found: \"certs\"",
                     "field": "spec.template.spec.containers[0].volumeMounts[0].name"},
                ],
            })
        );
    }
    assert!(
        sim.get("apps/v1", "Deployment", Some("uyuni"), "uyuni")
            .is_none()
    );
}
