"""The C library through cffi's ABI mode: the declarations are read from
libtfm's own installed headers, so struct layouts and signatures cannot
drift from the C side. The library and headers are the ones recorded at
install time (tfm/_installed.py, written by meson install or pip), unless
TFM_LIBRARY or TFM_INCLUDE_DIR say otherwise; without a record (running
from the source tree) pkg-config is asked, then the source tree's headers
and the loader's path by the SONAME, libtfm.so.0 (never -ltfm's libtfm.so,
which may be TomsFastMath).
"""
import os
import re

import cffi

from ._locate import SONAME, pkg_config

# Each header only uses what comes before it (model.h names text.h's
# tokenizer, as its own #include says).
HEADERS = ['common.h', 'tensor.h', 'tape.h', 'ops.h', 'params.h', 'nn.h', 'text.h',
           'model.h', 'optim.h', 'io.h', 'training.h', 'decode.h', 'score.h', 'batch.h',
           'translate.h', 'adapters.h']


def _recorded(name):
    """The path meson or pip recorded at install time, or None."""
    try:
        from . import _installed
    except ImportError:
        return None
    return getattr(_installed, name, None)


def _header_dir():
    def candidates():
        yield os.environ.get('TFM_INCLUDE_DIR')
        yield _recorded('INCLUDE_DIR')
        yield os.path.join(pkg_config('includedir'), 'tfm')
        yield os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..',
                           'include', 'tfm')  # the source tree
    for folder in candidates():
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
    for path in (os.environ.get('TFM_LIBRARY'), _recorded('LIBRARY')):
        if path:
            return path
    libdir = pkg_config('libdir')
    if libdir and os.path.exists(os.path.join(libdir, SONAME)):
        return os.path.join(libdir, SONAME)
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
