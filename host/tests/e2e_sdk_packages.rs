//! Each SDK the binary carries is a package its registry's own tooling accepts, and what it
//! packs builds a plugin outside this repository: `forewarn sdk export DIR --lang LANG` writes
//! it (what a release publishes), then
//! - Rust: `cargo publish --dry-run` (packages it, WIT inside, and builds the package alone);
//! - Python: `pip wheel` and `python -m build` make a wheel and an sdist; each installs into a
//!   fresh venv, whose `forewarn-build-py` builds a plugin with componentize-py;
//! - JavaScript: `npm pack` makes a tarball that installs into an empty project, whose
//!   `forewarn-build-js` builds a plugin with componentize-js;
//! - C: the folder as a tarball, unpacked elsewhere, found through its pkg-config file by a
//!   Makefile that includes its forewarn-sdk.mk: clang and wasi-libc build a plugin, gcc runs
//!   the native tests.
//!
//! Every plugin built is accepted by `forewarn plugin check`. Nothing is published. The
//! toolchains come from `tests/install-language-toolchains.sh` and the registries.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use forewarn_test_support::forewarn_binary;

fn repo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn describe(output: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Runs `command`; panics with its output and `fix` when it fails.
fn run(command: &mut Command, fix: &str) -> Output {
    let started = Instant::now();
    let shown = format!("{command:?}");
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("cannot run {shown}: {error}. {fix}"));
    assert!(
        output.status.success(),
        "{shown} failed. {fix}\n{}",
        describe(&output)
    );
    eprintln!("{shown}: {:.1} s", started.elapsed().as_secs_f64());
    output
}

/// `forewarn sdk export DIR --lang LANG` into `dir`.
fn export(lang: &str, dir: &Path) {
    run(
        Command::new(forewarn_binary!())
            .args(["sdk", "export"])
            .arg(dir)
            .args(["--lang", lang]),
        "",
    );
}

/// `forewarn plugin check` accepts `wasm`.
fn assert_plugin_check_passes(wasm: &Path) {
    let output = run(
        Command::new(forewarn_binary!())
            .args(["plugin", "check"])
            .arg(wasm),
        "",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("a valid forewarn plugin"), "{stdout}");
}

const PLUGIN_PY: &str = "from forewarn import approve, log\n\n\ndef on_event(event, phase, ctx):\n    log.info(f\"{phase} {event.id}\")\n    return approve()\n";

const PLUGIN_JS: &str = "import { approve, log } from 'forewarn';\n\nexport function onEvent(event, phase) {\n  log.info(`${phase} ${event.id}`);\n  return approve();\n}\n";

const PLUGIN_C: &str = "#include \"forewarn.h\"\n\nfw_decision fw_on_event(const fw_event *event, fw_phase phase, const fw_context *ctx) {\n    fw_info(\"phase %d\", (int)phase);\n    return fw_approve();\n}\n";

const TEST_C: &str = "#include \"testing.h\"\n\nint main(void) {\n    fw_test_reset(\"gate\");\n    fw_event event = fw_test_event(FW_REBOOT);\n    fw_context ctx = fw_test_context();\n    fw_decision decision = fw_on_event(&event, FW_PREPARE, &ctx);\n    FW_EXPECT(fw_test_is_approve(&decision));\n    fw_test_decision_free(&decision);\n    FW_EXPECT(fw_test_count(\"log\") == 1);\n    return fw_test_finish();\n}\n";

