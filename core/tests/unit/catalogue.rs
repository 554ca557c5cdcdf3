use uyuni_core::catalogue::products;

#[test]
fn each_product_names_its_secret() {
    assert_eq!(
        products::secret(products::MIGRATION_DATA),
        Some("uyuni-migration-data")
    );
    assert_eq!(products::secret(products::CA_KEY), Some("uyuni-ca"));
    assert_eq!(products::secret("configmap/x"), None);
    assert_eq!(products::secret("secret/"), None);
}
