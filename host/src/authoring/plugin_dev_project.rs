//! The plugin project `forewarn plugin dev` works on: its folder, the plugin's name (its
//! `NAME.toml`), its language (from the files `plugin new` wrote), the language's own build
//! command, and which changed files are sources (not build output) worth a rebuild.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use crate::authoring::languages::Lang;

/// Files a build writes beside the sources (a lock file cargo creates on the first build).
const BUILD_WRITES: &[&str] = &["Cargo.lock"];

/// Manifests of the languages' own tools, never a plugin's manifest.
const TOOL_MANIFESTS: &[&str] = &["Cargo.toml", "pyproject.toml"];

/// Folders of build output, dependencies and tools: a change in them is no edit.
const NOT_SOURCES: &[&str] = &[
    "target",
    "node_modules",
    "vendor",
    "venv",
    "build",
    "dist",
    "__pycache__",
    "wasm-build",
];

/// How many lines of a failed build's output are shown (the whole is in the build log).
const SHOWN_LINES: usize = 12;

/// Why a folder is not a plugin project `plugin dev` can work on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProjectError {
    /// No `NAME.toml`, or several.
    #[error(
        "{dir}: {problem}. `plugin dev` runs in a plugin project's folder (the one `forewarn \
         plugin new NAME --lang LANG` wrote, with NAME.toml in it): cd there, or pass the \
         folder as the argument"
    )]
    NoManifest {
        /// The folder.
        dir: String,
        /// What was found instead.
        problem: String,
    },
    /// None of the languages' build files.
    #[error(
        "{dir}: cannot tell the project's language (none of Cargo.toml, Makefile, build.sh, \
         package.json): pass the build command with `--build \"COMMAND\"` (it must write \
         {name}.wasm into the folder)"
    )]
    UnknownLanguage {
        /// The folder.
        dir: String,
        /// The plugin's name.
        name: String,
    },
    /// The folder cannot be read.
    #[error("cannot read {dir}: {source}; pass a plugin project's folder")]
    Unreadable {
        /// The folder.
        dir: String,
        /// Why.
        source: std::io::Error,
    },
}

/// A plugin project on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DevProject {
    /// The project folder (absolute).
    pub(crate) dir: PathBuf,
    /// The plugin's name: the stem of its manifest.
    pub(crate) name: String,
    /// Its language, when its files tell it.
    pub(crate) lang: Option<Lang>,
}

