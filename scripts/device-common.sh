# Shared by scripts/device-run.sh and scripts/device-cuda.sh, which source it (and copy it
# beside their snapshot, so that the remote half finds it there too). The sourcing script
# sets $tool (the name its messages start with) first.

die() {
  echo "$tool: $*" >&2
  exit 1
}

# Limit of what travels to the device machine (tracked + untracked-not-ignored + carried).
TRAVEL_LIMIT=$((64 << 20))
# Packages the device README names: the Vulkan loader and GLVND's EGL/GL/GLES libraries.
GL_PACKAGES=(libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)

# Keeps the folders named (.gl, .device, ...) out of every commit: .gitignore lists them;
# older checkouts get them in info/exclude.
keep_out_of_git() {
  local exclude dir
  exclude="$(git rev-parse --git-path info/exclude)"
  for dir in "$@"; do
    if ! git check-ignore -q "$dir/x"; then
      mkdir -p "$(dirname "$exclude")"
      echo "/$dir/" >>"$exclude"
    fi
  done
}

# The loader packages in .gl/, as the device README says (amd64, any host arch): downloaded
# into a fresh folder first (a failed download leaves an earlier .gl/ as it was), or, with
# --reuse, kept when .gl/ already holds them.
fetch_loaders() {
  if [ "${1:-}" = --reuse ] && compgen -G ".gl/libvulkan1_*.deb" >/dev/null; then
    echo "== reusing the loader packages in .gl/"
  else
    echo "== downloading loader packages into .gl/"
    local debs
    debs="$(mktemp -d)"
    mkdir -p /tmp/amd64/partial
    local o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
    apt-get "${o[@]}" update -qq
    (cd "$debs" && apt-get "${o[@]}" download "${GL_PACKAGES[@]}")
    rm -rf .gl
    mv "$debs" .gl
    chmod 755 .gl
  fi
  ls -l .gl
}

# Fails unless the working tree and the carried folders named fit what the device tool
# carries.
check_travel_size() {
  local carried tracked untracked total
  carried="$(du -sb "$@" | awk '{s += $1} END {print s}')"
  tracked="$(git ls-files -z | xargs -0 -r stat -c %s -- 2>/dev/null | awk '{s += $1} END {print s + 0}')"
  untracked="$(git ls-files -z -o --exclude-standard | xargs -0 -r stat -c %s -- 2>/dev/null | awk '{s += $1} END {print s + 0}')"
  total=$((carried + tracked + untracked))
  printf 'carried %d B + tracked %d B + untracked %d B = %d B (limit %d B)\n' \
    "$carried" "$tracked" "$untracked" "$total" "$TRAVEL_LIMIT"
  [ "$total" -lt "$TRAVEL_LIMIT" ] || die "over the 64 MiB the device tool carries"
}

loader_present() {
  ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1 ' &&
    ldconfig -p 2>/dev/null | grep -q 'libEGL\.so\.1 '
}

# Remote: unpacks the carried loader .debs into / where the image has none
# (SLUICE_DEVICE_UNPACK=auto, the default; always; never), and points Vulkan and EGL at the
# NVIDIA driver files where they are.
setup_loaders() {
  local unpack="${SLUICE_DEVICE_UNPACK:-auto}" f
  if [ "$unpack" = always ] || { [ "$unpack" = auto ] && ! loader_present; }; then
    compgen -G ".gl/*.deb" >/dev/null || die "no Vulkan/EGL loader here and no .gl/*.deb: carry .gl"
    [ "$(id -u)" = 0 ] || die "unpacking loaders into / needs root"
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    echo "$tool: unpacked $(ls .gl/*.deb | wc -l) loader packages into /"
  else
    echo "$tool: Vulkan and EGL loaders present, not unpacking .gl/ ($unpack)"
  fi
  local icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  local egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  if [ -f "$icd" ]; then
    export VK_DRIVER_FILES="$icd"
    [ -f "$egl" ] && export __EGL_VENDOR_LIBRARY_FILENAMES="$egl"
  fi
  return 0
}