#[test]
fn the_rust_sdk_passes_cargo_publish_dry_run_with_its_wit_inside() {
    let temp = tempfile::tempdir().expect("temp dir");
    let sdk = temp.path().join("forewarn-sdk");
    export("rust", &sdk);
    let fix = "cargo publish --dry-run needs crates.io (the index and wit-bindgen).";
    let listed = run(
        Command::new("cargo")
            .args(["package", "--list", "--allow-dirty", "--manifest-path"])
            .arg(sdk.join("Cargo.toml"))
            .current_dir(temp.path()),
        fix,
    );
    let listed = String::from_utf8_lossy(&listed.stdout);
    for file in ["wit/forewarn.wit", "src/lib.rs", "README.md", "Cargo.toml"] {
        assert!(listed.lines().any(|line| line == file), "{file}: {listed}");
    }
    // Builds the packaged crate alone (no path dependency can hide); a shared target folder
    // keeps wit-bindgen compiled across runs.
    let target = repo_dir().join("target/authoring/sdk-package");
    let output = run(
        Command::new("cargo")
            .args(["publish", "--dry-run", "--allow-dirty", "--manifest-path"])
            .arg(sdk.join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(temp.path()),
        fix,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("Packaged"), "{stderr}");
    assert!(
        stderr.contains("aborting upload due to dry run"),
        "{stderr}"
    );
}

/// A fresh venv in `dir`; its python. Only the tools' venv gets pip (ensurepip takes tens of
/// seconds on a busy machine): the others are installed into by that pip's `--python`.
fn venv(dir: &Path, with_pip: bool) -> PathBuf {
    let mut command = Command::new("python3");
    command.args(["-m", "venv"]);
    if !with_pip {
        command.arg("--without-pip");
    }
    run(
        command.arg(dir),
        "Install python3 with venv: tests/install-language-toolchains.sh python.",
    );
    dir.join("bin/python3")
}

/// `pip install ARGS` with the tools' pip into the environment of `python`.
fn pip(tools: &Path, python: &Path, args: &[&str]) -> Output {
    run(
        Command::new(tools)
            .args(["-m", "pip", "--python"])
            .arg(python)
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(args),
        "pip installs from PyPI (componentize-py, pytest, build, flit_core).",
    )
}

/// The file in `dir` whose name ends with `suffix`.
fn one_file(dir: &Path, suffix: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .expect("read dist/")
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.to_string_lossy().ends_with(suffix))
        .unwrap_or_else(|| panic!("no *{suffix} in {}", dir.display()))
}

/// Installs `package` (a wheel or an sdist, with the `test` extra) into a fresh venv and builds
/// a plugin with that venv's `forewarn-build-py`; the component built.
fn install_and_build_python(temp: &Path, tools: &Path, label: &str, package: &Path) -> PathBuf {
    let python = venv(&temp.join(format!("venv-{label}")), false);
    pip(tools, &python, &[&format!("{}[test]", package.display())]);
    let project = temp.join(format!("plugin-{label}"));
    std::fs::create_dir_all(&project).expect("project");
    std::fs::write(project.join("gate.py"), PLUGIN_PY).expect("plugin");
    let wasm = project.join("gate.wasm");
    run(
        Command::new(python.with_file_name("forewarn-build-py"))
            .args(["gate.py", "-o"])
            .arg(&wasm)
            .current_dir(&project),
        "componentize-py comes with the SDK package.",
    );
    wasm
}

#[test]
fn the_python_sdk_makes_a_wheel_and_an_sdist_that_install_and_build_a_plugin() {
    let temp = tempfile::tempdir().expect("temp dir");
    let sdk = temp.path().join("forewarn-sdk");
    export("python", &sdk);
    let tools = venv(&temp.path().join("venv-tools"), true);
    pip(&tools, &tools, &["build"]);
    let wheels = temp.path().join("wheels");
    run(
        Command::new(&tools)
            .args(["-m", "pip", "wheel", "--no-deps", "--quiet", "-w"])
            .arg(&wheels)
            .arg(&sdk),
        "pip wheel builds with flit_core from PyPI.",
    );
    let dist = temp.path().join("dist");
    run(
        Command::new(&tools)
            .args(["-m", "build", "--sdist", "--wheel", "--outdir"])
            .arg(&dist)
            .arg(&sdk),
        "python -m build (the `build` package) builds with flit_core from PyPI.",
    );
    let wheel = one_file(&wheels, "-py3-none-any.whl");
    assert!(
        wheel.to_string_lossy().contains(&format!(
            "forewarn_sdk-{}-",
            forewarn_runtime::wit::latest_version()
        )),
        "{}",
        wheel.display()
    );
    one_file(&dist, "-py3-none-any.whl");
    let sdist = one_file(&dist, ".tar.gz");
    let from_wheel = install_and_build_python(temp.path(), &tools, "wheel", &wheel);
    let from_sdist = install_and_build_python(temp.path(), &tools, "sdist", &sdist);
    // Compiling an 18 MiB component takes a debug forewarn a minute: the full check once, and
    // the sdist's build is a component of the same world (its WIT came from the same package).
    assert_plugin_check_passes(&from_wheel);
    let component = std::fs::read(&from_sdist).expect("read the sdist's component");
    assert!(
        component.starts_with(b"\0asm\x0d\x00\x01\x00"),
        "not a component"
    );
    let handler = format!(
        "forewarn:plugin/handler@{}",
        forewarn_runtime::wit::latest_version()
    );
    assert!(
        component
            .windows(handler.len())
            .any(|window| window == handler.as_bytes()),
        "the sdist's component exports no {handler}"
    );
}

