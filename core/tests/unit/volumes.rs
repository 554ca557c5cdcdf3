use uyuni_core::volumes::{
    CATALOGUE, DATABASE_VOLUME, MIGRATION_VOLUME, SIZE_FLAGS, VolumeRole, find,
};

#[test]
fn names_are_unique_and_valid_claim_names() {
    let mut names: Vec<_> = CATALOGUE.iter().map(|v| v.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), CATALOGUE.len());
    for name in names {
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
    }
}

#[test]
fn database_and_migration_volumes_are_in_the_catalogue() {
    assert_eq!(
        find(DATABASE_VOLUME).map(|v| v.role),
        Some(VolumeRole::Database)
    );
    assert_eq!(
        find(MIGRATION_VOLUME).map(|v| v.role),
        Some(VolumeRole::Migration)
    );
    assert!(find("ca-cert").is_none() && find("ca-certs").is_none());
    for (_, claim) in SIZE_FLAGS {
        assert!(find(claim).is_some(), "{claim}");
    }
}
