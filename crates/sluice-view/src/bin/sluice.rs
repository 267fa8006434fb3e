//! The `sluice` command line: see `sluice --help` and docs/viewer.md.

fn main() -> std::process::ExitCode {
    sluice_view::cli::main()
}
