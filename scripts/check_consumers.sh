#!/usr/bin/env bash
# Programs built against libtfm the ways its users build them, from the
# installed copy in PREFIX (pkg-config, CMake, beside Debian's TomsFastMath)
# and from the source tree as a meson subproject. Ends with
# "N passed, N failed".
#   usage: scripts/check_consumers.sh PREFIX
set -u
cd "$(dirname "$0")/.."
. scripts/installed.sh "$1"
consumers=$source/tests/consumers

# The README's "whole program", alone in a folder, built with the README's
# command (no rpath: the library is found through LD_LIBRARY_PATH).
mkdir "$scratch/fit_line" && cp "$source/examples/fit_line.c" "$scratch/fit_line/"
(cd "$scratch/fit_line" &&
    cc fit_line.c $(pkg-config --cflags --libs tfm) && LD_LIBRARY_PATH=$libdir ./a.out | tail -n 1)
step "pkg-config: examples/fit_line.c alone builds with cc fit_line.c \$(pkg-config --cflags --libs tfm) and fits y = 3x + 2" $?

# A program calling MPI itself links with tfm-mpi's flags alone.
(cd "$scratch" &&
    cc -std=c11 -Wall -Werror "$consumers/mpi_program.c" $(pkg-config --cflags --libs tfm-mpi) \
        -Wl,-rpath,"$libdir" -o mpi-program &&
    mpirun --allow-run-as-root --oversubscribe -np 2 ./mpi-program |
    grep -x "2 ranks: the averaged gradient is right")
step "pkg-config: a program calling MPI_Init builds with tfm-mpi's flags alone, runs on 2 ranks" $?

(cd "$scratch" &&
    cc -std=c11 -Wall -Werror "$consumers/beside_tomsfastmath.c" \
        $(pkg-config --cflags --libs tfm tomsfastmath) -Wl,-rpath,"$libdir" -o both &&
    ./both | grep -x "TomsFastMath 6 x 7 = 42; libtfm $(pkg-config --modversion tfm)" &&
    readelf -d both | grep -q 'NEEDED.*\[libtfm\.so\.1\]' &&
    readelf -d both | grep -q 'NEEDED.*\[libtfm\.so\.0\]')
step "pkg-config: one program uses TomsFastMath (-ltfm) and libtfm, each its own" $?

meson setup "$scratch/usr" "$source" --prefix=/usr >"$scratch/usr.log" 2>&1
[ $? -ne 0 ] && grep -q "TomsFastMath" "$scratch/usr.log"
step "meson refuses to install over TomsFastMath's libtfm.so in /usr" $?

(cmake -S "$consumers/cmake" -B "$scratch/cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null &&
    cmake --build "$scratch/cmake" >/dev/null && "$scratch/cmake/version")
step "CMake: find_package(tfm) and tfm::tfm" $?

mkdir -p "$scratch/parent/subprojects"
cp "$consumers/subproject/meson.build" "$consumers/version.c" "$scratch/parent/"
ln -s "$source" "$scratch/parent/subprojects/libtfm"
(cd "$scratch/parent" &&
    meson setup build --force-fallback-for=tfm --prefix=/usr/local >/dev/null &&
    ninja -C build >/dev/null && ./build/version &&
    meson install -C build --destdir "$scratch/staged" >/dev/null &&
    [ ! -d build/subprojects/libtfm/examples ] && [ ! -d build/subprojects/libtfm/tests ] &&
    ! find "$scratch/staged" -path '*/bin/tfm-*' -o -name 'libtfm.a' | grep -q . &&
    find "$scratch/staged" -name 'libtfm.so.0' | grep -q .)
step "meson subproject: the library alone is built and installed" $?

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
