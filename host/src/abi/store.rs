//! `harness:store@0.1.0`: the bindings of store components (the backing stores of
//! persistent directories, see [`crate::stores`]) and how the host calls one.

use crate::failure::Failure;
use crate::limits::Limits;
use crate::sandbox::StoreState;
use wasmtime::Store;
use wasmtime::component::InstancePre;

/// The `persistent-store` world.
pub mod plain {
    wasmtime::component::bindgen!({
        path: "../wit/store@0.1.0",
        world: "persistent-store",
        exports: { default: async },
    });
}

/// The `versioned-store` world: a store that also keeps past versions.
pub mod versioned {
    wasmtime::component::bindgen!({
        path: "../wit/store@0.1.0",
        world: "versioned-store",
        exports: { default: async },
        with: {
            "harness:store/store": super::plain::exports::harness::store::store,
        },
    });
}

pub use plain::exports::harness::store::store::{
    Change, ChangeKind, Committed, Loaded, OnConflict, StoreError,
};
pub use versioned::exports::harness::store::versions::Version;

/// The export of a store that keeps versions (any 0.1 patch).
const VERSIONS_EXPORT: &str = "harness:store/versions@0.1.";

/// A store component ready to instantiate.
pub struct StorePre {
    store: plain::PersistentStorePre<StoreState>,
    /// Set when it exports `versions`.
    versions: Option<versioned::VersionedStorePre<StoreState>>,
}

impl StorePre {
    /// `pre` as a store.
    ///
    /// # Errors
    ///
    /// When it lacks the `store` export.
    pub fn new(
        pre: InstancePre<StoreState>,
        engine: &wasmtime::Engine,
    ) -> wasmtime::Result<StorePre> {
        let versions = match super::exports(&pre, engine, VERSIONS_EXPORT) {
            true => Some(versioned::VersionedStorePre::new(pre.clone())?),
            false => None,
        };
        Ok(StorePre {
            store: plain::PersistentStorePre::new(pre)?,
            versions,
        })
    }

    /// Whether it keeps past versions.
    pub fn keeps_versions(&self) -> bool {
        self.versions.is_some()
    }

    /// `load`: the outer `Err` is a failure of the component, the inner one the store's.
    ///
    /// # Errors
    ///
    /// A [`Failure`]: a trap or a limit.
    pub async fn load(
        &self,
        store: &mut Store<StoreState>,
        limits: &Limits,
        mount: &str,
    ) -> Result<Result<Loaded, StoreError>, Failure> {
        Failure::bounded(store, limits, async |store| {
            let instance = self.store.instantiate_async(&mut *store).await?;
            instance.harness_store_store().call_load(store, mount).await
        })
        .await
    }

    /// `commit`, as [`Self::load`].
    ///
    /// # Errors
    ///
    /// A [`Failure`]: a trap or a limit.
    pub async fn commit(
        &self,
        store: &mut Store<StoreState>,
        limits: &Limits,
        mount: &str,
        base: &str,
        changes: &[Change],
        on_conflict: OnConflict,
    ) -> Result<Result<Committed, StoreError>, Failure> {
        Failure::bounded(store, limits, async |store| {
            let instance = self.store.instantiate_async(&mut *store).await?;
            instance
                .harness_store_store()
                .call_commit(store, mount, base, changes, on_conflict)
                .await
        })
        .await
    }

    /// `history`; `None` for a store that keeps no versions.
    ///
    /// # Errors
    ///
    /// A [`Failure`]: a trap or a limit.
    pub async fn history(
        &self,
        store: &mut Store<StoreState>,
        limits: &Limits,
        mount: &str,
    ) -> Result<Option<Result<Vec<Version>, String>>, Failure> {
        self.versions(store, limits, async |instance, store| {
            instance.call_history(store, mount).await
        })
        .await
    }

    /// `restore`; `None` for a store that keeps no versions.
    ///
    /// # Errors
    ///
    /// A [`Failure`]: a trap or a limit.
    pub async fn restore(
        &self,
        store: &mut Store<StoreState>,
        limits: &Limits,
        mount: &str,
        id: &str,
    ) -> Result<Option<Result<String, String>>, Failure> {
        self.versions(store, limits, async |instance, store| {
            instance.call_restore(store, mount, id).await
        })
        .await
    }

    /// `call` on a fresh instance's `versions` export, within `limits`; `None` for a store
    /// that keeps no versions.
    async fn versions<T>(
        &self,
        store: &mut Store<StoreState>,
        limits: &Limits,
        call: impl AsyncFnOnce(
            &versioned::exports::harness::store::versions::Guest,
            &mut Store<StoreState>,
        ) -> wasmtime::Result<T>,
    ) -> Result<Option<T>, Failure> {
        let Some(versions) = &self.versions else {
            return Ok(None);
        };
        Failure::bounded(store, limits, async |store| {
            let instance = versions.instantiate_async(&mut *store).await?;
            call(instance.harness_store_versions(), store).await
        })
        .await
        .map(Some)
    }
}
