//! The plugin templates embedded in the binary (sdk/templates/<lang>/<template>/), which
//! templates each language has (`plugin new --list`), and how `plugin new` turns one into
//! files: the name checked, placeholders substituted in contents and names.

use std::path::{Path, PathBuf};

use crate::authoring::carried_sdk;
pub use crate::authoring::languages::Lang;

include!(concat!(env!("OUT_DIR"), "/templates.rs"));

/// Longest plugin name `plugin new` accepts.
pub const NAME_MAX: usize = 48;

/// Why a plugin name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Empty, too long, or a character outside `[a-z0-9-]` / not starting with a letter.
    #[error(
        "invalid plugin name `{name}`: {problem}. A name is lower-case kebab-case, starts with a \
         letter and has at most {NAME_MAX} characters (`[a-z][a-z0-9-]*`), e.g. `{suggestion}`"
    )]
    Invalid {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        problem: String,
        /// A valid name close to it.
        suggestion: String,
    },
}

/// Checks `name` against `[a-z][a-z0-9-]*`, at most [`NAME_MAX`] characters.
pub fn validate_name(name: &str) -> Result<(), NameError> {
    let problem = if name.is_empty() {
        Some("it is empty".to_owned())
    } else if name.chars().count() > NAME_MAX {
        Some(format!("it has {} characters", name.chars().count()))
    } else if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        Some("it does not start with a lower-case letter".to_owned())
    } else {
        name.chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
            .map(|c| format!("it contains `{c}`"))
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(NameError::Invalid {
            name: name.to_owned(),
            problem,
            suggestion: suggest(name),
        }),
    }
}

/// A valid name close to `name`: lower-cased, other characters turned into `-`.
fn suggest(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    let trimmed: String = out
        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '-')
        .chars()
        .take(NAME_MAX)
        .collect();
    let trimmed = trimmed.trim_end_matches('-').to_owned();
    if trimmed.is_empty() {
        "my-plugin".to_owned()
    } else {
        trimmed
    }
}

/// Which SDK a new project depends on (`plugin new --sdk`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SdkSource {
    /// The SDK this binary carries, written into the project ([`carried_sdk::VENDOR_DIR`]).
    Carried,
    /// The package published on the language's registry, by version.
    Registry,
    /// An SDK folder on this machine (a checkout's `sdk/`, or one `sdk export` wrote), for
    /// working on the SDK itself; absolute.
    Path(PathBuf),
}

impl SdkSource {
    /// The folder of `lang`'s SDK under a path given with `--sdk`: the path itself when it is
    /// the language's package, else its subfolder (`sdk/c` of a checkout's `sdk/`).
    pub fn package_dir(lang: Lang, path: &Path) -> PathBuf {
        match lang.sdk_subdir() {
            Some(sub) if !path.join(lang.package_marker()).is_file() => path.join(sub),
            _ => path.to_path_buf(),
        }
    }
}

/// The values of a template's placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Substitutions {
    /// `{{name}}`.
    pub name: String,
    /// `{{sdk_dependency}}`: how the project names its SDK, in its build file's syntax.
    pub sdk_dependency: String,
    /// `{{sdk_docs}}`: where the SDK's README is.
    pub sdk_docs: String,
    /// `{{sdk_version}}`.
    pub sdk_version: String,
    /// `{{wit_version}}`.
    pub wit_version: String,
}

impl Substitutions {
    /// The placeholders for a plugin `name` in `lang` depending on the SDK from `sdk`.
    pub fn new(name: &str, lang: Lang, sdk: &SdkSource) -> Self {
        Substitutions {
            name: name.to_owned(),
            sdk_dependency: sdk_dependency(lang, sdk),
            sdk_docs: match sdk {
                SdkSource::Carried => format!("{}/README.md", carried_sdk::VENDOR_DIR),
                SdkSource::Registry => format!(
                    "the README of the {} package (`forewarn sdk export sdk --lang {lang}` writes it out)",
                    carried_sdk::PACKAGE_NAME
                ),
                SdkSource::Path(path) => format!("{}/README.md", path.display()),
            },
            sdk_version: carried_sdk::SDK_VERSION.to_owned(),
            wit_version: forewarn_runtime::wit::latest_version(),
        }
    }

