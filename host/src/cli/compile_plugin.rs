//! `forewarn compile-plugin` (hidden): a component on stdin, the daemon's compiled form on
//! stdout. The daemon runs it in a child so the compiler never stays in its memory; the
//! child exits `EXIT_INVALID_COMPONENT` with wasmtime's message on stderr when the component
//! is invalid.
//!
//! The one command whose `run` is not async: it runs before logging and the async runtime
//! start (the child does one thing and exits; its parallel compile keeps glibc's default
//! malloc arenas).

use std::io::{Read, Write};
use std::process::ExitCode;

use forewarn_runtime::{EXIT_INVALID_COMPONENT, InstanceAllocation, LoadError, compile_to_bytes};

/// `forewarn compile-plugin`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The daemon engine's instance allocation (`pooling` or `on-demand`).
    #[arg(long, default_value = "pooling")]
    allocation: String,
}

/// Compiles stdin to stdout; every failure is said on stderr and in the exit status.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    Ok(compile(&args.allocation))
}

fn compile(allocation: &str) -> ExitCode {
    let Some(allocation) = InstanceAllocation::from_arg(allocation) else {
        eprintln!(
            "forewarn compile-plugin: --allocation must be `pooling` or `on-demand`, not {allocation:?}"
        );
        return ExitCode::FAILURE;
    };
    let mut component = Vec::new();
    if let Err(error) = std::io::stdin().read_to_end(&mut component) {
        eprintln!("forewarn compile-plugin: cannot read the component from stdin: {error}");
        return ExitCode::FAILURE;
    }
    let compiled = match compile_to_bytes(&component, allocation) {
        Ok(compiled) => compiled,
        Err(LoadError::Compile { message }) => {
            // The daemon wraps this as its own LoadError::Compile.
            eprintln!("{message}");
            return ExitCode::from(EXIT_INVALID_COMPONENT as u8);
        }
        Err(error) => {
            eprintln!("forewarn compile-plugin: {error}");
            return ExitCode::FAILURE;
        }
    };
    match std::io::stdout().lock().write_all(&compiled) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("forewarn compile-plugin: cannot write the compiled form: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[test]
    fn allocation_defaults_to_pooling_and_is_checked_by_the_runtime() {
        assert_consistent::<Args>();
        let args = parse::<Args>(&[]).expect("parses");
        assert_eq!(args.allocation, "pooling");
        let args = parse::<Args>(&["--allocation", "on-demand"]).expect("parses");
        assert!(InstanceAllocation::from_arg(&args.allocation).is_some());
    }
}
