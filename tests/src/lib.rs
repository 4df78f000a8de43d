//! forewarn-test-support: the shared harness of forewarn's end-to-end tests, fixtures, and the
//! test guest components. `guests::PROBE`, `guests::OTHER_WORLD` and `guests::NOOP` are paths to
//! built `.wasm` files.

pub mod fixtures;
pub mod guests;
pub mod harness;
/// A throwaway test CA and certificates (openssl).
pub mod pki;
pub mod webhook_receiver;