#[test]
fn the_js_sdk_packs_into_a_tarball_that_installs_into_an_empty_project_and_builds_a_plugin() {
    let temp = tempfile::tempdir().expect("temp dir");
    let sdk = temp.path().join("forewarn-sdk");
    export("js", &sdk);
    let fix = "npm installs componentize-js from the npm registry; Node.js >= 20.19 \
               (tests/install-language-toolchains.sh js).";
    let packed = temp.path().join("packed");
    std::fs::create_dir_all(&packed).expect("packed/");
    run(
        Command::new("npm")
            .args(["pack", "--silent", "--pack-destination"])
            .arg(&packed)
            .arg(&sdk),
        fix,
    );
    let tarball = one_file(&packed, ".tgz");
    assert!(
        tarball.to_string_lossy().contains(&format!(
            "forewarn-sdk-{}.tgz",
            forewarn_runtime::wit::latest_version()
        )),
        "{}",
        tarball.display()
    );
    let project = temp.path().join("project");
    std::fs::create_dir_all(&project).expect("project/");
    std::fs::write(
        project.join("package.json"),
        "{ \"name\": \"gate\", \"private\": true, \"type\": \"module\" }\n",
    )
    .expect("package.json");
    run(
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
            .arg(&tarball)
            .current_dir(&project),
        fix,
    );
    std::fs::write(project.join("gate.js"), PLUGIN_JS).expect("plugin");
    run(
        Command::new("npx")
            .args([
                "--no-install",
                "forewarn-build-js",
                "gate.js",
                "-o",
                "gate.wasm",
            ])
            .current_dir(&project),
        fix,
    );
    assert_plugin_check_passes(&project.join("gate.wasm"));
}

#[test]
fn the_c_sdk_tarball_builds_and_tests_a_plugin_with_clang_and_wasi_libc_elsewhere() {
    let temp = tempfile::tempdir().expect("temp dir");
    // The SDKs' versions follow the contract they bind.
    let version = forewarn_runtime::wit::latest_version();
    let folder = format!("forewarn-sdk-c-{version}");
    let staged = temp.path().join("stage");
    export("c", &staged.join(&folder));
    let tarball = temp.path().join(format!("{folder}.tar.gz"));
    run(
        Command::new("tar")
            .arg("czf")
            .arg(&tarball)
            .arg("-C")
            .arg(&staged)
            .arg(&folder),
        "",
    );
    let unpacked = temp.path().join("opt");
    std::fs::create_dir_all(&unpacked).expect("opt/");
    run(
        Command::new("tar")
            .arg("xzf")
            .arg(&tarball)
            .arg("-C")
            .arg(&unpacked),
        "",
    );
    let sdk = unpacked.join(&folder);
    for file in [
        "forewarn.h",
        "forewarn.c",
        "testing.h",
        "testing.c",
        "forewarn-sdk.mk",
        "forewarn-sdk.pc",
        "generated/event_handler.h",
    ] {
        assert!(sdk.join(file).is_file(), "{file} is in the tarball");
    }
    let project = temp.path().join("project");
    std::fs::create_dir_all(&project).expect("project/");
    std::fs::write(project.join("gate.c"), PLUGIN_C).expect("plugin");
    std::fs::write(project.join("test_gate.c"), TEST_C).expect("test");
    std::fs::write(
        project.join("Makefile"),
        format!(
            "FOREWARN_SDK ?= $(shell pkg-config --variable=sdkdir 'forewarn-sdk >= {version}')\n\
             include $(FOREWARN_SDK)/forewarn-sdk.mk\n\n\
             gate.wasm: gate.c\n\t$(forewarn_build)\n\n\
             test:\n\t$(call forewarn_test,gate.c test_gate.c)\n"
        ),
    )
    .expect("Makefile");
    let fix = "Install clang and wasi-libc with `tests/install-language-toolchains.sh c`, and gcc, \
               make and pkg-config.";
    let make = |target: &str| {
        let mut command = Command::new("make");
        command
            .arg(target)
            .arg(format!("FOREWARN={}", forewarn_binary!().display()))
            .env("PKG_CONFIG_PATH", &sdk)
            .current_dir(&project);
        command
    };
    run(&mut make("gate.wasm"), fix);
    let tested = run(&mut make("test"), fix);
    assert!(
        String::from_utf8_lossy(&tested.stdout).contains("ok: 2 checks passed"),
        "{}",
        describe(&tested)
    );
    assert_plugin_check_passes(&project.join("gate.wasm"));
}
