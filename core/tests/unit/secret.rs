use uyuni_core::secret::SecretString;

#[test]
fn debug_and_serialize_hide_the_value() {
    let s = SecretString::new("hunter2");
    assert_eq!(format!("{s:?}"), "***");
    assert_eq!(serde_json::to_string(&s).expect("serializes"), "\"***\"");
    assert_eq!(s.expose(), "hunter2");
}
