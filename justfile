# sluice tasks. Each recipe is a plain cargo command, so nothing here is needed to build or test.

# Render the main example to a PNG (prints where it went).
demo:
    cargo run --release --example tour

# The whole test suite, as CI runs it.
test:
    cargo test --workspace

# Upload and render benchmarks (images; volumes and meshes); every figure is a ratio against a
# ceiling measured in the same run.
bench:
    cargo bench --bench upload && cargo bench --bench visuals

# Formatting and lints, as required before a commit.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
