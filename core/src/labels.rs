//! The one label and annotation scheme of every object the tool writes.
//!
//! `uninstall` and `status` find objects by these labels, so every builder takes its labels from
//! [`labels`] and nothing else.

use std::collections::BTreeMap;

pub const PART_OF: &str = "app.kubernetes.io/part-of";
pub const COMPONENT: &str = "app.kubernetes.io/component";
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const PART_OF_VALUE: &str = "uyuni";
pub const MANAGED_BY_VALUE: &str = "kubectl-uyuni";

/// The field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "kubectl-uyuni";

/// Label on Jobs naming the step that runs them, so Jobs of one step can be listed by selector.
pub const STEP_LABEL: &str = "kubectl-uyuni.io/step";
/// Annotation on Jobs: the step id (same as the label; annotations survive label edits).
pub const STEP_ANNOTATION: &str = "kubectl-uyuni.io/step";
/// Annotation on Jobs: the one-line human description of the step.
pub const DESCRIPTION_ANNOTATION: &str = "kubectl-uyuni.io/description";
/// Annotation on Jobs: hash of the Job's spec, so a changed spec gets a new Job.
pub const SPEC_HASH_ANNOTATION: &str = "kubectl-uyuni.io/spec-hash";
/// Annotation on data-sync Jobs: `prepare` or `final`.
pub const SYNC_MODE_ANNOTATION: &str = "kubectl-uyuni.io/sync-mode";
/// Annotation on data-sync Jobs: the source server they copy from (its FQDN as given), so that
/// a run naming another source is refused before it mixes two servers' data in one set of
/// volumes.
pub const SOURCE_ANNOTATION: &str = "kubectl-uyuni.io/source";
/// Annotation on Jobs: what the Job writes besides its status (`catalogue::products`).
pub const PRODUCES_ANNOTATION: &str = "kubectl-uyuni.io/produces";
/// An image inspection Job's report (`key=value` lines, [`crate::inspect`]), copied by the run
/// from its pod's termination message onto the Job, so that it outlives the pod's status.
pub const INSPECTION_ANNOTATION: &str = "kubectl-uyuni.io/inspection";
/// Annotation on Jobs: the id of the run (invocation) that created them.
pub const RUN_ANNOTATION: &str = "kubectl-uyuni.io/run";
/// On a TLS Secret written from certificate files (`--ssl-*` or found on the source), not
/// issued by cert-manager: a later run without the files keeps it.
pub const THIRD_PARTY_ANNOTATION: &str = "kubectl-uyuni.io/third-party-certificate";

/// Annotation on Deployments `db` and `uyuni`: the data-sync Job whose data they were made to
/// run on. Once one of them exists for a sync, the database's data is the server's: the
/// planner never runs a data step on it again (`plan::phase::taken_over`).
pub const DATA_SYNC_ANNOTATION: &str = "kubectl-uyuni.io/data-sync";

/// Annotation on Deployments `db` and `uyuni` of a server this tool installed (value
/// [`ORIGIN_INSTALL`]): its data was set up by the images' first start, never synced.
pub const ORIGIN_ANNOTATION: &str = "kubectl-uyuni.io/origin";
pub const ORIGIN_INSTALL: &str = "install";

/// Annotation on the claims an install creates: the FQDN the server on their data is set up
/// as. The image sets the server up under its name at the first start and keeps that name
/// (it does not rename itself), so a later `install --reuse-volumes` on these claims, after
/// an uninstall took the Deployment that also said so, must use the same name.
pub const SERVER_NAME_ANNOTATION: &str = "kubectl-uyuni.io/server-name";

/// The pod template annotation `kubectl rollout restart` sets: a new value rolls every pod out
/// again (kubernetes `staging/src/k8s.io/kubectl/pkg/polymorphichelpers/objectrestarter.go`).
pub const RESTARTED_AT_ANNOTATION: &str = "kubectl.kubernetes.io/restartedAt";

/// Annotation on the ingress controller's HelmChartConfig in `kube-system`: the namespace of
/// the server it was written for. `uninstall` deletes it only for that namespace's server
/// (another server of the cluster may route through it).
pub const FOR_NAMESPACE_ANNOTATION: &str = "kubectl-uyuni.io/for-namespace";

/// Selector matching everything the tool created.
pub const MANAGED_SELECTOR: &str =
    "app.kubernetes.io/part-of=uyuni,app.kubernetes.io/managed-by=kubectl-uyuni";

/// Selector matching every object of an Uyuni installation, ours or the official chart's (which
/// does not set `managed-by=kubectl-uyuni`): what `version` reports images of.
pub const PART_OF_SELECTOR: &str = "app.kubernetes.io/part-of=uyuni";

/// Labels for an object of the given component.
pub fn labels(component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (PART_OF.to_owned(), PART_OF_VALUE.to_owned()),
        (COMPONENT.to_owned(), component.to_owned()),
        (MANAGED_BY.to_owned(), MANAGED_BY_VALUE.to_owned()),
    ])
}

/// Whether an equality-based label selector (`a=b,c==d`, the form of [`MANAGED_SELECTOR`])
/// selects an object labelled `labels`. Any other form (`!=`, `in`, `exists`) is not understood
/// and selects nothing: a caller that cannot tell treats the object as not selected.
pub fn selects(selector: &str, labels: Option<&BTreeMap<String, String>>) -> bool {
    selector.split(',').all(|term| {
        let term = term.trim();
        let Some((key, value)) = term.split_once('=') else {
            return false;
        };
        let (key, value) = (key.trim(), value.trim_start_matches('=').trim());
        !key.is_empty()
            && !key.ends_with('!')
            && labels.is_some_and(|l| l.get(key).is_some_and(|v| v == value))
    })
}
