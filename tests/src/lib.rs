//! forewarn-test-support: the shared harness of forewarn's end-to-end tests, fixtures, and the
//! test guest components. `guests::PROBE`, `guests::OTHER_WORLD` and `guests::NOOP` are paths to
//! built `.wasm` files.

/// Azurite's Blob service over HTTPS with OAuth, for the blob storage tests.
pub mod azurite;
/// The browser tests' script (`tests/browser/pages.mjs`) and its Chromium.
pub mod browser;
/// Artifacts a hostile author makes, pushed and signed without `plugin push`'s checks.
pub mod crafted;
/// A TCP forwarder a test can cut and restore (one VM's network to etcd gone).
pub mod cuttable_link;
/// A maintenance drill behind a real HAProxy with requests flowing (drain tests, bench-drain).
// not on Windows: HAProxy, its Unix stats socket and the `sh` actions are Linux's.
#[cfg(unix)]
pub mod drain_drill;
/// Real etcd on loopback: one member, or a cluster whose members the tests kill and restart.
pub mod etcd;
/// A small OCI registry that can be told to misbehave, for the supply-chain tests.
pub mod fake_registry;
pub mod fixtures;
pub mod generated;
pub mod guests;
/// A real HAProxy balancing small app servers, its view from the stats socket, and a client.
// not on Windows: HAProxy and its Unix stats socket are Linux's.
#[cfg(unix)]
pub mod haproxy;
pub mod harness;
/// An HTTPS client trusting only the test CA.
pub mod https;
/// A local HTTP/HTTPS server answering every request with one response.
pub mod https_server;
/// A stand-in systemd-logind on a private `dbus-daemon`.
// not on Windows: logind, D-Bus and the pipe a lock is are Linux's.
#[cfg(unix)]
pub mod logind;
/// Loopback ports below the ephemeral range, locked per test process, for servers that restart.
pub mod loopback_ports;
/// A throwaway test CA and certificates (openssl).
pub mod pki;
/// Scenario files the tests write beside a plugin.
pub mod scenario_texts;
/// A small tmpfs for a state directory, to fill and make read-only.
pub mod small_disk;
/// A program in a pseudo-terminal, read by a terminal emulator (Unix).
#[cfg(unix)]
pub mod terminal;
pub mod webhook_receiver;
