//! The Kubernetes objects the tool reads and writes, as plain k8s-openapi data.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, LimitRange, Namespace, PersistentVolumeClaim, ResourceQuota, Secret, Service,
    ServiceAccount,
};
use k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

/// The kinds of object the tool handles. Order is the order objects are listed in output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Kind {
    Namespace,
    Secret,
    ConfigMap,
    PersistentVolumeClaim,
    ServiceAccount,
    Role,
    RoleBinding,
    Job,
    Deployment,
    Service,
    Ingress,
    /// The database's NetworkPolicy (`--network-policy`).
    NetworkPolicy,
    /// Read only, every one of the namespace ([`crate::observed::Observation::every`]): what
    /// admission lets a new claim take ([`crate::quota`]).
    ResourceQuota,
    LimitRange,
    /// A custom resource of a known CRD.
    Custom(CustomKind),
}

/// The custom resources the tool writes, with what it takes to address them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum CustomKind {
    /// cert-manager `Issuer`.
    Issuer,
    /// cert-manager `Certificate`.
    Certificate,
    /// Traefik `Middleware` (traefik.io: Traefik v3; traefik.containo.us is gone, D24).
    Middleware,
    IngressRouteTcp,
    IngressRouteUdp,
    /// k3s/RKE2 `HelmChartConfig`, in `kube-system`.
    HelmChartConfig,
}

impl CustomKind {
    pub fn api_version(self) -> &'static str {
        match self {
            CustomKind::Issuer | CustomKind::Certificate => "cert-manager.io/v1",
            CustomKind::Middleware | CustomKind::IngressRouteTcp | CustomKind::IngressRouteUdp => {
                "traefik.io/v1alpha1"
            }
            CustomKind::HelmChartConfig => "helm.cattle.io/v1",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            CustomKind::Issuer => "Issuer",
            CustomKind::Certificate => "Certificate",
            CustomKind::Middleware => "Middleware",
            CustomKind::IngressRouteTcp => "IngressRouteTCP",
            CustomKind::IngressRouteUdp => "IngressRouteUDP",
            CustomKind::HelmChartConfig => "HelmChartConfig",
        }
    }

    /// The resource name in the API path.
    pub fn plural(self) -> &'static str {
        match self {
            CustomKind::Issuer => "issuers",
            CustomKind::Certificate => "certificates",
            CustomKind::Middleware => "middlewares",
            CustomKind::IngressRouteTcp => "ingressroutetcps",
            CustomKind::IngressRouteUdp => "ingressrouteudps",
            CustomKind::HelmChartConfig => "helmchartconfigs",
        }
    }

    /// The namespace objects of this kind live in, when it is not the installation's.
    pub fn fixed_namespace(self) -> Option<&'static str> {
        match self {
            CustomKind::HelmChartConfig => Some("kube-system"),
            _ => None,
        }
    }

    /// The CustomResourceDefinition that serves it.
    pub fn crd(self) -> String {
        let group = self.api_version().split('/').next().unwrap_or_default();
        format!("{}.{group}", self.plural())
    }
}

/// A custom resource as plain data: its kind (apiVersion, kind, plural), metadata, and the rest
/// of the object as JSON. Serializes as the Kubernetes object.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomObject {
    pub kind: CustomKind,
    pub metadata: ObjectMeta,
    pub spec: serde_json::Value,
    /// Only on observed objects.
    pub status: Option<serde_json::Value>,
}

impl Serialize for CustomObject {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("apiVersion", self.kind.api_version())?;
        map.serialize_entry("kind", self.kind.kind())?;
        map.serialize_entry("metadata", &self.metadata)?;
        map.serialize_entry("spec", &self.spec)?;
        if let Some(status) = &self.status {
            map.serialize_entry("status", status)?;
        }
        map.end()
    }
}

impl Kind {
    pub const ALL: [Kind; 20] = [
        Kind::Namespace,
        Kind::Secret,
        Kind::ConfigMap,
        Kind::PersistentVolumeClaim,
        Kind::ServiceAccount,
        Kind::Role,
        Kind::RoleBinding,
        Kind::Job,
        Kind::Deployment,
        Kind::Service,
        Kind::Ingress,
        Kind::NetworkPolicy,
        Kind::ResourceQuota,
        Kind::LimitRange,
        Kind::Custom(CustomKind::Issuer),
        Kind::Custom(CustomKind::Certificate),
        Kind::Custom(CustomKind::Middleware),
        Kind::Custom(CustomKind::IngressRouteTcp),
        Kind::Custom(CustomKind::IngressRouteUdp),
        Kind::Custom(CustomKind::HelmChartConfig),
    ];

