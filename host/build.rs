//! Compiles the bundled plugins (plugins/*) into wasm components and writes, in OUT_DIR,
//! `bundled.rs` (a path constant per plugin) and `bundled_wasm.rs` (its bytes, embedded);
//! and embeds the plugin templates (sdk/templates/<lang>/<template>/) as `templates.rs` and the plugin SDKs as
//! packaged (sdk/, sdk/c, sdk/python, sdk/js) as `sdk_files.rs`; in release builds,
//! asks the linker to lay out the daemon's start-up and idle code first (link/).

use std::path::PathBuf;

/// The packages of the plugins shipped inside the forewarn binary (their plugin names are in
/// `src/plugins/bundled.rs`).
const BUNDLED: &[&str] = &[
    "lb-drain",
    "checkpoint",
    "graceful-shutdown",
    "notify-plugin",
];

fn main() {
    let built = forewarn_wasm_build::build_components(BUNDLED);
    let out_dir =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR for build scripts"));
    forewarn_wasm_build::write_constants(&out_dir.join("bundled.rs"), &built);
    forewarn_wasm_build::write_embedded(&out_dir.join("bundled_wasm.rs"), &built);
    templates::embed(&out_dir);
    carried_sdks::embed(&out_dir);
    startup_code_order::apply();
}

/// The release link of `forewarn` places the functions the daemon runs at start and while
/// idle (link/startup-symbols.txt, recorded by link/record-startup-code.sh) next to each
/// other, so the idle daemon keeps fewer pages of its own code resident: the kernel maps
/// code around each page a process touches, and code laid out by crate spreads a few hot
/// functions over many pages. A list that is out of date costs memory, never correctness.
mod startup_code_order {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// Set to skip the ordering (to measure without it, or for a linker it confuses).
    const OPT_OUT: &str = "FOREWARN_NO_STARTUP_ORDER";
    /// The target whose default linker (Rust's bundled lld) takes a symbol ordering file.
    const LLD_TARGET: &str = "x86_64-unknown-linux-gnu";
    /// Flags with which a build chooses its own linker; the ordering is then left out.
    const OWN_LINKER_FLAGS: &[&str] = &["fuse-ld", "linker=", "linker-flavor", "linker-features"];

    pub(crate) fn apply() {
        let manifest_dir = PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
        );
        let symbols = manifest_dir.join("link/startup-symbols.txt");
        println!("cargo:rerun-if-changed={}", symbols.display());
        for variable in [OPT_OUT, "RUSTC_LINKER", "CARGO_ENCODED_RUSTFLAGS"] {
            println!("cargo:rerun-if-env-changed={variable}");
        }
        let release = std::env::var("PROFILE").is_ok_and(|profile| profile == "release");
        let lld_target = std::env::var("TARGET").is_ok_and(|target| target == LLD_TARGET);
        if !release || !lld_target || std::env::var_os(OPT_OUT).is_some() || !symbols.exists() {
            return;
        }
        if chooses_own_linker() || !toolchain_links_with_lld() {
            println!(
                "cargo:warning=the release binary is linked without the start-up code order \
                 (another linker than the toolchain's lld): it works the same, with about 3 MiB \
                 more resident code; set {OPT_OUT}=1 to silence this"
            );
            return;
        }
        // `-Xlinker` passes the path as it is (`-Wl,` would split it at commas).
        let ordering = format!("--symbol-ordering-file={}", symbols.display());
        for arg in [
            "-Xlinker",
            &ordering,
            "-Xlinker",
            "--no-warn-symbol-ordering",
        ] {
            // Symbols of the list that this build does not have (renamed, inlined) are skipped.
            println!("cargo:rustc-link-arg-bin=forewarn={arg}");
        }
    }

    /// Whether the build picks its linker itself (RUSTFLAGS, a configured linker).
    fn chooses_own_linker() -> bool {
        if std::env::var_os("RUSTC_LINKER").is_some() {
            return true;
        }
        let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
        flags
            .split('\x1f')
            .any(|flag| OWN_LINKER_FLAGS.iter().any(|own| flag.contains(own)))
    }

    /// Whether the compiler's sysroot has the self-contained lld it links with by default
    /// (rustup's toolchains do; a distribution's rustc may link with the system's linker).
    fn toolchain_links_with_lld() -> bool {
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let Ok(output) = Command::new(rustc).args(["--print", "sysroot"]).output() else {
            return false;
        };
        let sysroot = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        Path::new(&sysroot)
            .join("lib/rustlib")
            .join(LLD_TARGET)
            .join("bin/gcc-ld/ld.lld")
            .exists()
    }
}