    /// `text` with every placeholder replaced.
    pub fn apply(&self, text: &str) -> String {
        text.replace("{{name}}", &self.name)
            .replace("{{name_snake}}", &self.name.replace('-', "_"))
            .replace("{{sdk_dependency}}", &self.sdk_dependency)
            .replace("{{sdk_docs}}", &self.sdk_docs)
            .replace("{{sdk_version}}", &self.sdk_version)
            .replace("{{wit_version}}", &self.wit_version)
    }
}

/// How a `lang` project names the SDK from `sdk`: a Cargo dependency, the Makefile's
/// FOREWARN_SDK, a pip requirement, an npm dependency specifier.
fn sdk_dependency(lang: Lang, sdk: &SdkSource) -> String {
    let version = carried_sdk::SDK_VERSION;
    let name = carried_sdk::PACKAGE_NAME;
    let folder = match sdk {
        SdkSource::Carried => Some(carried_sdk::VENDOR_DIR.to_owned()),
        SdkSource::Path(path) => Some(path.display().to_string()),
        SdkSource::Registry => None,
    };
    match (lang, folder) {
        (Lang::Rust, Some(folder)) => format!("{name} = {{ path = \"{folder}\" }}"),
        (Lang::Rust, None) => format!("{name} = \"{version}\""),
        (Lang::C, Some(folder)) => format!("FOREWARN_SDK ?= {folder}"),
        (Lang::C, None) => {
            format!("FOREWARN_SDK ?= $(shell pkg-config --variable=sdkdir '{name} >= {version}')")
        }
        (Lang::Python, Some(folder)) if folder.starts_with('/') => format!("{folder}[test]"),
        (Lang::Python, Some(folder)) => format!("./{folder}[test]"),
        (Lang::Python, None) => format!("{name}[test] ~= {version}"),
        (Lang::Js, Some(folder)) => format!("file:{folder}"),
        (Lang::Js, None) => format!("~{version}"),
    }
}

/// One file of a rendered template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedFile {
    /// Where it goes, relative to the project directory.
    pub path: PathBuf,
    /// Its contents, placeholders substituted (bytes that are not UTF-8 are copied as they are).
    pub contents: Vec<u8>,
}

/// The template `plugin new` writes without `--template`.
pub const DEFAULT_TEMPLATE: &str = "minimal";

/// One template of a language, as `plugin new --list` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateInfo {
    /// Its name, as `--template` takes it (its folder under sdk/templates/<lang>/).
    pub name: &'static str,
    /// What it does, in one line (its `template.txt`).
    pub description: &'static str,
}

/// The templates of `lang` this binary carries: [`DEFAULT_TEMPLATE`] first, then by name.
pub fn templates(lang: Lang) -> Vec<TemplateInfo> {
    TEMPLATES
        .iter()
        .filter(|(template_lang, _, _)| *template_lang == lang.as_str())
        .map(|(_, name, description)| TemplateInfo {
            name,
            description: description.trim(),
        })
        .collect()
}

