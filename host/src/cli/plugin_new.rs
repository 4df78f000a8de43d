//! `forewarn plugin new NAME --lang LANG [DIR]`: writes the embedded template of LANG into
//! DIR with the placeholders filled in, then prints the files and the next three commands.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::plugins::templates::{self, Lang, Substitutions};

/// `forewarn plugin new`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plugin's name: lower-case kebab-case (`[a-z][a-z0-9-]*`, at most 48 characters).
    name: String,
    /// The language of the template.
    #[arg(long, value_enum)]
    lang: LangArg,
    /// Where to write the project (must be missing or empty). Default: ./NAME.
    dir: Option<PathBuf>,
    /// The `sdk/` directory of a forewarn checkout. Default: the checkout this forewarn was
    /// built from, when it still exists.
    #[arg(long)]
    sdk: Option<PathBuf>,
}

/// `--lang`: the template's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[allow(missing_docs)] // a variant's doc comment would become its help in `--help`
pub enum LangArg {
    Rust,
    C,
    Python,
    Js,
}

impl From<LangArg> for Lang {
    fn from(lang: LangArg) -> Self {
        match lang {
            LangArg::Rust => Lang::Rust,
            LangArg::C => Lang::C,
            LangArg::Python => Lang::Python,
            LangArg::Js => Lang::Js,
        }
    }
}

/// Writes the template and prints the files and the next commands.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let written = create(&NewOptions {
        name: args.name,
        lang: args.lang.into(),
        dir: args.dir,
        sdk: args.sdk,
    })?;
    print!("{}", report(&written));
    Ok(ExitCode::SUCCESS)
}

/// Options of `forewarn plugin new`, as the command line gives them.
#[derive(Debug, Clone)]
pub struct NewOptions {
    /// The plugin's name (checked by [`templates::validate_name`]).
    pub name: String,
    /// The template's language.
    pub lang: Lang,
    /// Where to write the project; default `./NAME`.
    pub dir: Option<PathBuf>,
    /// The repository's `sdk/` directory; default the checkout this binary was built from.
    pub sdk: Option<PathBuf>,
}

/// What `plugin new` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The project directory.
    pub dir: PathBuf,
    /// The files, relative to `dir`, in the order written.
    pub files: Vec<PathBuf>,
    /// The README's next commands (build, test, install).
    pub next: Vec<String>,
}

/// The `sdk/` of the checkout this binary was built from, if it is still there.
fn built_from_sdk() -> Option<PathBuf> {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
    sdk.is_dir().then_some(sdk)
}

/// Writes the project; refuses an invalid name, a non-empty DIR and an unknown SDK path.
pub fn create(options: &NewOptions) -> anyhow::Result<Written> {
    templates::validate_name(&options.name)?;
    let dir = options
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&options.name));
    refuse_non_empty(&dir)?;
    let sdk = match options.sdk.clone().or_else(built_from_sdk) {
        Some(sdk) => sdk,
        None => bail!(
            "cannot tell where forewarn's SDK is: this forewarn was not built from a checkout \
             that still has its sdk/ directory. Pass --sdk PATH naming the sdk/ directory of a \
             forewarn repository checkout"
        ),
    };
    let sdk = std::fs::canonicalize(&sdk).with_context(|| {
        format!(
            "--sdk {}: no such directory; pass the sdk/ directory of a forewarn checkout",
            sdk.display()
        )
    })?;
    let subs = Substitutions::new(&options.name, options.lang, &sdk);
    let files = templates::render(options.lang, &subs);
    if files.is_empty() {
        bail!(
            "this forewarn was built without the {} template (sdk/templates/{} was missing)",
            options.lang,
            options.lang
        );
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for file in &files {
        let path = dir.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, &file.contents)
            .with_context(|| format!("cannot write {}", path.display()))?;
        make_scripts_executable(&path)?;
    }
    Ok(Written {
        next: templates::next_commands(&files),
        files: files.into_iter().map(|file| file.path).collect(),
        dir,
    })
}

