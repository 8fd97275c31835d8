"""One build step pyproject.toml cannot say: ``lineagewire-activate.pth`` at the top of site-packages.

Python runs a ``.pth`` file's ``import`` lines at start-up; this one installs the hook that lets Spark
configuration alone (``spark.lineagewire.enabled=true``) turn the emitter on in any driver where lineagewire
is installed (producers/spark/_boot/lineagewire_activate.py says what it costs). Every other setting is in
pyproject.toml.
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "lineagewire-activate.pth"
SOURCE = os.path.join("producers", "spark", "_boot", PTH)


class BuildPyWithPth(build_py):
    """build_py, plus the .pth file at the root of the build (the wheel's purelib root: site-packages)."""

    def run(self):
        super().run()
        self.copy_file(SOURCE, os.path.join(self.build_lib, PTH), preserve_mode=False)

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH)]

    def get_output_mapping(self):
        # What editable installs link or copy (setuptools' editable_wheel asks build_py for it).
        return {**super().get_output_mapping(), os.path.join(self.build_lib, PTH): SOURCE}


setup(cmdclass={"build_py": BuildPyWithPth})
