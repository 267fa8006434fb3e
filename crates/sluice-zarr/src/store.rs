//! Stores: where a Zarr hierarchy lives (a directory, an HTTP server, an S3 bucket), picked
//! from the location's form, and the one small I/O runtime remote stores share.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::http::HttpBuilder;
use object_store::prefix::PrefixStore;
use object_store::{ClientOptions, ObjectStore, RetryConfig};
use zarrs::filesystem::FilesystemStore;
use zarrs::storage::ReadableStorageTraits;

use crate::error::ZarrError;
use crate::remote::ObjectStorage;

/// Where a Zarr hierarchy lives, parsed from a path or URL by [`Location::parse`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A directory on the local file system (a plain path or a `file://` URL).
    Path(PathBuf),
    /// An `http://` or `https://` URL of the hierarchy's root.
    Http(String),
    /// `s3://bucket/prefix`: a bucket and the key prefix of the hierarchy's root.
    S3 {
        /// The bucket.
        bucket: String,
        /// The key prefix, without leading or trailing `/` (may be empty).
        prefix: String,
    },
}

impl Location {
    /// Parses `url_or_path`: `http(s)://` and `s3://` URLs, `file://` URLs, and anything
    /// else as a local path. Other schemes (`gs://`, `az://`, ...) are an error naming them.
    pub fn parse(url_or_path: &str) -> Result<Location, ZarrError> {
        let bad = |reason: &str| ZarrError::BadUrl {
            url: url_or_path.to_string(),
            reason: reason.to_string(),
        };
        if let Some(rest) = url_or_path.strip_prefix("s3://") {
            let rest = rest.trim_end_matches('/');
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(bad("an s3:// URL needs a bucket: s3://BUCKET/PREFIX"));
            }
            return Ok(Location::S3 {
                bucket: bucket.to_string(),
                prefix: prefix.trim_matches('/').to_string(),
            });
        }
        if url_or_path.starts_with("http://") || url_or_path.starts_with("https://") {
            let parsed = url::Url::parse(url_or_path).map_err(|e| bad(&e.to_string()))?;
            if parsed.host_str().is_none_or(str::is_empty) {
                return Err(bad("an http(s) URL needs a host"));
            }
            return Ok(Location::Http(
                url_or_path.trim_end_matches('/').to_string(),
            ));
        }
        if url_or_path.starts_with("file://") {
            let parsed = url::Url::parse(url_or_path).map_err(|e| bad(&e.to_string()))?;
            let path = parsed
                .to_file_path()
                .map_err(|()| bad("not a local file URL"))?;
            return Ok(Location::Path(path));
        }
        if let Some((scheme, _)) = url_or_path.split_once("://") {
            return Err(bad(&format!(
                "scheme {scheme}:// is not supported; use a path, http(s):// or s3://"
            )));
        }
        Ok(Location::Path(PathBuf::from(url_or_path)))
    }

    /// The location as a URL or path, for messages.
    pub fn display(&self) -> String {
        match self {
            Location::Path(p) => p.display().to_string(),
            Location::Http(u) => u.clone(),
            Location::S3 { bucket, prefix } if prefix.is_empty() => format!("s3://{bucket}"),
            Location::S3 { bucket, prefix } => format!("s3://{bucket}/{prefix}"),
        }
    }
}

/// How to reach remote stores. The defaults suit public HTTP servers and S3 configured by the
/// usual `AWS_*` environment variables (`AWS_ENDPOINT_URL`, `AWS_REGION`,
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP`, ...).
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// An S3 endpoint other than AWS (MinIO, moto, Ceph), e.g. `http://127.0.0.1:9000`.
    /// Endpoints are addressed path-style (`ENDPOINT/BUCKET/KEY`).
    pub s3_endpoint: Option<String>,
    /// The S3 region; `AWS_REGION` or `us-east-1` when unset.
    pub s3_region: Option<String>,
    /// S3 credentials (access key id, secret); from the environment when unset.
    pub s3_credentials: Option<(String, String)>,
    /// Send unsigned S3 requests (public buckets).
    pub s3_unsigned: bool,
    /// Allow plain `http://` for S3 endpoints (always allowed for `http://` URLs).
    pub allow_http: bool,
    /// Timeout of one request. Default 30 s.
    pub timeout: Duration,
    /// Retries object_store makes itself before a read fails. Default 0: retries with backoff
    /// belong to whoever schedules the reads (sluice's loader pool), which sees every attempt.
    pub store_retries: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            s3_endpoint: None,
            s3_region: None,
            s3_credentials: None,
            s3_unsigned: false,
            allow_http: false,
            timeout: Duration::from_secs(30),
            store_retries: 0,
        }
    }
}

