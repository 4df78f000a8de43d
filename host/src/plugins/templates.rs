//! The plugin templates embedded in the binary (sdk/templates/<lang>/) and how `plugin new`
//! turns one into files: the name checked, placeholders substituted in contents and names.

use std::fmt;
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/templates.rs"));

/// Longest plugin name `plugin new` accepts.
pub const NAME_MAX: usize = 48;

/// A template's language, as `--lang` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// A Rust crate using forewarn-sdk.
    Rust,
    /// C with wit-bindgen's C output and sdk/c.
    C,
    /// Python with componentize-py and sdk/python.
    Python,
    /// JavaScript with jco and sdk/js.
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

    /// The SDK directory of this language inside the repository's `sdk/`.
    fn sdk_subdir(self) -> Option<&'static str> {
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

/// The values of a template's placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Substitutions {
    /// `{{name}}`.
    pub name: String,
    /// `{{sdk_dir}}`: the language's SDK directory, absolute.
    pub sdk_dir: String,
    /// `{{wit_version}}`.
    pub wit_version: String,
}

impl Substitutions {
    /// The placeholders for a plugin `name` in `lang`, with the repository's `sdk/` at `sdk`.
    pub fn new(name: &str, lang: Lang, sdk: &std::path::Path) -> Self {
        let sdk_dir = match lang.sdk_subdir() {
            Some(sub) => sdk.join(sub),
            None => sdk.to_path_buf(),
        };
        Substitutions {
            name: name.to_owned(),
            sdk_dir: sdk_dir.display().to_string(),
            wit_version: forewarn_runtime::wit::latest_version(),
        }
    }

    /// `text` with every placeholder replaced.
    pub fn apply(&self, text: &str) -> String {
        text.replace("{{name}}", &self.name)
            .replace("{{name_snake}}", &self.name.replace('-', "_"))
            .replace("{{sdk_dir}}", &self.sdk_dir)
            .replace("{{wit_version}}", &self.wit_version)
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

/// The template of `lang` with `subs` applied: names and contents; `_gitignore` becomes
/// `.gitignore`. Empty when the binary was built without that template.
pub fn render(lang: Lang, subs: &Substitutions) -> Vec<RenderedFile> {
    TEMPLATE_FILES
        .iter()
        .filter(|(file_lang, _, _)| *file_lang == lang.as_str())
        .map(|(_, path, bytes)| RenderedFile {
            path: output_path(path, subs),
            contents: match std::str::from_utf8(bytes) {
                Ok(text) => subs.apply(text).into_bytes(),
                Err(_) => bytes.to_vec(),
            },
        })
        .collect()
}

/// Where a template file goes: placeholders substituted, `_gitignore` named `.gitignore`.
fn output_path(path: &str, subs: &Substitutions) -> PathBuf {
    let path = subs.apply(path);
    match path.rsplit_once('/') {
        Some((dir, "_gitignore")) => PathBuf::from(format!("{dir}/.gitignore")),
        None if path == "_gitignore" => PathBuf::from(".gitignore"),
        _ => PathBuf::from(path),
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
        Substitutions::new(name, lang, std::path::Path::new("/opt/forewarn/sdk"))
    }

    #[test]
    fn placeholders_are_substituted_in_text() {
        let c = subs("disk-flush", Lang::C);
        assert_eq!(
            c.apply("{{name}} {{name_snake}} {{sdk_dir}} @{{wit_version}}"),
            format!(
                "disk-flush disk_flush /opt/forewarn/sdk/c @{}",
                forewarn_runtime::wit::latest_version()
            )
        );
        assert_eq!(
            subs("x", Lang::Rust).sdk_dir,
            "/opt/forewarn/sdk",
            "rust's sdk_dir is the sdk/ crate itself"
        );
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

    #[test]
    fn every_language_is_embedded_and_substitutes_fully() {
        for lang in Lang::ALL {
            let files = render(lang, &subs("disk-flush", lang));
            assert!(!files.is_empty(), "{lang}: no template embedded");
            for file in &files {
                let path = file.path.display().to_string();
                assert!(!path.contains("{{"), "{lang}: {path}");
                assert!(!path.ends_with("_gitignore"), "{lang}: {path}");
                let text = String::from_utf8_lossy(&file.contents);
                assert!(!text.contains("{{"), "{lang}: {path} keeps a placeholder");
            }
            let commands = next_commands(&files);
            assert!(
                commands.len() >= 3,
                "{lang}: README has no build/test/install block: {commands:?}"
            );
            assert!(
                commands
                    .iter()
                    .any(|c| c.contains("/etc/forewarn/plugins.d/")),
                "{lang}: {commands:?}"
            );
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
    fn next_commands_are_read_from_the_first_fenced_block() {
        let readme = RenderedFile {
            path: "README.md".into(),
            contents: b"# x\n\n```sh\nmake\n\nmake test\n```\n\n```\nnot this\n```\n".to_vec(),
        };
        assert_eq!(next_commands(&[readme]), ["make", "make test"]);
    }
}
