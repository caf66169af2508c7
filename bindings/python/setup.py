"""Copies libtfm's public headers into the package, so the installed
bindings read the very declarations of the library they were built beside
(tfm/_binding.py checks the loaded library's version against them)."""
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_HEADERS = os.path.join(HERE, '..', '..', 'include', 'tfm')


class build_py_with_headers(build_py):
    def run(self):
        super().run()
        headers = os.environ.get('TFM_INCLUDE_DIR', SOURCE_HEADERS)
        found = glob.glob(os.path.join(headers, '*.h'))
        if not found:
            raise SystemExit('tfm: libtfm\'s headers were not found in %s (set TFM_INCLUDE_DIR)'
                             % headers)
        target = os.path.join(self.build_lib, 'tfm', 'include')
        os.makedirs(target, exist_ok=True)
        for header in found:
            shutil.copy(header, target)


setup(cmdclass={'build_py': build_py_with_headers})