/// The plugin templates `forewarn plugin new` writes (sdk/templates/<lang>/<template>/),
/// embedded in OUT_DIR/templates.rs as two tables: `TEMPLATE_FILES`, `(lang, template, path
/// inside the template, bytes)`, and `TEMPLATES`, `(lang, template, description)` with the
/// one line of the template's `template.txt` (which is not a file of the project).
mod templates {
    use std::path::{Path, PathBuf};

    use crate::embedded_files;

    /// The template languages, in the order `--lang` lists them.
    const LANGS: &[&str] = &["rust", "c", "python", "js"];
    /// The template `plugin new` writes without `--template`, listed first.
    const DEFAULT: &str = "minimal";
    /// The file of a template folder that describes it (`plugin new --list`).
    const DESCRIPTION: &str = "template.txt";

    pub(crate) fn embed(out_dir: &Path) {
        let manifest_dir = PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
        );
        let root = manifest_dir.join("../sdk/templates");
        println!("cargo:rerun-if-changed={}", root.display());
        let mut files_table =
            String::from("pub(crate) const TEMPLATE_FILES: &[(&str, &str, &str, &[u8])] = &[\n");
        let mut templates_table =
            String::from("pub(crate) const TEMPLATES: &[(&str, &str, &str)] = &[\n");
        for lang in LANGS {
            for template in template_names(&root.join(lang)) {
                let dir = root.join(lang).join(&template);
                let description = dir.join(DESCRIPTION);
                assert!(
                    description.is_file(),
                    "sdk/templates/{lang}/{template}/{DESCRIPTION} is missing: each template \
                     has a one-line description for `plugin new --list`"
                );
                templates_table.push_str(&format!(
                    "    ({lang:?}, {template:?}, include_str!({:?})),\n",
                    description.display().to_string()
                ));
                let mut files = Vec::new();
                embedded_files::collect(&dir, Path::new(""), &mut files);
                files.retain(|(relative, _)| relative != DESCRIPTION);
                embedded_files::write_rows(&mut files_table, &[lang, &template], files);
            }
        }
        files_table.push_str("];\n");
        templates_table.push_str("];\n");
        std::fs::write(
            out_dir.join("templates.rs"),
            files_table + "\n" + &templates_table,
        )
        .expect("write templates.rs");
    }

    /// The template folders of one language: the default first, then by name.
    fn template_names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| entry.path().is_dir())
            .filter_map(|entry| entry.file_name().to_str().map(str::to_owned))
            .collect();
        names.sort_by_key(|name| (name != DEFAULT, name.clone()));
        names
    }
}

/// The plugin SDKs the binary carries (`forewarn sdk export`, `forewarn plugin new`): each the
/// files of its registry package, embedded as a table in OUT_DIR/sdk_files.rs:
/// `(lang, path inside the package, bytes)`, and the SDK's version (sdk/Cargo.toml) as the
/// environment variable FOREWARN_SDK_VERSION.
mod carried_sdks {
    use std::path::{Path, PathBuf};

    use crate::embedded_files;

