//! `forewarn plugin new NAME --lang LANG [--template TEMPLATE] [DIR] [--sdk
//! carried|registry|PATH]`: writes the embedded template TEMPLATE (default `minimal`) of LANG
//! into DIR with the placeholders filled in and, by default, the SDK this binary carries into
//! DIR/vendor/forewarn-sdk; then prints the files and the next commands. Nothing written names
//! the tree the binary was built from. `forewarn plugin new --list [--lang LANG]` lists the
//! templates instead.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::authoring::carried_sdk;
use crate::authoring::plugin_templates::{self as templates, Lang, SdkSource, Substitutions};

/// `--lang`: the template's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LangArg {
    /// Rust with the forewarn-sdk crate.
    Rust,
    /// C with clang, wasi-libc and the C SDK.
    C,
    /// Python with componentize-py and the Python SDK.
    Python,
    /// JavaScript with componentize-js and the JavaScript SDK.
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

/// Options of `forewarn plugin new`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The plugin's name: lower-case kebab-case (`[a-z][a-z0-9-]*`, at most 48 characters).
    #[arg(required_unless_present = "list")]
    pub name: Option<String>,
    /// The language of the template (with `--list`: list only its templates).
    #[arg(long, value_enum, required_unless_present = "list")]
    pub lang: Option<LangArg>,
    /// Which of the language's templates: `minimal` approves every phase, with each laid out;
    /// `http-drain` takes the VM out of rotation and calls a drain URL before approving
    /// (`--list` describes every one).
    #[arg(long, default_value = templates::DEFAULT_TEMPLATE)]
    pub template: String,
    /// List each language's templates with what they do, and write nothing.
    #[arg(long, conflicts_with_all = ["name", "dir"])]
    pub list: bool,
    /// Where to write the project (must be missing or empty). Default: ./NAME.
    pub dir: Option<PathBuf>,
    /// The SDK the project depends on: `carried` (default) writes the SDK this forewarn carries
    /// into the project (vendor/forewarn-sdk), so it builds with nothing but the language's
    /// toolchain; `registry` depends on the published forewarn-sdk package by version; a PATH
    /// names an SDK folder (a checkout's sdk/, or one `forewarn sdk export` wrote), for working
    /// on the SDK itself.
    #[arg(long, default_value = "carried", value_parser = parse_sdk)]
    pub sdk: SdkSource,
}

/// An empty `--sdk`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--sdk needs `carried`, `registry` or a path")]
pub struct NoSdkSource;

/// `--sdk`: `carried`, `registry`, or a path (`./registry` for a folder of that name).
pub fn parse_sdk(text: &str) -> Result<SdkSource, NoSdkSource> {
    match text {
        "carried" => Ok(SdkSource::Carried),
        "registry" => Ok(SdkSource::Registry),
        "" => Err(NoSdkSource),
        path => Ok(SdkSource::Path(PathBuf::from(path))),
    }
}

/// `forewarn plugin new`: writes the project and prints what it wrote and the next commands
/// (with `--list`, the templates).
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    match Request::from_args(args)? {
        Request::List(lang) => print!("{}", templates::listing(lang)),
        Request::Create(options) => print!("{}", report(&create(&options)?)),
    }
    Ok(ExitCode::SUCCESS)
}

/// What the command line asks `plugin new` for.
#[derive(Debug, Clone)]
pub enum Request {
    /// `--list [--lang LANG]`: the templates (of LANG only, when given).
    List(Option<Lang>),
    /// A project.
    Create(NewOptions),
}

impl Request {
    /// The request `args` make (clap has checked that NAME and --lang come without --list).
    pub fn from_args(args: Args) -> anyhow::Result<Request> {
        let lang = args.lang.map(Lang::from);
        if args.list {
            return Ok(Request::List(lang));
        }
        let (Some(name), Some(lang)) = (args.name, lang) else {
            bail!("`plugin new` needs NAME and --lang (or --list, to see the templates)");
        };
        Ok(Request::Create(NewOptions {
            name,
            lang,
            template: args.template,
            dir: args.dir,
            sdk: args.sdk,
        }))
    }
}

/// Options of `forewarn plugin new`, as the command line gives them.
#[derive(Debug, Clone)]
pub struct NewOptions {
    /// The plugin's name (checked by [`templates::validate_name`]).
    pub name: String,
    /// The template's language.
    pub lang: Lang,
    /// Which of the language's templates (checked by [`templates::find_template`]).
    pub template: String,
    /// Where to write the project; default `./NAME`.
    pub dir: Option<PathBuf>,
    /// The SDK the project depends on.
    pub sdk: SdkSource,
}

/// What `plugin new` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The project directory.
    pub dir: PathBuf,
    /// The files, relative to `dir`, in the order written (the carried SDK as its folder).
    pub files: Vec<PathBuf>,
    /// The README's next commands (set up, build, test, install).
    pub next: Vec<String>,
}

