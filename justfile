# sluice tasks. Each recipe is a plain cargo command, so nothing here is needed to build or test.

# Render the main example to a PNG (prints where it went).
demo:
    cargo run --release --example tour

# The whole test suite, as CI runs it.
test:
    bash scripts/test.sh

# Upload and render benchmarks (images; volumes and meshes; a frame's cost taken apart); every
# judged figure is a ratio against a ceiling measured in the same run.
bench:
    cargo bench --bench upload && cargo bench --bench visuals && cargo bench --bench frames && cargo bench -p sluice-core --bench loader && cargo bench -p sluice-core --bench paging

# Formatting, lints and API docs, as required before a commit (with and without CUDA support).
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
    cargo clippy --workspace --all-targets --features cuda -- -D warnings
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --features cuda

# The CUDA interop tests here (they say they skip, and why, without an NVIDIA driver).
test-cuda:
    cargo test --features cuda --test interop_cuda --test interop_vulkan --test interop_cross_process

# Build the CUDA interop tests, bench and examples for the NVIDIA machine into .device-cuda/;
# then run them there with the device tool (see scripts/device-cuda.sh for the exact call):
#   run(kind="nvidia-h200", carry=[".gl", ".device-cuda"], command="bash scripts/device-cuda.sh remote")
device-cuda:
    bash scripts/device-cuda.sh prepare
