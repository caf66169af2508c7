# Sourced by the other scripts: installs the Debian packages libtfm builds
# and tests with, when any is missing (apt-get needs root).
TFM_DEBIAN_PACKAGES="gcc meson ninja-build pkg-config libopenblas-dev libutf8proc-dev check python3"

tfm_install_deps() {
    missing=""
    for package in $TFM_DEBIAN_PACKAGES "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" ||
            missing="$missing $package"
    done
    [ -z "$missing" ] && return 0
    echo "Installing Debian packages:$missing"
    if [ "$(id -u)" -ne 0 ]; then
        echo "Run as root (or install them yourself):$missing" >&2
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null
}
