//! Tests of a command's `Args` on their own: clap's consistency checks, and parsing an
//! argument list as `forewarn COMMAND ARGS…` would.

use clap::{CommandFactory, Parser};

#[derive(Parser)]
#[command(name = "forewarn")]
struct Alone<A: clap::Args> {
    #[command(flatten)]
    args: A,
}

/// `A` parsed from `argv` (the arguments after the command's name).
pub(crate) fn parse<A: clap::Args>(argv: &[&str]) -> Result<A, clap::Error> {
    let argv = std::iter::once("forewarn").chain(argv.iter().copied());
    Alone::<A>::try_parse_from(argv).map(|alone| alone.args)
}

/// Panics when `A`'s definition is inconsistent (clap's `Command::debug_assert`: a
/// `conflicts_with` naming no argument, two flags with one name, a bad default).
pub(crate) fn assert_consistent<A: clap::Args>() {
    Alone::<A>::command().debug_assert();
}