/// `--template NAME` that `lang` has no template of.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "there is no {lang} template `{name}`: the {lang} templates are {}; `forewarn plugin new \
     --list` describes them",
    available_names(*lang)
)]
pub struct UnknownTemplate {
    /// The language asked for.
    pub lang: Lang,
    /// The template asked for.
    pub name: String,
}

/// `lang`'s template names for a message: "`minimal` (the default), `http-drain`".
fn available_names(lang: Lang) -> String {
    let names: Vec<String> = templates(lang)
        .iter()
        .map(|template| match template.name {
            DEFAULT_TEMPLATE => format!("`{DEFAULT_TEMPLATE}` (the default)"),
            name => format!("`{name}`"),
        })
        .collect();
    match names.is_empty() {
        true => "none (this forewarn was built without them)".to_owned(),
        false => names.join(", "),
    }
}

/// Checks that `lang` has a template `name`.
pub fn find_template(lang: Lang, name: &str) -> Result<TemplateInfo, UnknownTemplate> {
    templates(lang)
        .into_iter()
        .find(|template| template.name == name)
        .ok_or_else(|| UnknownTemplate {
            lang,
            name: name.to_owned(),
        })
}

/// What `plugin new --list` prints: each language's templates (only `only`'s when given), one
/// line each with its description.
pub fn listing(only: Option<Lang>) -> String {
    let langs: Vec<Lang> = match only {
        Some(lang) => vec![lang],
        None => Lang::ALL.to_vec(),
    };
    let width = langs
        .iter()
        .flat_map(|lang| templates(*lang))
        .map(|template| template.name.len())
        .max()
        .unwrap_or(0);
    let mut out = format!(
        "The templates of `forewarn plugin new NAME --lang LANG --template TEMPLATE` (without \
         --template: {DEFAULT_TEMPLATE}):\n"
    );
    for lang in langs {
        out.push_str(&format!("\n{lang}:\n"));
        for template in templates(lang) {
            out.push_str(&format!(
                "  {:<width$}  {}\n",
                template.name, template.description
            ));
        }
    }
    out
}

/// The template `template` of `lang` with `subs` applied: names and contents; `_gitignore`
/// becomes `.gitignore` (and `_npmrc` `.npmrc`). Empty when the binary carries no such
/// template (see [`find_template`]).
pub fn render(lang: Lang, template: &str, subs: &Substitutions) -> Vec<RenderedFile> {
    TEMPLATE_FILES
        .iter()
        .filter(|(file_lang, file_template, _, _)| {
            *file_lang == lang.as_str() && *file_template == template
        })
        .map(|(_, _, path, bytes)| RenderedFile {
            path: output_path(path, subs),
            contents: match std::str::from_utf8(bytes) {
                Ok(text) => subs.apply(text).into_bytes(),
                Err(_) => bytes.to_vec(),
            },
        })
        .collect()
}

/// Template files that are dotfiles in the project: stored as `_NAME` (so that they are not
/// hidden, nor taken for the repository's own `.gitignore`), written as `.NAME`.
const DOTFILES: [&str; 2] = ["_gitignore", "_npmrc"];

/// Where a template file goes: placeholders substituted, `_gitignore` named `.gitignore`
/// (and the other [`DOTFILES`]).
fn output_path(path: &str, subs: &Substitutions) -> PathBuf {
    let path = subs.apply(path);
    let (dir, file) = match path.rsplit_once('/') {
        Some((dir, file)) => (Some(dir), file),
        None => (None, path.as_str()),
    };
    if !DOTFILES.contains(&file) {
        return PathBuf::from(&path);
    }
    let dotfile = format!(".{}", &file[1..]);
    match dir {
        Some(dir) => PathBuf::from(format!("{dir}/{dotfile}")),
        None => PathBuf::from(dotfile),
    }
}

/// The commands a rendered template's README gives in its first fenced block (build, test,
/// install): the one place the next steps are written down.
pub fn next_commands(files: &[RenderedFile]) -> Vec<String> {
    let Some(readme) = files
        .iter()
        .find(|file| file.path == Path::new("README.md"))
    else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&readme.contents);
    text.lines()
        .skip_while(|line| !line.trim_start().starts_with("```"))
        .skip(1)
        .take_while(|line| !line.trim_start().starts_with("```"))
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(name: &str, lang: Lang) -> Substitutions {
        Substitutions::new(name, lang, &SdkSource::Carried)
    }

    #[test]
    fn placeholders_are_substituted_in_text() {
        let c = subs("disk-flush", Lang::C);
        assert_eq!(
            c.apply("{{name}} {{name_snake}} {{sdk_docs}} {{sdk_version}} @{{wit_version}}"),
            format!(
                "disk-flush disk_flush vendor/forewarn-sdk/README.md {} @{}",
                carried_sdk::SDK_VERSION,
                forewarn_runtime::wit::latest_version()
            )
        );
    }

    #[test]
    fn each_language_names_the_carried_the_published_or_a_local_sdk() {
        let v = carried_sdk::SDK_VERSION;
        let local = SdkSource::Path(PathBuf::from("/src/forewarn/sdk"));
        let rows = [
            (
                Lang::Rust,
                SdkSource::Carried,
                "forewarn-sdk = { path = \"vendor/forewarn-sdk\" }".to_owned(),
            ),
            (
                Lang::Rust,
                SdkSource::Registry,
                format!("forewarn-sdk = \"{v}\""),
            ),
            (
                Lang::Rust,
                local.clone(),
                "forewarn-sdk = { path = \"/src/forewarn/sdk\" }".to_owned(),
            ),
            (
                Lang::C,
                SdkSource::Carried,
                "FOREWARN_SDK ?= vendor/forewarn-sdk".to_owned(),
            ),
            (
                Lang::C,
                SdkSource::Registry,
                format!(
                    "FOREWARN_SDK ?= $(shell pkg-config --variable=sdkdir 'forewarn-sdk >= {v}')"
                ),
            ),
            (
                Lang::Python,
                SdkSource::Carried,
                "./vendor/forewarn-sdk[test]".to_owned(),
            ),
            (
                Lang::Python,
                SdkSource::Registry,
                format!("forewarn-sdk[test] ~= {v}"),
            ),
            (
                Lang::Python,
                local.clone(),
                "/src/forewarn/sdk[test]".to_owned(),
            ),
            (
                Lang::Js,
                SdkSource::Carried,
                "file:vendor/forewarn-sdk".to_owned(),
            ),
            (Lang::Js, SdkSource::Registry, format!("~{v}")),
            (Lang::Js, local, "file:/src/forewarn/sdk".to_owned()),
        ];
        for (lang, sdk, expected) in rows {
            assert_eq!(
                Substitutions::new("x", lang, &sdk).sdk_dependency,
                expected,
                "{lang} {sdk:?}"
            );
        }
    }

    #[test]
    fn names_are_checked_and_a_fix_suggested() {
        for good in ["a", "disk-flush", "x2", &"a".repeat(NAME_MAX)] {
            assert_eq!(validate_name(good), Ok(()), "{good}");
        }
        let rows = [
            ("", "it is empty", "my-plugin"),
            (
                "Disk_Flush",
                "it does not start with a lower-case letter",
                "disk-flush",
            ),
            ("disk flush", "it contains ` `", "disk-flush"),
            (
                "2fast",
                "it does not start with a lower-case letter",
                "fast",
            ),
            ("disk.flush", "it contains `.`", "disk-flush"),
        ];
        for (name, problem, suggestion) in rows {
            assert_eq!(
                validate_name(name),
                Err(NameError::Invalid {
                    name: name.into(),
                    problem: problem.into(),
                    suggestion: suggestion.into(),
                }),
                "{name}"
            );
        }
        let long = "a".repeat(NAME_MAX + 1);
        let error = validate_name(&long).unwrap_err().to_string();
        assert!(error.contains("it has 49 characters"), "{error}");
        assert_eq!(
            validate_name("Disk_Flush").unwrap_err().to_string(),
            "invalid plugin name `Disk_Flush`: it does not start with a lower-case letter. A name \
             is lower-case kebab-case, starts with a letter and has at most 48 characters \
             (`[a-z][a-z0-9-]*`), e.g. `disk-flush`"
        );
    }

    /// Every template of every language, rendered for `disk-flush` with the carried SDK.
    fn every_template() -> Vec<(Lang, &'static str, Vec<RenderedFile>)> {
        Lang::ALL
            .into_iter()
            .flat_map(|lang| {
                templates(lang).into_iter().map(move |template| {
                    let files = render(lang, template.name, &subs("disk-flush", lang));
                    (lang, template.name, files)
                })
            })
            .collect()
    }

    fn file<'a>(files: &'a [RenderedFile], path: &str) -> Option<&'a RenderedFile> {
        files.iter().find(|file| file.path == Path::new(path))
    }

    #[test]
    fn every_language_has_minimal_first_and_http_drain_each_described() {
        for lang in Lang::ALL {
            let names: Vec<&str> = templates(lang).iter().map(|t| t.name).collect();
            assert_eq!(names, [DEFAULT_TEMPLATE, "http-drain"], "{lang}");
            for template in templates(lang) {
                assert!(
                    !template.description.is_empty() && !template.description.contains('\n'),
                    "{lang} {}: one line in template.txt",
                    template.name
                );
                assert_eq!(find_template(lang, template.name), Ok(template));
            }
        }
    }

    #[test]
    fn an_unknown_template_names_the_languages_templates() {
        let error = find_template(Lang::Python, "http_drain").unwrap_err();
        assert_eq!(
            error.to_string(),
            "there is no python template `http_drain`: the python templates are `minimal` (the \
             default), `http-drain`; `forewarn plugin new --list` describes them"
        );
    }

    #[test]
    fn the_listing_names_each_languages_templates_with_their_descriptions() {
        let listing = listing(None);
        assert!(
            listing.starts_with(
                "The templates of `forewarn plugin new NAME --lang LANG --template TEMPLATE` \
                 (without --template: minimal):\n"
            ),
            "{listing}"
        );
        let mut langs_seen = Vec::new();
        for line in listing.lines().skip(1).filter(|line| !line.is_empty()) {
            match line.strip_prefix("  ") {
                None => langs_seen.push(line.trim_end_matches(':').to_owned()),
                Some(row) => {
                    let lang = Lang::ALL
                        .into_iter()
                        .find(|lang| Some(&lang.as_str().to_owned()) == langs_seen.last())
                        .expect("a row under a language");
                    let (name, description) = row.split_once("  ").expect("name, description");
                    let template = find_template(lang, name).expect("a listed template exists");
                    assert_eq!(description.trim_start(), template.description, "{line}");
                }
            }
        }
        assert_eq!(langs_seen, ["rust", "c", "python", "js"]);
        let rows = listing
            .lines()
            .filter(|line| line.starts_with("  "))
            .count();
        assert_eq!(rows, 8, "{listing}");
        assert!(
            listing.contains("  minimal     Approves every phase"),
            "{listing}"
        );

        let only_c = super::listing(Some(Lang::C));
        assert!(
            only_c.contains("\nc:\n") && !only_c.contains("rust:"),
            "{only_c}"
        );
        assert_eq!(only_c.lines().filter(|l| l.starts_with("  ")).count(), 2);
    }

    #[test]
    fn every_template_is_embedded_and_substitutes_fully() {
        for (lang, template, files) in every_template() {
            assert!(!files.is_empty(), "{lang} {template}: not embedded");
            for file in &files {
                let path = file.path.display().to_string();
                assert!(!path.contains("{{"), "{lang} {template}: {path}");
                assert!(!path.ends_with("_gitignore"), "{lang} {template}: {path}");
                assert_ne!(
                    path, "template.txt",
                    "{lang} {template}: not a project file"
                );
                let text = String::from_utf8_lossy(&file.contents);
                assert!(
                    !text.contains("{{"),
                    "{lang} {template}: {path} keeps a placeholder"
                );
            }
            for path in [
                "README.md",
                ".gitignore",
                "disk-flush.toml",
                ".github/workflows/plugin.yml",
            ] {
                assert!(file(&files, path).is_some(), "{lang} {template}: no {path}");
            }
            let commands = next_commands(&files);
            assert!(
                commands.len() >= 3,
                "{lang} {template}: README has no build/test/install block: {commands:?}"
            );
            assert_eq!(
                commands
                    .last()
                    .and_then(|c| c.split(" #").next())
                    .map(str::trim),
                Some(
                    "sudo install -m 644 disk-flush.wasm disk-flush.toml /etc/forewarn/plugins.d/"
                ),
                "{lang} {template}: {commands:?}"
            );
        }
    }

    #[test]
    fn every_templates_manifest_is_valid_and_grants_what_the_plugin_uses() {
        for (lang, template, files) in every_template() {
            let text = file(&files, "disk-flush.toml")
                .expect("manifest")
                .contents
                .clone();
            let manifest =
                forewarn_manifest::PluginManifest::parse(&String::from_utf8_lossy(&text))
                    .unwrap_or_else(|error| panic!("{lang} {template}: {error}"));
            if template != "http-drain" {
                continue;
            }
            assert!(manifest.capabilities.readiness, "{lang}: readiness granted");
            let Some(forewarn_manifest::ConfigValue::Text(url)) = manifest.config.get("drain-url")
            else {
                panic!("{lang}: no drain-url in [config]");
            };
            let authority = url
                .strip_prefix("http://")
                .and_then(|rest| rest.split('/').next())
                .expect("an http:// URL");
            assert_eq!(
                manifest.capabilities.http,
                [authority],
                "{lang}: the drain-url's host:port is granted"
            );
        }
    }

    /// Files a language's templates share with its `minimal` (the build and the CI set-up),
    /// which must not drift apart.
    const SHARED_WITH_MINIMAL: &[&str] = &[
        "Cargo.toml",
        "Makefile",
        "build.sh",
        "test.sh",
        "requirements.txt",
        "package.json",
        "jsconfig.json",
        ".npmrc",
        ".gitignore",
    ];

    #[test]
    fn templates_share_the_build_files_of_minimal() {
        for (lang, template, files) in every_template() {
            let minimal = render(lang, DEFAULT_TEMPLATE, &subs("disk-flush", lang));
            for path in SHARED_WITH_MINIMAL {
                assert_eq!(
                    file(&files, path).map(|f| &f.contents),
                    file(&minimal, path).map(|f| &f.contents),
                    "{lang} {template}: {path} differs from minimal's"
                );
            }
        }
    }

    #[test]
    fn gitignore_is_renamed_and_names_are_substituted() {
        let subs = subs("disk-flush", Lang::Rust);
        let rows = [
            ("{{name}}.toml", ".gitignore"),
            ("src/{{name_snake}}.rs", "src/disk_flush.rs"),
            ("_gitignore", ".gitignore"),
            ("tests/_gitignore", "tests/.gitignore"),
            ("_npmrc", ".npmrc"),
            ("my_gitignore", "my_gitignore"),
        ];
        for (raw, expected) in rows {
            let expected = if raw.starts_with("{{name}}") {
                "disk-flush.toml"
            } else {
                expected
            };
            assert_eq!(output_path(raw, &subs), PathBuf::from(expected), "{raw}");
        }
    }

    #[test]
    fn every_template_has_a_ci_workflow_that_builds_tests_and_plays_every_scenario() {
        use yaml_rust2::YamlLoader;
        for (lang, template, files) in every_template() {
            let lang = format!("{lang} {template}");
            let workflow = files
                .iter()
                .find(|file| file.path == Path::new(".github/workflows/plugin.yml"))
                .unwrap_or_else(|| panic!("{lang}: no .github/workflows/plugin.yml"));
            let text = String::from_utf8_lossy(&workflow.contents);
            let docs = YamlLoader::load_from_str(&text)
                .unwrap_or_else(|error| panic!("{lang}: the workflow is not YAML: {error}"));
            let steps = docs[0]["jobs"]["build-and-test"]["steps"]
                .as_vec()
                .unwrap_or_else(|| panic!("{lang}: no jobs.build-and-test.steps"));
            let runs: Vec<&str> = steps
                .iter()
                .filter_map(|step| step["run"].as_str())
                .collect();
            // The README's own set-up, build and test commands, as the workflow runs them.
            for command in next_commands(&files) {
                let command = command.split(" #").next().unwrap_or_default().trim();
                if command.starts_with("sudo install") {
                    continue;
                }
                assert!(
                    runs.iter().any(|run| run.trim() == command),
                    "{lang}: the workflow does not run `{command}`: {runs:?}"
                );
            }
            for expected in [
                "forewarn plugin test disk-flush.wasm --manifest disk-flush.toml --all-scenarios",
                "sudo apt-get install -y ./forewarn.deb",
            ] {
                assert!(
                    runs.iter().any(|run| run.contains(expected)),
                    "{lang}: the workflow does not run `{expected}`"
                );
            }
            if template == "http-drain" {
                // The scenarios need something answering at drain-url: the stand-in, first.
                let position = |text: &str| runs.iter().position(|run| run.contains(text));
                let stand_in = position("python3 drain-stand-in.py");
                assert!(
                    stand_in.is_some() && stand_in < position("--all-scenarios"),
                    "{lang}: the stand-in starts before the scenarios: {runs:?}"
                );
                assert!(file(&files, "drain-stand-in.py").is_some(), "{lang}");
            }
            let readme = files
                .iter()
                .find(|file| file.path == Path::new("README.md"))
                .expect("README");
            let readme = String::from_utf8_lossy(&readme.contents);
            assert!(
                readme.contains("## CI") && readme.contains("It assumes"),
                "{lang}: the README says not what the workflow assumes"
            );
        }
    }

    #[test]
    fn next_commands_are_read_from_the_first_fenced_block() {
        let readme = RenderedFile {
            path: "README.md".into(),
            contents: b"# x\n\n```sh\nmake\n\nmake test\n```\n\n```\nnot this\n```\n".to_vec(),
        };
        assert_eq!(next_commands(&[readme]), ["make", "make test"]);
    }
}
