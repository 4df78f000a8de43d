//! forewarn-tests: end-to-end tests of forewarn, and the test guest components they load.
//! `guests::PROBE`, `guests::OTHER_WORLD` and `guests::NOOP` are paths to built `.wasm` files.

pub mod fixtures;
pub mod guests;
pub mod support;
