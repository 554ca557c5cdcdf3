use kubectl_uyuni::status::human;
use uyuni_core::observed::Observed;
use uyuni_core::status::report;

#[test]
fn nothing_installed_says_so_and_how_to_install_or_migrate() {
    let text = human(&report("uyuni", &Observed::default(), &[]));
    assert!(
        text.starts_with("Nothing of kubectl-uyuni's is in namespace uyuni"),
        "{text}"
    );
    assert!(
        text.contains("kubectl uyuni -n uyuni install FQDN")
            && text.contains("kubectl uyuni -n uyuni migrate SOURCE_FQDN"),
        "{text}"
    );
}
