use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::json;
use uyuni_testdata::protobuf::decode;

fn field(n: u64, b: &[u8]) -> Vec<u8> {
    let mut out = vec![((n << 3) | 2) as u8, b.len() as u8];
    out.extend_from_slice(b);
    out
}

#[test]
fn decodes_a_secret() {
    let meta = [field(1, b"s"), field(3, b"uyuni")].concat();
    let entry = [field(1, b"k"), field(2, b"v\x00")].concat();
    let raw = [field(1, &meta), field(2, &entry), field(3, b"Opaque")].concat();
    let type_meta = [field(1, b"v1"), field(2, b"Secret")].concat();
    let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &raw)].concat();
    assert_eq!(
        decode(&body),
        Some(json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "s", "namespace": "uyuni"},
            "data": {"k": B64.encode(b"v\x00")},
        }))
    );
}

#[test]
fn decodes_a_self_subject_access_review() {
    let attributes = [
        field(1, b"uyuni"),
        field(2, b"create"),
        field(3, b"batch"),
        field(5, b"jobs"),
    ]
    .concat();
    let raw = [field(1, &[]), field(2, &field(1, &attributes))].concat();
    let type_meta = [
        field(1, b"authorization.k8s.io/v1"),
        field(2, b"SelfSubjectAccessReview"),
    ]
    .concat();
    let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &raw)].concat();
    assert_eq!(
        decode(&body),
        Some(json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "metadata": {},
            "spec": {"resourceAttributes": {
                "namespace": "uyuni", "verb": "create", "group": "batch", "resource": "jobs",
            }},
        }))
    );
}
