"""What finds an installed libtfm, for the import (tfm/_binding.py) and for
the wheel's build (pep517_backend.py, which loads this file alone: it
imports nothing of the package)."""
import subprocess

SONAME = 'libtfm.so.0'


def pkg_config(variable):
    """A variable of pkg-config's tfm.pc ('libdir', 'includedir'), or ''."""
    try:
        return subprocess.run(['pkg-config', '--variable=' + variable, 'tfm'], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ''
