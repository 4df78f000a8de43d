//! The event pipeline's pure stages: IMDS documents become transitions (tracker), the
//! policy plans each event, and the durable state records how far every plugin got.

pub mod barrier;
pub mod policy;
pub mod state;
pub mod timeline;
pub mod tracker;