/// A readable store plus where it is, for messages.
#[derive(Clone)]
pub(crate) struct Store {
    pub(crate) location: Location,
    pub(crate) storage: Arc<dyn ReadableStorageTraits>,
}

impl Store {
    /// Opens the store a location names. Nothing is read yet.
    pub(crate) fn open(location: Location, options: &StoreOptions) -> Result<Store, ZarrError> {
        let url = location.display();
        let build_err = |e: object_store::Error| ZarrError::BadUrl {
            url: url.clone(),
            reason: e.to_string(),
        };
        let retry = RetryConfig {
            max_retries: options.store_retries,
            ..RetryConfig::default()
        };
        let storage: Arc<dyn ReadableStorageTraits> = match &location {
            Location::Path(path) => {
                if !path.is_dir() {
                    return Err(ZarrError::NotFound { url });
                }
                Arc::new(FilesystemStore::new(path).map_err(|e| ZarrError::Io {
                    url: url.clone(),
                    reason: e.to_string(),
                })?)
            }
            Location::Http(base) => {
                install_tls_provider();
                let client = ClientOptions::new()
                    .with_allow_http(true)
                    .with_timeout(options.timeout);
                let store = HttpBuilder::new()
                    .with_url(base.clone())
                    .with_client_options(client)
                    .with_retry(retry)
                    .build()
                    .map_err(build_err)?;
                remote(store)?
            }
            Location::S3 { bucket, prefix } => {
                install_tls_provider();
                let client = ClientOptions::new()
                    .with_allow_http(options.allow_http)
                    .with_timeout(options.timeout);
                let mut builder = AmazonS3Builder::from_env()
                    .with_bucket_name(bucket.clone())
                    .with_client_options(client)
                    .with_retry(retry)
                    .with_skip_signature(options.s3_unsigned);
                if let Some(endpoint) = &options.s3_endpoint {
                    builder = builder
                        .with_endpoint(endpoint.clone())
                        .with_virtual_hosted_style_request(false);
                }
                if options.allow_http {
                    builder = builder.with_allow_http(true);
                }
                if let Some(region) = &options.s3_region {
                    builder = builder.with_region(region.clone());
                }
                if let Some((id, secret)) = &options.s3_credentials {
                    builder = builder
                        .with_access_key_id(id.clone())
                        .with_secret_access_key(secret.clone());
                }
                let s3 = builder.build().map_err(build_err)?;
                if prefix.is_empty() {
                    remote(s3)?
                } else {
                    remote(PrefixStore::new(s3, prefix.as_str()))?
                }
            }
        };
        Ok(Store { location, storage })
    }

    /// The URL (or path) of `key` in this store, for messages.
    pub(crate) fn url_of(&self, key: &str) -> String {
        match &self.location {
            Location::Path(p) => Path::new(p).join(key).display().to_string(),
            other => format!("{}/{}", other.display(), key.trim_start_matches('/')),
        }
    }
}

/// Wraps an object store for zarrs' synchronous API, its futures run on the shared runtime.
fn remote<S: ObjectStore>(store: S) -> Result<Arc<dyn ReadableStorageTraits>, ZarrError> {
    Ok(Arc::new(ObjectStorage::new(
        Arc::new(store),
        runtime()?.handle().clone(),
    )))
}

/// reqwest (built without a default provider, to avoid compiling aws-lc) needs a rustls
/// crypto provider before it builds a client, for `http://` too: install ring's unless the
/// application installed one.
fn install_tls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err means another thread installed one meanwhile, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The I/O runtime of every remote store of the process: two worker threads drive the
/// sockets; the callers (loader threads) block on their own requests, so concurrency is
/// bounded by how many threads read, not by this runtime.
fn runtime() -> Result<&'static tokio::runtime::Runtime, ZarrError> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("sluice-zarr-io")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|reason| ZarrError::Io {
            url: "sluice-zarr's I/O runtime".to_string(),
            reason: reason.clone(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_picked_from_the_form() {
        assert_eq!(
            Location::parse("s3://bucket/a/b.zarr/").unwrap(),
            Location::S3 {
                bucket: "bucket".into(),
                prefix: "a/b.zarr".into()
            }
        );
        assert_eq!(
            Location::parse("http://127.0.0.1:8000/x.zarr/").unwrap(),
            Location::Http("http://127.0.0.1:8000/x.zarr".into())
        );
        assert_eq!(
            Location::parse("/data/x.zarr").unwrap(),
            Location::Path("/data/x.zarr".into())
        );
        assert_eq!(
            Location::parse("file:///data/x.zarr").unwrap(),
            Location::Path("/data/x.zarr".into())
        );
        for bad in ["gs://b/x", "s3://", "http://"] {
            let e = Location::parse(bad).unwrap_err();
            assert!(e.to_string().contains(bad), "{e}");
        }
    }
}
