//! Access tokens of the VM's Azure managed identity, for the resources the plugin's manifest
//! grants (`[capabilities] azure-identity = ["https://storage.azure.com/"]`).

use crate::host::imports as raw;
use crate::{AccessToken, HostError};

/// The audience of Azure Blob, Queue and Table Storage.
pub const STORAGE: &str = "https://storage.azure.com/";

/// An access token for `resource` from the VM's managed identity: the daemon fetches it from
/// the instance metadata service and caches it until shortly before it expires, so call this
/// whenever a token is needed rather than keeping one. A resource the manifest does not list
/// is [`HostError::NotGranted`]; a VM without an identity is [`HostError::Failed`].
pub fn access_token(resource: &str) -> Result<AccessToken, HostError> {
    raw::azure_access_token(resource)
}

impl AccessToken {
    /// The value of an `Authorization` header carrying the token: `Bearer <token>`.
    pub fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }
}
