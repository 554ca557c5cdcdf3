//! The JSON Schema of every document `-o json` (and `-o yaml`, the same fields) prints, derived
//! from the types that are serialized: the files under `docs/schema/` are these, and
//! `plugin/tests/output_schemas.rs` checks both that they are current and that what each
//! command prints validates against its schema.

use schemars::{JsonSchema, generate::SchemaSettings};
use serde_json::Value;

/// One document: its file under `docs/schema/`, what prints it, and its schema.
pub struct Document {
    pub file: &'static str,
    pub printed_by: &'static str,
    pub schema: Value,
}

fn schema<T: JsonSchema>(file: &'static str, printed_by: &'static str) -> Document {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Some(object) = schema.as_object_mut() {
        object.insert(
            "$comment".to_owned(),
            Value::String(format!(
                "{printed_by}. Generated from the plugin's types: UPDATE_GOLDEN=1 cargo test -p kubectl-uyuni --test integration -- output_schemas"
            )),
        );
    }
    Document {
        file,
        printed_by,
        schema,
    }
}

/// Every document, in the order docs/output.md lists them.
pub fn documents() -> Vec<Document> {
    vec![
        schema::<crate::version::VersionReport>("version.json", "kubectl uyuni version -o json"),
        schema::<crate::migrate::MigrationResult>(
            "migrate.json",
            "kubectl uyuni migrate … -o json",
        ),
        schema::<crate::dry_run::DryRunDocument<'static>>(
            "migrate-dry-run.json",
            "kubectl uyuni migrate … --dry-run -o json",
        ),
        schema::<crate::install::InstallResult>("install.json", "kubectl uyuni install … -o json"),
        schema::<crate::install::InstallPreview<'static>>(
            "install-dry-run.json",
            "kubectl uyuni install … --dry-run -o json",
        ),
        schema::<crate::upgrade::UpgradeResult>("upgrade.json", "kubectl uyuni upgrade … -o json"),
        schema::<crate::upgrade::UpgradePreview<'static>>(
            "upgrade-dry-run.json",
            "kubectl uyuni upgrade … --dry-run -o json",
        ),
        schema::<crate::uninstall::UninstallResult>(
            "uninstall.json",
            "kubectl uyuni uninstall … -o json",
        ),
        schema::<crate::uninstall::UninstallPreview<'static>>(
            "uninstall-dry-run.json",
            "kubectl uyuni uninstall … --dry-run -o json",
        ),
        schema::<crate::lifecycle::LifecycleResult>(
            "lifecycle.json",
            "kubectl uyuni stop|start|restart … -o json",
        ),
        schema::<uyuni_core::render::PlanDocument>(
            "lifecycle-dry-run.json",
            "kubectl uyuni stop|start|restart … --dry-run -o json",
        ),
        schema::<uyuni_core::status::Status>(
            "status.json",
            "kubectl uyuni status -o json (with -w, one document per change)",
        ),
        schema::<Vec<uyuni_core::status::StepLogs>>(
            "logs.json",
            "kubectl uyuni logs -o json (without STEP: the steps and their Jobs)",
        ),
        schema::<crate::report::ReportResult>("report.json", "kubectl uyuni report -o json"),
    ]
}
