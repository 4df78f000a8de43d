//! `forewarn sdk export DIR --lang LANG`: writes the SDK this binary carries, as its registry
//! package, into DIR — for authors who vendor it, and for a release that publishes it.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::authoring::carried_sdk::{self, SDK_VERSION};
use crate::authoring::plugin_new::LangArg;
use crate::authoring::plugin_templates::Lang;

/// Options of `forewarn sdk export`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Where to write the SDK (must be missing or empty).
    pub dir: PathBuf,
    /// The SDK's language.
    #[arg(long, value_enum)]
    pub lang: LangArg,
}

/// Writes the package and prints where it went and how a project depends on it.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let lang = Lang::from(args.lang);
    let files = carried_sdk::write(lang, &args.dir)?;
    println!(
        "Wrote the forewarn {lang} SDK {SDK_VERSION} (forewarn:plugin@{}) into {}: {} files",
        forewarn_runtime::wit::latest_version(),
        args.dir.display(),
        files.len()
    );
    println!("{}", how_to_use(lang, &args.dir.display().to_string()));
    Ok(ExitCode::SUCCESS)
}

/// How a project depends on an SDK exported to `dir`, and how a release publishes it.
fn how_to_use(lang: Lang, dir: &str) -> String {
    match lang {
        Lang::Rust => format!(
            "Depend on it: forewarn-sdk = {{ path = \"{dir}\" }}\nPublish it: cargo publish --manifest-path {dir}/Cargo.toml"
        ),
        Lang::C => format!(
            "Use it: FOREWARN_SDK ?= {dir} and include $(FOREWARN_SDK)/forewarn-sdk.mk in your Makefile, \
             or put {dir} on PKG_CONFIG_PATH\nPublish it: tar czf forewarn-sdk-c-{SDK_VERSION}.tar.gz -C {dir} ."
        ),
        Lang::Python => format!(
            "Depend on it: pip install '{dir}[test]'\nPublish it: python -m build {dir} && twine upload {dir}/dist/*"
        ),
        Lang::Js => format!(
            "Depend on it: npm install --install-links {dir}\nPublish it: npm publish {dir}"
        ),
    }
}
