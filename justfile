# sluice tasks. Each recipe is a plain cargo command, so nothing here is needed to build or test.

# Render the main example to a PNG (prints where it went).
demo:
    cargo run --release --example tour

# The whole test suite, as CI runs it.
test:
    bash scripts/test.sh

# Upload and render benchmarks (images; volumes and meshes; a frame's cost taken apart); every
# judged figure is a ratio against a ceiling measured in the same run. Then the soak: thousands
# of frames of visuals added and removed, with memory (RSS) and counters every 500 frames.
bench:
    cargo bench --bench upload && cargo bench --bench visuals && cargo bench --bench frames && cargo bench --bench soak && cargo bench --bench chunked && cargo bench -p sluice-core --bench loader && cargo bench -p sluice-core --bench paging && cargo bench -p sluice-zarr --bench loader

# sluice's side of the pygfx / VisPy comparison (JSON in the peers' schema; see benches/peers.rs).
# Side by side: `bash ../shared/peers/run.sh --rounds 3 -- cargo bench -q --bench peers --`
bench-peers *ARGS:
    cargo bench --bench peers -- {{ARGS}}

# The fuzz targets of tests/fuzz.rs for many more cases than CI runs (SLUICE_FUZZ_CASES per
# target; set SLUICE_FUZZ_SEED to start elsewhere). A failure prints the seed that replays it.
fuzz cases="200000":
    SLUICE_FUZZ_CASES={{cases}} cargo test --release --test fuzz -- --nocapture

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
