"""Builds the tfm wheel (PEP 517) with the standard library alone.

The wheel holds the package's sources and tfm/_installed.py, which records
the absolute paths of the installed libtfm.so.0 and of its headers
(prefix/include/tfm), found through TFM_LIBRARY and TFM_INCLUDE_DIR or
pkg-config's tfm.pc; the package reads its declarations from those headers
and loads that library, without asking pkg-config again.
"""
import base64
import hashlib
import importlib.util
import os
import re
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = 'tfm'


def _locate():
    """tfm/_locate.py alone (importing the package would load the library)."""
    spec = importlib.util.spec_from_file_location('_locate', os.path.join(HERE, NAME,
                                                                          '_locate.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def installed_paths():
    """(the library's path, the headers' folder) of the installed libtfm."""
    locate = _locate()
    library = os.environ.get('TFM_LIBRARY') or os.path.join(locate.pkg_config('libdir'),
                                                            locate.SONAME)
    headers = os.environ.get('TFM_INCLUDE_DIR') or os.path.join(
        locate.pkg_config('includedir'), 'tfm')
    if not os.path.isfile(library) or not os.path.isfile(os.path.join(headers, 'tfm.h')):
        raise RuntimeError(
            'tfm: no installed libtfm found (library %r, headers %r): install it (meson install) '
            'where pkg-config finds tfm.pc (PKG_CONFIG_PATH), or set TFM_LIBRARY to its %s and '
            'TFM_INCLUDE_DIR to the folder of its tfm.h' % (library, headers, locate.SONAME))
    return os.path.abspath(library), os.path.abspath(headers)


def _version(headers):
    text = open(os.path.join(headers, 'common.h')).read()
    return '.'.join(re.search(r'#define TFM_VERSION_%s (\d+)' % part, text).group(1)
                    for part in ('MAJOR', 'MINOR', 'PATCH'))


def _metadata(version):
    return ('Metadata-Version: 2.1\nName: %s\nVersion: %s\n'
            'Summary: Encoder-decoder transformers over libtfm, with numpy\n'
            'License: MIT\nRequires-Python: >=3.9\nRequires-Dist: numpy\nRequires-Dist: cffi\n'
            'Description-Content-Type: text/markdown\n\n%s'
            % (NAME, version, open(os.path.join(HERE, 'README.md')).read()))


def _files():
    """(path in the wheel, contents) of the package and its record of paths."""
    library, headers = installed_paths()
    version = _version(headers)
    package = os.path.join(HERE, NAME)
    files = [('%s/%s' % (NAME, name), open(os.path.join(package, name), 'rb').read())
             for name in sorted(os.listdir(package)) if name.endswith('.py')]
    template = open(os.path.join(package, '_installed.py.in')).read()
    recorded = template.replace('@LIBRARY@', library).replace('@INCLUDE_DIR@', headers)
    files.append(('%s/_installed.py' % NAME, recorded.encode()))
    info = '%s-%s.dist-info' % (NAME, version)
    files.append((info + '/METADATA', _metadata(version).encode()))
    files.append((info + '/WHEEL', b'Wheel-Version: 1.0\nGenerator: pep517_backend\n'
                                   b'Root-Is-Purelib: true\nTag: py3-none-any\n'))
    return version, info, files


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
    return '%s,sha256=%s,%d' % (path, digest, len(data))


def get_requires_for_build_wheel(config_settings=None):
    """Nothing: the wheel is made with the standard library."""
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Writes the wheel into wheel_directory; returns its file name."""
    version, info, files = _files()
    name = '%s-%s-py3-none-any.whl' % (NAME, version)
    record = '\n'.join([_record_line(p, d) for p, d in files] + [info + '/RECORD,,', ''])
    with zipfile.ZipFile(os.path.join(wheel_directory, name), 'w') as wheel:
        for path, data in files + [(info + '/RECORD', record.encode())]:
            entry = zipfile.ZipInfo(path, (1980, 1, 1, 0, 0, 0))  # the same bytes every build
            entry.external_attr = 0o644 << 16
            wheel.writestr(entry, data, zipfile.ZIP_DEFLATED)
    return name