/// Writes the project; refuses an invalid name, a template the language has not, a non-empty
/// DIR and an SDK path that holds no SDK of the language.
pub fn create(options: &NewOptions) -> anyhow::Result<Written> {
    templates::validate_name(&options.name)?;
    templates::find_template(options.lang, &options.template)?;
    let dir = options
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&options.name));
    carried_sdk::refuse_non_empty(&dir).map_err(|_| {
        anyhow::anyhow!(
            "{} already exists and is not empty: pass another DIR (the third argument), or \
             remove it first; `plugin new` never overwrites files",
            dir.display()
        )
    })?;
    let sdk = resolve_sdk(options.lang, &options.sdk)?;
    let subs = Substitutions::new(&options.name, options.lang, &sdk);
    let files = templates::render(options.lang, &options.template, &subs);
    if files.is_empty() {
        bail!(
            "this forewarn was built without the {} template `{}` (sdk/templates/{}/{} was \
             empty)",
            options.lang,
            options.template,
            options.lang,
            options.template
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
    let mut written: Vec<PathBuf> = files.iter().map(|file| file.path.clone()).collect();
    if sdk == SdkSource::Carried {
        carried_sdk::write(options.lang, &dir.join(carried_sdk::VENDOR_DIR))?;
        written.push(PathBuf::from(format!("{}/", carried_sdk::VENDOR_DIR)));
    }
    Ok(Written {
        next: templates::next_commands(&files),
        files: written,
        dir,
    })
}

/// `--sdk PATH` made absolute and checked to hold `lang`'s SDK package.
fn resolve_sdk(lang: Lang, sdk: &SdkSource) -> anyhow::Result<SdkSource> {
    let SdkSource::Path(path) = sdk else {
        return Ok(sdk.clone());
    };
    let absolute = std::fs::canonicalize(path).with_context(|| {
        format!(
            "--sdk {}: no such directory; pass the SDK's folder (a forewarn checkout's sdk/, or \
             one `forewarn sdk export DIR --lang {lang}` wrote), or leave --sdk out to use the SDK \
             this forewarn carries",
            path.display()
        )
    })?;
    let package = SdkSource::package_dir(lang, &absolute);
    if !package.join(lang.package_marker()).is_file() {
        bail!(
            "--sdk {}: no {lang} SDK there ({} is missing); pass the SDK's folder (a forewarn \
             checkout's sdk/, or one `forewarn sdk export DIR --lang {lang}` wrote)",
            path.display(),
            package.join(lang.package_marker()).display()
        );
    }
    Ok(SdkSource::Path(package))
}

/// `build.sh`, `test.sh`: written executable so the README's `./build.sh` works.
fn make_scripts_executable(path: &Path) -> anyhow::Result<()> {
    if path.extension().is_some_and(|ext| ext == "sh") {
        forewarn_platform::file_access::make_executable(path)
            .with_context(|| format!("cannot make {} executable", path.display()))?;
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
            template: templates::DEFAULT_TEMPLATE.into(),
            dir: Some(dir.to_path_buf()),
            sdk: SdkSource::Carried,
        }
    }

    #[test]
    fn every_language_is_a_lang_value() {
        use crate::cli::parse_args::{assert_consistent, parse};
        assert_consistent::<Args>();
        for lang in Lang::ALL {
            let args = parse::<Args>(&["disk-flush", "--lang", lang.as_str()]).expect("parses");
            assert_eq!(args.lang.map(Lang::from), Some(lang));
        }
        assert!(parse::<Args>(&["disk-flush", "--lang", "cobol"]).is_err());
    }

    /// What the command line asks for, parsed as `main` parses it.
    fn request(args: &[&str]) -> Result<Request, String> {
        let args =
            crate::cli::parse_args::parse::<Args>(args).map_err(|error| error.to_string())?;
        Request::from_args(args).map_err(|error| error.to_string())
    }

    #[test]
    fn template_defaults_to_minimal_and_is_taken_as_given() {
        let Ok(Request::Create(options)) = request(&["disk-flush", "--lang", "c"]) else {
            panic!("a project");
        };
        assert_eq!(
            (
                options.name.as_str(),
                options.lang,
                options.template.as_str()
            ),
            ("disk-flush", Lang::C, "minimal")
        );
        assert_eq!(options.dir, None);
        let Ok(Request::Create(options)) = request(&[
            "disk-flush",
            "--lang",
            "js",
            "--template",
            "http-drain",
            "out/dir",
        ]) else {
            panic!("a project");
        };
        assert_eq!(
            (options.lang, options.template.as_str(), options.dir),
            (Lang::Js, "http-drain", Some(PathBuf::from("out/dir")))
        );
    }

    #[test]
    fn list_needs_neither_a_name_nor_a_language_and_takes_no_name() {
        assert!(matches!(request(&["--list"]), Ok(Request::List(None))));
        assert!(matches!(
            request(&["--list", "--lang", "python"]),
            Ok(Request::List(Some(Lang::Python)))
        ));
        for without in [&["disk-flush"][..], &["--lang", "rust"], &[]] {
            assert!(request(without).is_err(), "{without:?}");
        }
        let error = request(&["--list", "disk-flush"]).unwrap_err();
        assert!(error.contains("cannot be used with"), "{error}");
    }

    #[test]
    fn an_unknown_template_is_refused_naming_the_available_ones() {
        let temp = tempfile::tempdir().expect("tempdir");
        let dir = temp.path().join("p");
        let error = create(&NewOptions {
            template: "fancy".into(),
            ..options(&dir, "disk-flush")
        })
        .unwrap_err()
        .to_string();
        assert_eq!(
            error,
            "there is no rust template `fancy`: the rust templates are `minimal` (the default), \
             `http-drain`; `forewarn plugin new --list` describes them"
        );
        assert!(!dir.exists(), "nothing written for an unknown template");
    }

    #[test]
    fn every_template_of_every_language_is_written() {
        let temp = tempfile::tempdir().expect("tempdir");
        for lang in Lang::ALL {
            for template in templates::templates(lang) {
                let dir = temp.path().join(format!("{lang}-{}", template.name));
                let written = create(&NewOptions {
                    lang,
                    template: template.name.into(),
                    sdk: SdkSource::Registry,
                    ..options(&dir, "disk-flush")
                })
                .unwrap_or_else(|error| panic!("{lang} {}: {error}", template.name));
                assert!(
                    dir.join("disk-flush.toml").is_file(),
                    "{lang} {}",
                    template.name
                );
                assert!(
                    !dir.join("template.txt").exists(),
                    "{lang} {}",
                    template.name
                );
                let install = written.next.last().expect("next commands");
                assert_eq!(
                    install.split(" #").next().unwrap_or_default().trim(),
                    "sudo install -m 644 disk-flush.wasm disk-flush.toml /etc/forewarn/plugins.d/",
                    "{lang} {}",
                    template.name
                );
            }
        }
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
            for file in written.files.iter().filter(|file| dir.join(file).is_file()) {
                let text = std::fs::read_to_string(dir.join(file)).expect("written");
                assert!(!text.contains("{{"), "{lang}: {}", file.display());
            }
            let marker = dir
                .join(carried_sdk::VENDOR_DIR)
                .join(lang.package_marker());
            assert!(
                marker.is_file(),
                "{lang}: the carried SDK is in the project"
            );
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
            sdk: SdkSource::Path(temp.path().join("no-sdk")),
            ..options(&dir, "disk-flush")
        })
        .unwrap_err()
        .to_string();
        assert!(error.contains("pass the SDK's folder"), "{error}");
        let error = create(&NewOptions {
            lang: Lang::Python,
            sdk: SdkSource::Path(temp.path().to_path_buf()),
            ..options(&dir, "disk-flush")
        })
        .unwrap_err()
        .to_string();
        assert!(error.contains("no python SDK there"), "{error}");
        assert!(!dir.exists());
    }

    #[test]
    fn a_registry_or_path_sdk_is_named_and_not_written_into_the_project() {
        let temp = tempfile::tempdir().expect("tempdir");
        let dir = temp.path().join("registry");
        create(&NewOptions {
            sdk: SdkSource::Registry,
            ..options(&dir, "disk-flush")
        })
        .expect("plugin new --sdk registry");
        assert!(!dir.join("vendor").exists());
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
        assert!(
            manifest.contains(&format!("forewarn-sdk = \"{}\"", carried_sdk::SDK_VERSION)),
            "{manifest}"
        );

        let exported = temp.path().join("exported");
        carried_sdk::write(Lang::C, &exported).expect("export");
        let dir = temp.path().join("local");
        create(&NewOptions {
            lang: Lang::C,
            sdk: SdkSource::Path(exported.clone()),
            ..options(&dir, "disk-flush")
        })
        .expect("plugin new --sdk PATH");
        let makefile = std::fs::read_to_string(dir.join("Makefile")).expect("Makefile");
        let exported = std::fs::canonicalize(&exported).expect("canonical");
        assert!(
            makefile.contains(&format!("FOREWARN_SDK ?= {}", exported.display())),
            "{makefile}"
        );
    }

    #[test]
    fn sdk_arguments_are_carried_registry_or_a_path() {
        assert_eq!(parse_sdk("carried"), Ok(SdkSource::Carried));
        assert_eq!(parse_sdk("registry"), Ok(SdkSource::Registry));
        assert_eq!(
            parse_sdk("./registry"),
            Ok(SdkSource::Path(PathBuf::from("./registry")))
        );
        assert!(parse_sdk("").is_err());
    }
}
