//! zarrs' synchronous storage API over an object store (HTTP, S3): one request per read.
//!
//! zarrs_object_store's adapter asks for an object's size (a HEAD) before every read and reads
//! whole objects as ranges, so each chunk costs two round trips; over a slow link that doubles
//! the time to a complete view. This one sends one GET per chunk, and ranged GETs (suffix
//! ranges included) for sharded arrays, as object_store states them.

use std::sync::Arc;

use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::{
    Bytes, MaybeBytes, MaybeBytesIterator, ReadableStorageTraits, StorageError, StoreKey,
};

/// An object store read from plain threads, its futures run on the shared runtime.
pub(crate) struct ObjectStorage {
    store: Arc<dyn ObjectStore>,
    runtime: tokio::runtime::Handle,
}

impl ObjectStorage {
    pub(crate) fn new(store: Arc<dyn ObjectStore>, runtime: tokio::runtime::Handle) -> Self {
        ObjectStorage { store, runtime }
    }

    /// One GET of `key`, whole or of `range`; `None` where the object does not exist.
    fn fetch(&self, key: &StoreKey, range: Option<GetRange>) -> Result<MaybeBytes, StorageError> {
        let path = Path::from(key.as_str());
        let options = GetOptions {
            range,
            ..GetOptions::default()
        };
        let result = self.runtime.block_on(async {
            let got = self.store.get_opts(&path, options).await?;
            got.bytes().await
        });
        match result {
            Ok(bytes) => Ok(Some(bytes)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(StorageError::Other(e.to_string())),
        }
    }
}

impl ReadableStorageTraits for ObjectStorage {
    fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        self.fetch(key, None)
    }

    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let mut parts: Vec<Result<Bytes, StorageError>> = Vec::new();
        for range in byte_ranges {
            let range = match range {
                ByteRange::FromStart(0, None) => None,
                ByteRange::FromStart(offset, None) => Some(GetRange::Offset(offset)),
                ByteRange::FromStart(offset, Some(length)) => {
                    let end = offset.checked_add(length).ok_or_else(|| {
                        StorageError::Other(format!(
                            "{key}: byte range {offset} + {length} overflows u64"
                        ))
                    })?;
                    Some(GetRange::Bounded(offset..end))
                }
                ByteRange::Suffix(length) => Some(GetRange::Suffix(length)),
            };
            match self.fetch(key, range)? {
                Some(bytes) => parts.push(Ok(bytes)),
                None => return Ok(None),
            }
        }
        Ok(Some(Box::new(parts.into_iter())))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        let path = Path::from(key.as_str());
        match self.runtime.block_on(self.store.head(&path)) {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(StorageError::Other(e.to_string())),
        }
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}