impl DevProject {
    /// The project in `dir`: its one `NAME.toml` besides the tools' own manifests, and the
    /// language its build files tell. `build_given`: the author names the build command, so an
    /// unknown language is no error.
    pub(crate) fn find(dir: &Path, build_given: bool) -> Result<DevProject, ProjectError> {
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        let shown = dir.display().to_string();
        let entries = std::fs::read_dir(&dir).map_err(|source| ProjectError::Unreadable {
            dir: shown.clone(),
            source,
        })?;
        let mut manifests: Vec<String> = entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str().map(str::to_owned))
            .filter(|file| file.ends_with(".toml") && !TOOL_MANIFESTS.contains(&file.as_str()))
            .collect();
        manifests.sort();
        let name = match manifests.as_slice() {
            [one] => one.trim_end_matches(".toml").to_owned(),
            [] => {
                return Err(ProjectError::NoManifest {
                    dir: shown,
                    problem: "no NAME.toml in it".into(),
                });
            }
            several => {
                return Err(ProjectError::NoManifest {
                    dir: shown,
                    problem: format!(
                        "several manifests ({}); keep the plugin's NAME.toml only",
                        several.join(", ")
                    ),
                });
            }
        };
        let lang = lang_of(&dir);
        if lang.is_none() && !build_given {
            return Err(ProjectError::UnknownLanguage { dir: shown, name });
        }
        Ok(DevProject { dir, name, lang })
    }

    /// The component the build writes: `NAME.wasm` in the project folder.
    pub(crate) fn wasm(&self) -> PathBuf {
        self.dir.join(format!("{}.wasm", self.name))
    }

    /// The plugin's manifest.
    pub(crate) fn manifest(&self) -> PathBuf {
        self.dir.join(format!("{}.toml", self.name))
    }

    /// The build the project's README gives, or `given` (`--build`).
    pub(crate) fn build(&self, given: Option<&str>) -> Build {
        if let Some(command) = given {
            return Build::Shell(command.to_owned());
        }
        match self.lang {
            Some(Lang::Rust) => Build::Cargo {
                built: self.dir.join(format!(
                    "target/wasm32-wasip2/release/{}.wasm",
                    self.name.replace('-', "_")
                )),
            },
            Some(Lang::C) => Build::Program("make", Vec::new()),
            Some(Lang::Python) => Build::Program("./build.sh", Vec::new()),
            Some(Lang::Js) => Build::Program("npm", vec!["run", "build"]),
            // `find` refuses a project without a language unless a build was given.
            None => Build::Shell("false".to_owned()),
        }
    }

    /// Whether a change of `path` is an edit of the project's sources: a file in the
    /// project outside its build output, dependencies and tools, not hidden, not an editor's
    /// temporary file and not the built component.
    pub(crate) fn is_source_change(&self, path: &Path) -> bool {
        let Ok(relative) = path.strip_prefix(&self.dir) else {
            return false;
        };
        let mut parts = relative.components().peekable();
        while let Some(part) = parts.next() {
            let part = part.as_os_str().to_string_lossy();
            if part.starts_with('.') || part.starts_with('#') {
                return false;
            }
            let is_file = parts.peek().is_none();
            if !is_file && NOT_SOURCES.contains(&part.as_ref()) {
                return false;
            }
            if is_file {
                return !(BUILD_WRITES.contains(&part.as_ref())
                    || part.ends_with('~')
                    || part.ends_with(".swp")
                    || part.ends_with(".tmp")
                    || part.ends_with(".wasm")
                    || part.ends_with(".o")
                    || part.ends_with(".pyc"));
            }
        }
        false
    }
}

impl DevProject {
    /// What the sources are now: each source file's path, size and modification time. Two
    /// equal fingerprints mean no edit (a build that touched only its own output, or wrote
    /// a temporary file and removed it).
    pub(crate) fn fingerprint(&self) -> Fingerprint {
        let mut files = Vec::new();
        self.collect_sources(&self.dir, &mut files);
        files.sort();
        Fingerprint(files)
    }

    fn collect_sources(&self, dir: &Path, files: &mut Vec<(PathBuf, u64, Option<SystemTime>)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            if metadata.is_dir() {
                // A folder is walked when a file in it could be a source.
                if self.is_source_change(&path.join("x")) {
                    self.collect_sources(&path, files);
                }
            } else if self.is_source_change(&path) {
                files.push((path, metadata.len(), metadata.modified().ok()));
            }
        }
    }
}

/// The project's source files with their sizes and modification times ([`DevProject::fingerprint`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fingerprint(Vec<(PathBuf, u64, Option<SystemTime>)>);

impl Fingerprint {
    /// The source files added, changed or removed since `before`, sorted.
    pub(crate) fn changed_since(&self, before: &Fingerprint) -> Vec<PathBuf> {
        let mut changed: Vec<PathBuf> = self
            .0
            .iter()
            .filter(|file| !before.0.contains(file))
            .chain(
                before
                    .0
                    .iter()
                    .filter(|file| !self.0.iter().any(|now| now.0 == file.0)),
            )
            .map(|(path, _, _)| path.clone())
            .collect();
        changed.sort();
        changed.dedup();
        changed
    }
}

/// The language the files of `dir` tell, as `plugin new` writes them.
fn lang_of(dir: &Path) -> Option<Lang> {
    let has = |file: &str| dir.join(file).is_file();
    if has("Cargo.toml") {
        Some(Lang::Rust)
    } else if has("package.json") {
        Some(Lang::Js)
    } else if has("build.sh") {
        Some(Lang::Python)
    } else if has("Makefile") {
        Some(Lang::C)
    } else {
        None
    }
}

