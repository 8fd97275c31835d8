"""Zero-code activation, loaded by Python at start-up in processes run by ``lineagewire instrument``.

``lineagewire instrument`` puts this folder first on PYTHONPATH and sets
``LINEAGEWIRE_INSTRUMENT=1``. The hook is the one Spark configuration alone uses
(``lineagewire_activate.py``, beside this file, which an installed lineagewire also runs from
its ``.pth`` file): it waits for ``pyspark.sql.session`` and wraps
``SparkSession.Builder.getOrCreate`` so the session it returns gets the emitter. Nothing is
imported here beyond the standard library; processes that never build a SparkSession
(PySpark's own Python workers inherit the environment) pay only for these two files.

A ``sitecustomize`` module that this one shadows (e.g. a distribution's) is
run afterwards, so instrumenting changes nothing else.
"""

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain():
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if os.environ.get("LINEAGEWIRE_INSTRUMENT") == "1":
    import lineagewire_activate

    lineagewire_activate.install_hook()
_chain()