/// `build.sh`, `test.sh`: written executable so the README's `./build.sh` works.
fn make_scripts_executable(path: &Path) -> anyhow::Result<()> {
    #[cfg(unix)]
    if path.extension().is_some_and(|ext| ext == "sh") {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot make {} executable", path.display()))?;
    }
    Ok(())
}

fn refuse_non_empty(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!(
            "{} exists and is not a directory: pass another DIR, or remove it",
            dir.display()
        );
    }
    let has_entries = match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_some(),
        Err(_) => false,
    };
    if has_entries {
        bail!(
            "{} already exists and is not empty: pass another DIR (the third argument), or \
             remove it first; `plugin new` never overwrites files",
            dir.display()
        );
    }
    Ok(())
}

/// The report `plugin new` prints: what it wrote, then the next commands.
pub fn report(written: &Written) -> String {
    let mut out = format!("Created {}:\n", written.dir.display());
    for file in &written.files {
        out.push_str(&format!("  {}\n", file.display()));
    }
    out.push_str(&format!("\nNext:\n  cd {}\n", written.dir.display()));
    for command in &written.next {
        out.push_str(&format!("  {command}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(dir: &Path, name: &str) -> NewOptions {
        NewOptions {
            name: name.into(),
            lang: Lang::Rust,
            dir: Some(dir.to_path_buf()),
            sdk: Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sdk")),
        }
    }

    #[test]
    fn every_language_is_a_lang_value() {
        use crate::cli::parse_args::{assert_consistent, parse};
        assert_consistent::<Args>();
        for lang in Lang::ALL {
            let args = parse::<Args>(&["disk-flush", "--lang", lang.as_str()]).expect("parses");
            assert_eq!(Lang::from(args.lang), lang);
        }
        assert!(parse::<Args>(&["disk-flush", "--lang", "cobol"]).is_err());
    }

    #[test]
    fn writes_every_template_file_into_an_empty_or_missing_dir() {
        let temp = tempfile::tempdir().expect("tempdir");
        for lang in Lang::ALL {
            let dir = temp.path().join(lang.as_str());
            let written = create(&NewOptions {
                lang,
                ..options(&dir, "disk-flush")
            })
            .expect("plugin new");
            assert!(!written.files.is_empty());
            for file in &written.files {
                let text = std::fs::read_to_string(dir.join(file)).expect("written");
                assert!(!text.contains("{{"), "{lang}: {}", file.display());
            }
            assert!(written.next.len() >= 3, "{:?}", written.next);
            assert!(report(&written).contains(&written.next[0]));
        }
        let empty = temp.path().join("empty");
        std::fs::create_dir(&empty).expect("mkdir");
        create(&options(&empty, "disk-flush")).expect("an empty directory is fine");
    }

    #[test]
    fn refuses_a_non_empty_dir_without_touching_it() {
        let temp = tempfile::tempdir().expect("tempdir");
        std::fs::write(temp.path().join("keep.txt"), "mine").expect("write");
        let error = create(&options(temp.path(), "disk-flush"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            format!(
                "{} already exists and is not empty: pass another DIR (the third argument), or \
                 remove it first; `plugin new` never overwrites files",
                temp.path().display()
            )
        );
        let names: Vec<_> = std::fs::read_dir(temp.path())
            .expect("read")
            .flatten()
            .map(|entry| entry.file_name())
            .collect();
        assert_eq!(names, ["keep.txt"]);
    }

    #[test]
    fn refuses_an_invalid_name_and_a_missing_sdk() {
        let temp = tempfile::tempdir().expect("tempdir");
        let dir = temp.path().join("p");
        let error = create(&options(&dir, "Disk Flush"))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("invalid plugin name `Disk Flush`"),
            "{error}"
        );
        assert!(!dir.exists(), "nothing written for an invalid name");
        let error = create(&NewOptions {
            sdk: Some(temp.path().join("no-sdk")),
            ..options(&dir, "disk-flush")
        })
        .unwrap_err()
        .to_string();
        assert!(error.contains("pass the sdk/ directory"), "{error}");
        assert!(!dir.exists());
    }
}
