//! `forewarn config check PATH`: validates a configuration file; prints `PATH: ok`, or the
//! error naming the line and the key (exit 1).

use std::path::PathBuf;
use std::process::ExitCode;

use forewarn_daemon::config::Config;

/// `forewarn config check`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The TOML file.
    path: PathBuf,
}

/// Loads the file as the daemon would and says whether it is valid.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    match Config::load(&args.path) {
        Ok(_) => {
            println!("{}: ok", args.path.display());
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("forewarn: {error}");
            Ok(ExitCode::FAILURE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[test]
    fn takes_exactly_one_path() {
        assert_consistent::<Args>();
        let args = parse::<Args>(&["/etc/forewarn/forewarn.toml"]).expect("parses");
        assert_eq!(args.path, PathBuf::from("/etc/forewarn/forewarn.toml"));
        let error = parse::<Args>(&[]).unwrap_err();
        assert_eq!(
            error.kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
    }
}
