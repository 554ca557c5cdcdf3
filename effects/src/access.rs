//! Asks the API server, before the first write, whether the user may make each request the
//! migration makes (the core lists them, reads and writes): what one `SelfSubjectRulesReview`
//! per namespace shows allowed, and one `SelfSubjectAccessReview` for each other permission
//! (`authorization.k8s.io/v1`;
//! <https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access>).
//! The verdict is the core's ([`uyuni_core::access::check`]); this only asks.

use std::collections::BTreeMap;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, ResourceRule, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    SelfSubjectRulesReview, SelfSubjectRulesReviewSpec,
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
    // What the rules of each namespace allow needs no review of its own.
    let mut namespaces: Vec<&str> = needed
        .iter()
        .filter_map(|a| a.namespace.as_deref())
        .collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    let mut rules: BTreeMap<&str, Vec<ResourceRule>> = BTreeMap::new();
    for ns in namespaces {
        if let Some(allowed) = rules_in(client, ns).await {
            rules.insert(ns, allowed);
        }
    }
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    // The rest are asked one review each, several at a time: each is a round trip, and a
    // remote API server makes a few dozen of them in a row cost seconds. In order, as the
    // caller reads them.
    futures::stream::iter(needed)
        .map(|access| {
            let api = api.clone();
            let by_rules = access
                .namespace
                .as_deref()
                .and_then(|ns| rules.get(ns))
                .is_some_and(|r| r.iter().any(|rule| allows(rule, access)));
            async move {
                if by_rules {
                    return Ok((access.clone(), true));
                }
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
                let post = PostParams::default();
                let answer = crate::retry::quietly(|| api.create(&post, &request)).await?;
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

/// The rules that allow this user requests in `ns` (one `SelfSubjectRulesReview`), as far as
/// the server can list them. Only an allow is taken from them: a permission they do not show
/// is asked with its own review, since the list may be incomplete (an authorizer that cannot
/// enumerate its rules; `status.incomplete`), and the review is authoritative. `None` when the
/// server does not answer one.
async fn rules_in(client: &kube::Client, ns: &str) -> Option<Vec<ResourceRule>> {
    let api: Api<SelfSubjectRulesReview> = Api::all(client.clone());
    let request = SelfSubjectRulesReview {
        spec: SelfSubjectRulesReviewSpec {
            namespace: Some(ns.to_owned()),
        },
        ..SelfSubjectRulesReview::default()
    };
    let post = PostParams::default();
    match crate::retry::quietly(|| api.create(&post, &request)).await {
        Ok(answer) => answer.status.map(|s| s.resource_rules),
        Err(err) => {
            tracing::debug!(namespace = ns, error = %err, "no rules review; asking each permission");
            None
        }
    }
}

/// Whether `rule` allows `access`: RBAC's matching, as the core decides it for the rules `rbac`
/// prints ([`uyuni_core::rbac::grants`]).
#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub fn allows(rule: &ResourceRule, access: &Access) -> bool {
    uyuni_core::rbac::grants(
        &rule.verbs,
        rule.api_groups.as_deref(),
        rule.resources.as_deref(),
        rule.resource_names.as_deref(),
        access,
    )
}
