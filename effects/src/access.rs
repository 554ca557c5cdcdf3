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
    use futures::{StreamExt, TryStreamExt};
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    // Asked several at a time: each is a round trip, and a remote API server makes a few dozen
    // of them in a row cost seconds. In order, as the caller reads them.
    futures::stream::iter(needed)
        .map(|access| {
            let api = api.clone();
            async move {
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
                Ok((access.clone(), allowed))
            }
        })
        .buffered(REVIEWS_AT_ONCE)
        .try_collect()
        .await
}

/// How many access reviews are in flight at once: client-go's default QPS burst is 10.
const REVIEWS_AT_ONCE: usize = 10;
