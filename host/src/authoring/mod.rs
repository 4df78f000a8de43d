//! The plugin author's tools, in one place: the languages forewarn has templates and SDKs
//! for, the SDKs this binary carries, and (as they move here) the authoring commands.

pub mod carried_sdk;
pub mod languages;