    /// Per language: the package's folder under sdk/, and its files and folders (folders are
    /// taken whole). The registry tooling run on what the binary writes out
    /// (host/tests/e2e_sdk_packages.rs) proves each list makes a complete package.
    const PACKAGES: &[(&str, &str, &[&str])] = &[
        (
            "rust",
            "",
            &[
                "Cargo.toml",
                "README.md",
                "src",
                "wit",
                "examples/notice.rs",
            ],
        ),
        (
            "c",
            "c",
            &[
                "README.md",
                "forewarn.h",
                "forewarn.c",
                "testing.h",
                "testing.c",
                "generated",
                "forewarn-sdk.mk",
                "forewarn-sdk.pc",
            ],
        ),
        (
            "python",
            "python",
            &[
                "pyproject.toml",
                "README.md",
                "forewarn/__init__.py",
                "forewarn/_native.py",
                "forewarn/testing.py",
                "forewarn/build.py",
                "forewarn/wit",
            ],
        ),
        (
            "js",
            "js",
            &[
                "package.json",
                "README.md",
                "forewarn.js",
                "forewarn.d.ts",
                "warm-up.js",
                "testing.js",
                "testing",
                "build.mjs",
                "wit",
            ],
        ),
    ];

    pub(crate) fn embed(out_dir: &Path) {
        let manifest_dir = PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
        );
        let sdk = manifest_dir.join("../sdk");
        let mut table = String::from("pub(crate) const SDK_FILES: &[(&str, &str, &[u8])] = &[\n");
        for (lang, folder, entries) in PACKAGES {
            let root = sdk.join(folder);
            let mut files = Vec::new();
            for entry in *entries {
                let path = root.join(entry);
                println!("cargo:rerun-if-changed={}", path.display());
                if path.is_dir() {
                    embedded_files::collect(&path, Path::new(entry), &mut files);
                } else if path.is_file() {
                    files.push((entry.to_string(), path.display().to_string()));
                } else {
                    panic!("sdk/{folder}/{entry} is missing: the {lang} SDK's package lists it");
                }
            }
            embedded_files::write_rows(&mut table, &[lang], files);
        }
        table.push_str("];\n");
        std::fs::write(out_dir.join("sdk_files.rs"), table).expect("write sdk_files.rs");
        let cargo_toml =
            std::fs::read_to_string(sdk.join("Cargo.toml")).expect("read sdk/Cargo.toml");
        let version = cargo_toml
            .lines()
            .find_map(|line| line.strip_prefix("version = \""))
            .and_then(|rest| rest.strip_suffix('"'))
            .expect("sdk/Cargo.toml has a `version = \"...\"` line");
        println!("cargo:rustc-env=FOREWARN_SDK_VERSION={version}");
    }
}

/// The files `templates` and `carried_sdks` embed, as rows of a `(lang, path, bytes)` table.
mod embedded_files {
    use std::fmt::Write;
    use std::path::Path;

    /// Folders that are build output or caches, never part of a template or a package.
    const SKIPPED: &[&str] = &["target", "node_modules", "__pycache__", ".venv"];

    /// Every file under `dir`, as (path relative to it with `/`, prefixed by `relative`;
    /// absolute path).
    pub(crate) fn collect(dir: &Path, relative: &Path, files: &mut Vec<(String, String)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let inner = relative.join(&name);
            if path.is_dir() {
                if !name.to_str().is_some_and(|name| SKIPPED.contains(&name)) {
                    collect(&path, &inner, files);
                }
            } else if let (Some(inner), Some(absolute)) = (inner.to_str(), path.to_str()) {
                files.push((inner.replace('\\', "/"), absolute.to_owned()));
            }
        }
    }

    /// Appends one row per file, sorted by path, to the table's source: the `keys` (the
    /// language, and the template), the path, the bytes.
    pub(crate) fn write_rows(table: &mut String, keys: &[&str], mut files: Vec<(String, String)>) {
        files.sort();
        let keys: String = keys.iter().map(|key| format!("{key:?}, ")).collect();
        for (relative, absolute) in files {
            let _ = writeln!(
                table,
                "    ({keys}{relative:?}, include_bytes!({absolute:?})),"
            );
        }
    }
}
