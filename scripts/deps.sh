# Sourced by the other scripts: installs the Debian packages libtfm builds
# and tests with, when any is missing (apt-get needs root), showing each
# package as it is set up.
TFM_DEBIAN_PACKAGES="gcc meson ninja-build pkg-config libopenblas-dev libutf8proc-dev check python3 libmicrohttpd-dev libgettextpo-dev gettext"

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
    echo "apt-get update"
    apt-get update -qq || return 1
    # one line a package fetched and set up, and the total, of apt's output
    apt-get install -y -q --no-install-recommends $missing </dev/null |
        grep --line-buffered -E '^(Get:|Fetched |Setting up )'
    return "${PIPESTATUS[0]}"
}
