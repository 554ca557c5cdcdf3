//! Asks the API server, before the first write, whether the user may make each request the
//! migration makes (the core lists them, reads and writes): one `SelfSubjectAccessReview` per permission (`authorization.k8s.io/v1`;
//! <https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access>).
//! The verdict is the core's ([`uyuni_core::access::check`]); this only asks.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use uyuni_core::access::Access;

/// Whether the user may do each of `needed`, in the same order. A review is a create that
/// stores nothing; every authenticated user may make one (the `system:basic-user`
/// ClusterRole grants it). An error is the caller's to judge: a cluster that cannot answer
/// decides nothing.
pub async fn review(
    client: &kube::Client,
    needed: &[Access],
) -> Result<Vec<(Access, bool)>, kube::Error> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut out = Vec::with_capacity(needed.len());
    for access in needed {
        let request = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(access.verb.clone()),
                    group: Some(access.group.clone()),
                    resource: Some(access.resource.clone()),
                    subresource: access.subresource.clone(),
                    namespace: access.namespace.clone(),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let answer = api.create(&PostParams::default(), &request).await?;
        let allowed = answer.status.is_some_and(|s| s.allowed);
        out.push((access.clone(), allowed));
    }
    Ok(out)
}
