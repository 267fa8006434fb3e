#!/usr/bin/env bash
# The whole test suite, as the README gives it. Rendering and interop tests need a Vulkan
# driver; on a Debian machine without a GPU this installs Mesa's lavapipe (a conformant
# Vulkan device on the CPU) first, when it is missing and we may (root with apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! compgen -G "/usr/share/vulkan/icd.d/*.json" >/dev/null && ! compgen -G "/etc/vulkan/icd.d/*.json" >/dev/null; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "test.sh: no Vulkan driver found; installing Mesa's lavapipe (mesa-vulkan-drivers)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq mesa-vulkan-drivers >/dev/null
  else
    echo "test.sh: no Vulkan driver found and cannot install one: install mesa-vulkan-drivers" >&2
  fi
fi
exec cargo test --workspace "$@"
