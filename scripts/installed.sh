# Sourced by the scripts that check an installed copy (check_consumers.sh,
# test_python.sh): finds PREFIX's library folder, exports PKG_CONFIG_PATH
# for it, makes a scratch folder and counts steps.
#   sets: source, prefix, libdir, scratch, passed, failed; defines step
source=$PWD
prefix=$1
libdir=$(ls -d "$prefix"/lib*/ "$prefix"/lib/*-linux-gnu/ 2>/dev/null | while read -r d; do
    [ -f "$d/pkgconfig/tfm.pc" ] && echo "${d%/}"; done | head -n 1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
. scripts/steps.sh
