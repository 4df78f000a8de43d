//! forewarn-test-support: the shared harness of forewarn's end-to-end tests, fixtures, and the
//! test guest components. `guests::PROBE`, `guests::OTHER_WORLD` and `guests::NOOP` are paths to
//! built `.wasm` files.

/// Azurite's Blob service over HTTPS with OAuth, for the blob storage tests.
pub mod azurite;
pub mod fixtures;
pub mod generated;
pub mod guests;
pub mod harness;
/// An HTTPS client trusting only the test CA.
pub mod https;
/// A local HTTP/HTTPS server answering every request with one response.
pub mod https_server;
/// A throwaway test CA and certificates (openssl).
pub mod pki;
pub mod webhook_receiver;
