//! The Kubernetes objects the tool reads and writes, as plain k8s-openapi data.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, PersistentVolumeClaim, Secret, ServiceAccount,
};
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
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Namespace,
        Kind::Secret,
        Kind::ConfigMap,
        Kind::PersistentVolumeClaim,
        Kind::ServiceAccount,
        Kind::Role,
        Kind::RoleBinding,
        Kind::Job,
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