    /// The `kind` field.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Namespace => "Namespace",
            Kind::Secret => "Secret",
            Kind::ConfigMap => "ConfigMap",
            Kind::PersistentVolumeClaim => "PersistentVolumeClaim",
            Kind::ServiceAccount => "ServiceAccount",
            Kind::Role => "Role",
            Kind::RoleBinding => "RoleBinding",
            Kind::Job => "Job",
            Kind::Deployment => "Deployment",
            Kind::Service => "Service",
            Kind::Ingress => "Ingress",
            Kind::NetworkPolicy => "NetworkPolicy",
            Kind::ResourceQuota => "ResourceQuota",
            Kind::LimitRange => "LimitRange",
            Kind::Custom(c) => c.kind(),
        }
    }

    /// The resource name kubectl users type (`kubectl get <resource>`).
    pub fn resource(self) -> &'static str {
        match self {
            Kind::Namespace => "namespace",
            Kind::Secret => "secret",
            Kind::ConfigMap => "configmap",
            Kind::PersistentVolumeClaim => "persistentvolumeclaim",
            Kind::ServiceAccount => "serviceaccount",
            Kind::Role => "role",
            Kind::RoleBinding => "rolebinding",
            Kind::Job => "job",
            Kind::Deployment => "deployment",
            Kind::Service => "service",
            Kind::Ingress => "ingress",
            Kind::NetworkPolicy => "networkpolicy",
            Kind::ResourceQuota => "resourcequota",
            Kind::LimitRange => "limitrange",
            Kind::Custom(CustomKind::Issuer) => "issuer",
            Kind::Custom(CustomKind::Certificate) => "certificate",
            Kind::Custom(CustomKind::Middleware) => "middlewares.traefik.io",
            Kind::Custom(CustomKind::IngressRouteTcp) => "ingressroutetcps.traefik.io",
            Kind::Custom(CustomKind::IngressRouteUdp) => "ingressrouteudps.traefik.io",
            Kind::Custom(CustomKind::HelmChartConfig) => "helmchartconfigs.helm.cattle.io",
        }
    }

    pub fn namespaced(self) -> bool {
        !matches!(self, Kind::Namespace)
    }
}

/// A named object of a kind, in the namespace of the operation (cluster-scoped for namespaces).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ObjectRef {
    pub kind: Kind,
    pub name: String,
}

impl ObjectRef {
    pub fn new(kind: Kind, name: impl Into<String>) -> Self {
        ObjectRef {
            kind,
            name: name.into(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind.resource(), self.name)
    }
}

/// One object, typed. Serializes as the Kubernetes object itself (with apiVersion and kind).
// Objects travel boxed inside plan actions; the size difference between variants does not
// matter for a handful of objects per run.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Object {
    Namespace(Namespace),
    Secret(Secret),
    ConfigMap(ConfigMap),
    PersistentVolumeClaim(PersistentVolumeClaim),
    ServiceAccount(ServiceAccount),
    Role(Role),
    RoleBinding(RoleBinding),
    Job(Job),
    Deployment(Deployment),
    Service(Service),
    Ingress(Ingress),
    NetworkPolicy(NetworkPolicy),
    ResourceQuota(ResourceQuota),
    LimitRange(LimitRange),
    Custom(CustomObject),
}

impl Object {
    pub fn kind(&self) -> Kind {
        match self {
            Object::Namespace(_) => Kind::Namespace,
            Object::Secret(_) => Kind::Secret,
            Object::ConfigMap(_) => Kind::ConfigMap,
            Object::PersistentVolumeClaim(_) => Kind::PersistentVolumeClaim,
            Object::ServiceAccount(_) => Kind::ServiceAccount,
            Object::Role(_) => Kind::Role,
            Object::RoleBinding(_) => Kind::RoleBinding,
            Object::Job(_) => Kind::Job,
            Object::Deployment(_) => Kind::Deployment,
            Object::Service(_) => Kind::Service,
            Object::Ingress(_) => Kind::Ingress,
            Object::NetworkPolicy(_) => Kind::NetworkPolicy,
            Object::ResourceQuota(_) => Kind::ResourceQuota,
            Object::LimitRange(_) => Kind::LimitRange,
            Object::Custom(o) => Kind::Custom(o.kind),
        }
    }

    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            Object::Namespace(o) => &o.metadata,
            Object::Secret(o) => &o.metadata,
            Object::ConfigMap(o) => &o.metadata,
            Object::PersistentVolumeClaim(o) => &o.metadata,
            Object::ServiceAccount(o) => &o.metadata,
            Object::Role(o) => &o.metadata,
            Object::RoleBinding(o) => &o.metadata,
            Object::Job(o) => &o.metadata,
            Object::Deployment(o) => &o.metadata,
            Object::Service(o) => &o.metadata,
            Object::Ingress(o) => &o.metadata,
            Object::NetworkPolicy(o) => &o.metadata,
            Object::ResourceQuota(o) => &o.metadata,
            Object::LimitRange(o) => &o.metadata,
            Object::Custom(o) => &o.metadata,
        }
    }

    pub fn name(&self) -> &str {
        self.metadata().name.as_deref().unwrap_or_default()
    }

    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(self.kind(), self.name())
    }

    /// The object as JSON. k8s-openapi types always serialize, so this is total.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}
