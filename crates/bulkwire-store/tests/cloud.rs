//! The object store on Azure Blob Storage (Azurite) and Google Cloud
//! Storage (fake-gcs-server), both started by bulkwire-testenv: the same
//! conformance checks the S3 store passes on SeaweedFS (atomic uploads with
//! several parts, ranged reads, resumable uploads continued by a second
//! writer, the janitor). A test that cannot start its emulator fails.

use bulkwire_store::{
    conformance, new_id, AzureConfig, BlobStore, GcsConfig, ObjectBlobStore, SqliteMeta,
};
use bulkwire_testenv::{must, shared_azurite, shared_fake_gcs, Emulator};
use std::sync::Arc;

/// Azure's and GCS's parts here: 5 MiB, a multiple of GCS's 256 KiB.
const PART: usize = 5 << 20;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn new_bucket(e: &Emulator) -> String {
    let name = format!("bw-{}", &new_id()[..16]);
    must(e.create_bucket(&name));
    name
}

fn azure(e: &Emulator, container: &str, prefix: &str) -> ObjectBlobStore {
    // object_store reads Azurite's address from the environment only.
    for (k, v) in e.vars() {
        if k == "AZURITE_BLOB_STORAGE_URL" {
            std::env::set_var(k, v);
        }
    }
    let mut c = AzureConfig::from_url(&format!("az://{container}/{prefix}")).unwrap();
    c.part_size = PART;
    ObjectBlobStore::azure(c.with_vars(e.vars().into_iter())).unwrap()
}

fn gcs(e: &Emulator, bucket: &str, prefix: &str) -> ObjectBlobStore {
    let mut c = GcsConfig::from_url(&format!("gs://{bucket}/{prefix}")).unwrap();
    c.part_size = PART;
    ObjectBlobStore::gcs(c.with_vars(e.vars().into_iter())).unwrap()
}

async fn conformance_on(s: ObjectBlobStore) {
    let s: Arc<dyn BlobStore> = Arc::new(s);
    assert_eq!(s.upload_memory(), 2 * PART as u64);
    conformance::blob_store(s.clone(), 12 << 20).await;
    conformance::spools(s.clone(), PART).await;
    conformance::spool_notes(s.clone()).await;
    let d = tempfile::tempdir().unwrap();
    let m = SqliteMeta::open(&d.path().join("m.sqlite")).unwrap();
    conformance::janitor(Arc::new(m), s).await;
}

#[test]
fn azure_blob_storage_passes_the_conformance_checks() {
    let e = must(shared_azurite());
    let container = new_bucket(e);
    rt().block_on(async {
        let s = azure(e, &container, "c/p");
        let about = s.describe().await.unwrap();
        assert_eq!(
            about,
            format!(
                "Azure container {container} at {} (prefix c/p/), part size 5 MiB, credentials: \
                 Azurite's well-known account key (emulator), read/write probe ok",
                e.endpoint()
            )
        );
        assert_eq!(s.backend(), "azure");
        conformance_on(s).await;
    });
}

#[test]
fn google_cloud_storage_passes_the_conformance_checks() {
    let e = must(shared_fake_gcs());
    let bucket = new_bucket(e);
    rt().block_on(async {
        let s = gcs(e, &bucket, "c/p");
        let about = s.describe().await.unwrap();
        assert_eq!(
            about,
            format!(
                "GCS bucket {bucket} at {} (prefix c/p/), part size 5 MiB, credentials: \
                 a service-account key (GOOGLE_SERVICE_ACCOUNT_KEY), read/write probe ok",
                e.endpoint()
            )
        );
        assert_eq!(s.backend(), "gcs");
        conformance_on(s).await;
    });
}
