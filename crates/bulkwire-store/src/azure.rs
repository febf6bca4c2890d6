//! Azure Blob Storage (`az://CONTAINER/PREFIX`) through `object_store`'s
//! Azure client, which also brings Azure's credential chain: an account
//! key (`AZURE_STORAGE_ACCOUNT_KEY`), a SAS (`AZURE_STORAGE_SAS_KEY`), a
//! service principal, workload identity (`AZURE_FEDERATED_TOKEN_FILE`) or
//! managed identity (the instance metadata endpoint, `IDENTITY_ENDPOINT`
//! or `AZURE_MSI_ENDPOINT` moving it); `AZURE_STORAGE_USE_EMULATOR=true`
//! with `AZURITE_BLOB_STORAGE_URL` for Azurite.
//!
//! How an upload maps onto blocks: each part is a block staged with `Put
//! Block` under a random block id (the "multipart upload" has no id of its
//! own: staged blocks belong to the blob name); `Put Block List` with the
//! parts' ids, in order, makes the blob visible at once, as S3's
//! completion does. Blocks nobody commits are dropped by the service after
//! seven days: there is no abort, so the janitor's abort deletes the blob
//! only. A resumable upload saves the block ids like S3's ETags, so any
//! node can commit the list. Azure takes 50,000 blocks of up to 4,000 MiB.

use crate::gcs::split_url;
use crate::s3::{invalid, Clients, Cloud, Common, ObjectBlobStore};
use object_store::azure::{MicrosoftAzure, MicrosoftAzureBuilder};
use std::io;
use std::sync::Arc;
use std::time::Duration;

/// `az://CONTAINER/PREFIX` and how to reach it.
#[derive(Debug, Clone)]
pub struct AzureConfig {
    pub container: String,
    pub prefix: String,
    pub part_size: usize,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub retry_timeout: Duration,
    /// Variables (`AZURE_*`, `AZURITE_*`) for `object_store`'s builder.
    pub vars: Vec<(String, String)>,
}

impl AzureConfig {
    /// Azure's most blocks in one blob.
    pub const MAX_BLOCKS: usize = 50_000;

    pub fn from_url(url: &str) -> io::Result<AzureConfig> {
        let (container, prefix) = split_url(url, "az")?;
        Ok(AzureConfig {
            container,
            prefix,
            part_size: crate::S3Config::DEFAULT_PART_SIZE,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            retry_timeout: Duration::from_secs(30),
            vars: Vec::new(),
        })
    }

    /// Takes the `AZURE_*` variables `object_store` reads.
    pub fn with_vars(mut self, vars: impl Iterator<Item = (String, String)>) -> AzureConfig {
        self.vars = vars
            .filter(|(k, _)| k.starts_with("AZURE_") || k == "AZURITE_BLOB_STORAGE_URL")
            .collect();
        self
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// What `--check` says of the credentials (never the key itself).
    fn credentials(&self) -> String {
        let emulator = self
            .var("AZURE_STORAGE_USE_EMULATOR")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let named = [
            ("AZURE_STORAGE_ACCOUNT_KEY", "an account key"),
            ("AZURE_STORAGE_SAS_KEY", "a SAS"),
            ("AZURE_CLIENT_SECRET", "a service principal's secret"),
            ("AZURE_FEDERATED_TOKEN_FILE", "workload identity"),
        ];
        let found = named.iter().find(|(k, _)| self.var(k).is_some());
        match (emulator, found) {
            (true, _) => "Azurite's well-known account key (emulator)".into(),
            (_, Some((k, what))) => format!("{what} ({k})"),
            _ => "managed identity (the instance metadata endpoint)".into(),
        }
    }
}

const AZURE: Cloud = Cloud {
    name: "Azure",
    backend: "azure",
    max_parts: AzureConfig::MAX_BLOCKS,
    // A SAS overrides the answer's headers with `rsct`, `rscd` and
    // `rscc`, signed in its string-to-sign, but `object_store`'s Azure
    // signer signs none of them (its `signed_url_opts` refuses any extra
    // parameter), and one appended after signing breaks the signature.
    signs_answers: false,
};

impl ObjectBlobStore {
    /// Azure Blob Storage; sends no request.
    pub fn azure(cfg: AzureConfig) -> io::Result<ObjectBlobStore> {
        if cfg.part_size == 0 || cfg.part_size > 4000 << 20 {
            return Err(invalid(format!(
                "Azure part_size {} must be between 1 byte and Azure's 4,000 MiB block",
                cfg.part_size
            )));
        }
        crate::s3::install_tls_provider();
        let build = |timeout: Option<Duration>| -> io::Result<MicrosoftAzure> {
            let o = crate::s3::client_options(cfg.connect_timeout, timeout);
            let mut b = MicrosoftAzureBuilder::new();
            for (k, v) in &cfg.vars {
                if let Ok(key) = k.to_ascii_lowercase().parse() {
                    b = b.with_config(key, v);
                }
            }
            let retry = crate::s3::retry_config(cfg.retry_timeout);
            b.with_container_name(&cfg.container)
                .with_client_options(o)
                .with_retry(retry)
                .build()
                .map_err(|e| invalid(format!("Azure client for container {}: {e}", cfg.container)))
        };
        let store = build(Some(cfg.timeout))?;
        let reader = build(None)?;
        let clients = Clients {
            store: Arc::new(store.clone()),
            reader: Arc::new(reader),
            parts: Arc::new(store.clone()),
            pager: None,
            signer: Arc::new(store),
            put: None,
        };
        let common = Common {
            bucket: cfg.container.clone(),
            prefix: cfg.prefix.clone(),
            endpoint: cfg.var("AZURITE_BLOB_STORAGE_URL").map(str::to_string),
            part_size: cfg.part_size,
            timeout: cfg.timeout,
            credentials: cfg.credentials(),
        };
        ObjectBlobStore::with(AZURE, clients, &common)
    }
}