/// A project's build command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Build {
    /// `cargo build --release --target wasm32-wasip2`, then the component copied to NAME.wasm.
    Cargo {
        /// Where cargo writes the component.
        built: PathBuf,
    },
    /// A program of the project's language (`make`, `./build.sh`, `npm run build`).
    Program(&'static str, Vec<&'static str>),
    /// The author's command (`--build`), run by the platform's shell.
    Shell(String),
}

/// How a build went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BuildOutcome {
    /// Whether it succeeded (and NAME.wasm is there).
    pub(crate) succeeded: bool,
    /// How long it took.
    pub(crate) took: Duration,
    /// What to show when it failed: the lines that name the problem.
    pub(crate) summary: Vec<String>,
}

impl Build {
    /// The command as the author would type it.
    pub(crate) fn describe(&self) -> String {
        match self {
            Build::Cargo { .. } => "cargo build --release --target wasm32-wasip2".to_owned(),
            Build::Program(program, args) => std::iter::once(*program)
                .chain(args.iter().copied())
                .collect::<Vec<_>>()
                .join(" "),
            Build::Shell(command) => command.clone(),
        }
    }

    /// Runs the build in `project`'s folder, its whole output into `log`; NAME.wasm is
    /// there when it succeeded.
    pub(crate) fn run(&self, project: &DevProject, log: &Path) -> std::io::Result<BuildOutcome> {
        let started = Instant::now();
        let mut command = match self {
            Build::Cargo { .. } => {
                let mut command = Command::new("cargo");
                command.args(["build", "--release", "--target", "wasm32-wasip2"]);
                command
            }
            Build::Program(program, args) => {
                let mut command = Command::new(program);
                command.args(args);
                command
            }
            Build::Shell(line) => crate::authoring::author_shell::command(line),
        };
        let output = command.current_dir(&project.dir).output()?;
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        std::fs::write(log, &text)?;
        let mut succeeded = output.status.success();
        if let (true, Build::Cargo { built }) = (succeeded, self) {
            succeeded = std::fs::copy(built, project.wasm()).is_ok();
        }
        let mut summary = match succeeded {
            true => Vec::new(),
            false => summarise(&text),
        };
        if succeeded && !project.wasm().is_file() {
            succeeded = false;
            summary.push(format!(
                "the build succeeded but wrote no {}.wasm into {}: the build command must write it there",
                project.name,
                project.dir.display()
            ));
        }
        Ok(BuildOutcome {
            succeeded,
            took: started.elapsed(),
            summary,
        })
    }
}

