"""The C library through cffi's ABI mode: the declarations are read from
libtfm's own headers (the copy installed with this package, or the source
tree's), so struct layouts and signatures cannot drift from the C side, and
the library is found by TFM_LIBRARY, the path meson recorded when it
installed both, pkg-config, or the loader's path by its SONAME, libtfm.so.0
(never -ltfm's libtfm.so, which may be TomsFastMath).
"""
import os
import re
import subprocess

import cffi

# The order of tfm.h's includes: each header only uses what came before.
HEADERS = ['common.h', 'tensor.h', 'tape.h', 'ops.h', 'params.h', 'nn.h',
           'model.h', 'optim.h', 'io.h', 'training.h', 'decode.h']
SONAME = 'libtfm.so.0'


def _header_dir():
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get('TFM_INCLUDE_DIR'),
                  os.path.join(here, 'include'),                          # installed copy
                  os.path.join(here, '..', '..', '..', 'include', 'tfm')]  # source tree
    for folder in candidates:
        if folder and all(os.path.isfile(os.path.join(folder, h)) for h in HEADERS):
            return os.path.abspath(folder)
    raise ImportError('tfm: libtfm\'s headers were not found (set TFM_INCLUDE_DIR to '
                      'the folder holding tfm.h)')


def declarations(text):
    """A header's declarations as cffi's cdef takes them: no comments, no
    preprocessor lines except integer #defines, no C++ guards, no TFM_API."""
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'\\\n', ' ', text)  # join continued lines
    kept, skipping_cplusplus = [], 0
    for line in text.split('\n'):
        stripped = line.strip()
        if skipping_cplusplus:
            skipping_cplusplus += stripped.startswith('#if')
            skipping_cplusplus -= stripped.startswith('#endif')
            continue
        if stripped.startswith('#ifdef __cplusplus'):
            skipping_cplusplus = 1
            continue
        if stripped.startswith('#'):
            constant = re.match(r'#define\s+(TFM_[A-Z0-9_]+)\s+(\d+)\s*$', stripped)
            if constant:
                kept.append('#define %s %s' % constant.groups())
            continue
        kept.append(line.replace('TFM_API ', ''))
    return '\n'.join(kept)


def _library_path():
    explicit = os.environ.get('TFM_LIBRARY')
    if explicit:
        return explicit
    try:  # written by meson when it installs the package beside the library
        from ._installed import LIBRARY
        if os.path.exists(LIBRARY):
            return LIBRARY
    except ImportError:
        pass
    try:
        libdir = subprocess.run(['pkg-config', '--variable=libdir', 'tfm'], check=True,
                                capture_output=True, text=True).stdout.strip()
        if libdir and os.path.exists(os.path.join(libdir, SONAME)):
            return os.path.join(libdir, SONAME)
    except (OSError, subprocess.CalledProcessError):
        pass
    return SONAME  # the loader's search path


def _load():
    folder = _header_dir()
    ffi = cffi.FFI()
    ffi.cdef('\n'.join(declarations(open(os.path.join(folder, h)).read()) for h in HEADERS))
    path = _library_path()
    try:
        lib = ffi.dlopen(path)
        loaded = lib.tfm_version_number()
    except (OSError, AttributeError) as error:
        raise ImportError('tfm: cannot load libtfm (%s): %s; set TFM_LIBRARY to the path of '
                          '%s' % (path, error, SONAME)) from error
    wanted = lib.TFM_VERSION_MAJOR * 10000 + lib.TFM_VERSION_MINOR * 100
    if loaded // 10000 != lib.TFM_VERSION_MAJOR or loaded < wanted:
        raise ImportError('tfm: %s is libtfm %s, but these bindings were made with the '
                          'headers of %d.%d (from %s)' % (
                              path, ffi.string(lib.tfm_version_string()).decode(),
                              lib.TFM_VERSION_MAJOR, lib.TFM_VERSION_MINOR, folder))
    return ffi, lib, path


ffi, lib, library_path = _load()
