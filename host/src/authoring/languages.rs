//! The languages forewarn has plugin templates and SDKs for, as `--lang` names them.

use std::fmt;

/// A plugin's language, as `--lang` names it: a template (`cli/plugin_templates.rs`) and an SDK
/// package (`plugins/carried_sdk.rs`) each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// A Rust crate using forewarn-sdk.
    Rust,
    /// C with clang, wasi-libc and sdk/c.
    C,
    /// Python with componentize-py and sdk/python.
    Python,
    /// JavaScript with componentize-js and sdk/js.
    Js,
}

impl Lang {
    /// Every language, in `--lang`'s order.
    pub const ALL: [Lang; 4] = [Lang::Rust, Lang::C, Lang::Python, Lang::Js];

    /// The name `--lang` takes and sdk/templates/ uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::C => "c",
            Lang::Python => "python",
            Lang::Js => "js",
        }
    }

    /// The file at the root of this language's SDK package (its registry's metadata).
    pub fn package_marker(self) -> &'static str {
        match self {
            Lang::Rust => "Cargo.toml",
            Lang::C => "forewarn-sdk.mk",
            Lang::Python => "pyproject.toml",
            Lang::Js => "package.json",
        }
    }

    /// The SDK directory of this language inside the repository's `sdk/`.
    pub(crate) fn sdk_subdir(self) -> Option<&'static str> {
        match self {
            Lang::Rust => None,
            Lang::C => Some("c"),
            Lang::Python => Some("python"),
            Lang::Js => Some("js"),
        }
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