/// The lines of a failed build's output that name the problem: those with `error` (each
/// with the line after it, where compilers put the location), else the last lines.
pub(crate) fn summarise(output: &str) -> Vec<String> {
    let lines: Vec<&str> = output.lines().collect();
    let mut shown = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if shown.len() >= SHOWN_LINES {
            break;
        }
        if line.to_ascii_lowercase().contains("error") {
            shown.push((*line).to_owned());
            if let Some(next) = lines
                .get(index + 1)
                .filter(|next| next.trim_start().starts_with("-->"))
            {
                shown.push((*next).to_owned());
            }
        }
    }
    if shown.is_empty() {
        let start = lines.len().saturating_sub(SHOWN_LINES);
        shown = lines[start..]
            .iter()
            .map(|line| (*line).to_owned())
            .collect();
    }
    shown.dedup();
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(files: &[&str]) -> (tempfile::TempDir, Result<DevProject, ProjectError>) {
        let dir = tempfile::tempdir().unwrap();
        for file in files {
            std::fs::write(dir.path().join(file), "").unwrap();
        }
        let found = DevProject::find(dir.path(), false);
        (dir, found)
    }

    #[test]
    fn finds_the_plugin_manifest_and_the_language_of_each_template() {
        for (files, lang) in [
            (&["Cargo.toml", "hello.toml"][..], Lang::Rust),
            (&["Makefile", "hello.toml"][..], Lang::C),
            (
                &["build.sh", "requirements.txt", "hello.toml"][..],
                Lang::Python,
            ),
            (&["package.json", "hello.toml"][..], Lang::Js),
        ] {
            let (dir, found) = project(files);
            let found = found.unwrap();
            assert_eq!(found.name, "hello");
            assert_eq!(found.lang, Some(lang));
            assert_eq!(found.wasm(), dir.path().join("hello.wasm"));
        }
    }

    #[test]
    fn a_folder_without_one_manifest_or_a_language_names_the_fix() {
        let (_dir, found) = project(&["Cargo.toml"]);
        let text = found.unwrap_err().to_string();
        assert!(
            text.contains("no NAME.toml") && text.contains("plugin new"),
            "{text}"
        );
        let (_dir, found) = project(&["Cargo.toml", "a.toml", "b.toml"]);
        let text = found.unwrap_err().to_string();
        assert!(
            text.contains("several manifests (a.toml, b.toml)"),
            "{text}"
        );
        let (dir, found) = project(&["hello.toml"]);
        let text = found.unwrap_err().to_string();
        assert!(text.contains("--build"), "{text}");
        assert!(DevProject::find(dir.path(), true).is_ok());
    }

    #[test]
    fn sources_are_edits_and_build_output_is_not() {
        let (dir, found) = project(&["Cargo.toml", "hello.toml"]);
        let found = found.unwrap();
        let at = |path: &str| found.is_source_change(&dir.path().join(path));
        assert!(at("src/lib.rs"));
        assert!(at("hello.toml"));
        assert!(at("hello.py"));
        for not in [
            "hello.wasm",
            "target/release/x.rs",
            "node_modules/a/index.js",
            "vendor/forewarn-sdk/src/lib.rs",
            ".git/index",
            "src/.lib.rs.swp",
            "src/lib.rs~",
            "__pycache__/x.pyc",
        ] {
            assert!(!at(not), "{not}");
        }
        assert!(!found.is_source_change(Path::new("/elsewhere/src/lib.rs")));
    }

    #[test]
    fn the_fingerprint_changes_with_a_source_and_not_with_build_output() {
        let (dir, found) = project(&["Cargo.toml", "hello.toml"]);
        let found = found.unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::create_dir_all(dir.path().join("target/release")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "one").unwrap();
        let before = found.fingerprint();
        std::fs::write(dir.path().join("hello.wasm"), "built").unwrap();
        std::fs::write(dir.path().join("target/release/out"), "built").unwrap();
        assert_eq!(found.fingerprint(), before);
        std::fs::write(dir.path().join("Cargo.lock"), "locked").unwrap();
        assert_eq!(found.fingerprint(), before);
        std::fs::write(dir.path().join("src/lib.rs"), "two, longer").unwrap();
        std::fs::write(dir.path().join("src/new.rs"), "new").unwrap();
        assert_eq!(
            found.fingerprint().changed_since(&before),
            [dir.path().join("src/lib.rs"), dir.path().join("src/new.rs")]
        );
    }

    #[test]
    fn a_failed_build_is_summarised_to_its_error_lines() {
        let output = "   Compiling hello v0.1.0\nerror[E0425]: cannot find value `x`\n  --> src/lib.rs:3:5\n  |\nerror: could not compile `hello`\n";
        assert_eq!(
            summarise(output),
            [
                "error[E0425]: cannot find value `x`",
                "  --> src/lib.rs:3:5",
                "error: could not compile `hello`"
            ]
        );
        let quiet: String = (1..=20).map(|n| format!("line {n}\n")).collect();
        let shown = summarise(&quiet);
        assert_eq!(shown.len(), SHOWN_LINES);
        assert_eq!(shown.last().map(String::as_str), Some("line 20"));
    }
}
