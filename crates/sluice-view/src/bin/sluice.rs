//! The `sluice` command line: see `sluice --help` and docs/viewer.md.

fn main() -> std::process::ExitCode {
    // Pipelines compiled by an earlier run come from the cache on disk
    // (`SLUICE_PIPELINE_CACHE=off` turns it off).
    #[cfg(target_os = "linux")]
    sluice_interop::install_pipeline_cache();
    sluice_view::cli::main()
}
