"""Spark configuration alone turns the emitter on: run at Python start-up by ``lineagewire-activate.pth``.

lineagewire's wheel installs ``lineagewire-activate.pth`` next to this module, so every Python process of
an environment where lineagewire is installed runs ``install_hook()`` as it starts: it puts a one-shot
import hook on ``sys.meta_path`` and nothing else (no import beyond the standard library, a few
microseconds). Processes that never import ``pyspark.sql.session`` (PySpark's Python workers on the
executors among them) pay only that.

When ``pyspark.sql.session`` is imported, ``SparkSession.Builder.getOrCreate`` is wrapped: the session it
returns gets the emitter when

- its Spark conf says ``spark.lineagewire.enabled=true`` (``spark-submit --conf``, ``spark-defaults.conf``,
  a cluster's Spark properties, the builder's ``.config``), or else the driver's environment says
  ``LINEAGEWIRE_EMITTER__ENABLED=true`` (``spark.kubernetes.driverEnv.*``, ``spark.yarn.appMasterEnv.*``;
  the deprecated ``LINEAGEWIRE_ENABLED`` too, when the new name is unset: the emitter's settings then
  warn about it), or else the YAML config file says ``emitter: {enabled: true}`` (only when there is a file:
  ``$LINEAGEWIRE_CONFIG`` or ``./lineagewire.yaml``; PyYAML reads the key once per version of the file, and
  only a value that is not plainly false is read again through the emitter's own settings, ``EmitterConfig``);
  or
- the process runs under ``lineagewire instrument`` (``LINEAGEWIRE_INSTRUMENT=1``, set with the boot
  folder's ``sitecustomize.py``, which calls ``install_hook()`` too).

Otherwise the job pays one conf look-up per ``getOrCreate`` (a py4j call, well under a millisecond). A
value that is not a boolean gets one line on stderr and the job runs without the emitter; so does any
failure to start it (``instrument.activate_on``): lineagewire never fails a job.
"""

import importlib.machinery
import os
import sys

__all__ = ["CONFIG_ENV", "ENABLED_ENV", "ENABLED_KEY", "INSTRUMENT_ENV", "OLD_ENABLED_ENV", "activate_if_enabled",
           "enabled", "install_hook"]

ENABLED_KEY = "spark.lineagewire.enabled"
ENABLED_ENV = "LINEAGEWIRE_EMITTER__ENABLED"
#: its name before variables followed LINEAGEWIRE_<SECTION>__<KEY> (lineagewire.config.renamed warns about it)
OLD_ENABLED_ENV = "LINEAGEWIRE_ENABLED"
INSTRUMENT_ENV = "LINEAGEWIRE_INSTRUMENT"
#: the YAML config file's variable, and its default name (lineagewire.config.find_config_file)
CONFIG_ENV = "LINEAGEWIRE_CONFIG"
DEFAULT_CONFIG_FILE = "lineagewire.yaml"
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off", ""})


def enabled(conf_value, env=os.environ):
    """True or False for the activation settings (the conf value first, then the environment, then the YAML
    config file); raises ValueError naming the key, the value and what was expected when it is not a boolean."""
    if env.get(INSTRUMENT_ENV) == "1":
        return True
    env_name = ENABLED_ENV if ENABLED_ENV in env else OLD_ENABLED_ENV
    for where, value in ((ENABLED_KEY, conf_value), (env_name, env.get(env_name))):
        if value is None:
            continue
        word = str(value).strip().lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        raise ValueError(f"{where}={value!r} is not a boolean; expected true or false")
    return _enabled_in_config_file(env)


#: (path, mtime, size) of a config file -> whether it may turn the emitter on: read once per version of the file,
#: so a driver's every getOrCreate does not parse it again
_MAY_ENABLE: dict[tuple[str, int, int], bool] = {}


def _enabled_in_config_file(env):
    """``emitter.enabled`` of the YAML config file, as the emitter's settings read it. A driver without a config
    file imports nothing for it (the check is a ``stat``). With one, PyYAML reads the key, once per version of the
    file; the emitter's settings (pydantic, every source, the whole file validated) are built only when it is not
    plainly off, so a file that leaves the emitter off costs a driver no more than that."""
    path = env.get(CONFIG_ENV) or DEFAULT_CONFIG_FILE
    try:
        stat = os.stat(path)
    except OSError:
        if env.get(CONFIG_ENV):
            raise ValueError(f"{CONFIG_ENV}={path!r}: no such file; expected a YAML config file") from None
        return False
    key = (os.path.abspath(path), stat.st_mtime_ns, stat.st_size)
    if key not in _MAY_ENABLE:
        _MAY_ENABLE[key] = _may_enable(path)
    if not _MAY_ENABLE[key]:
        return False
    from lineagewire.exceptions import LineagewireError
    from lineagewire.producers.spark.config import resolve_config

    try:
        return resolve_config().enabled
    except LineagewireError as exc:
        raise ValueError(f"emitter.enabled of the config file cannot be read: {exc}") from None


def _may_enable(path):
    """False when the YAML file ``path`` plainly leaves the emitter off (no ``emitter.enabled``, or false); True
    for anything else, a file that cannot be read among them: the emitter's settings then decide, or say what is
    wrong."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            document = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return True
    if document is None:
        return False
    if not isinstance(document, dict):
        return True
    section = document.get("emitter")
    if section is None:
        return False
    return not isinstance(section, dict) or section.get("enabled") not in (None, False)


def activate_if_enabled(session):
    """Start the emitter on ``session`` when the activation settings say so; one line on stderr otherwise
    when they are wrong (the wrapped getOrCreate's whole work)."""
    try:
        # A conf look-up on a SparkSession: classic (py4j) or a Spark Connect client (an RPC to its server).
        wanted = enabled(session.conf.get(ENABLED_KEY, None))
    except ValueError as exc:
        sys.stderr.write(f"lineagewire: {exc}; the job runs without the emitter\n")
        return
    except Exception as exc:  # noqa: BLE001 - a session whose conf cannot be read: leave it alone
        sys.stderr.write(f"lineagewire: cannot read {ENABLED_KEY} ({exc}); the job runs without the emitter\n")
        return
    if not wanted:
        return
    try:
        from lineagewire.producers.spark.instrument import activate_on
    except Exception as exc:  # noqa: BLE001 - a broken or partial install: one line, the job goes on
        sys.stderr.write(f"lineagewire: {ENABLED_KEY} is set but lineagewire cannot be imported in this Python "
                         f"({sys.executable}): {exc}; the job runs without the emitter\n")
        return
    activate_on(session)


def _patch(module):
    builder = module.SparkSession.Builder
    original = builder.getOrCreate
    if getattr(original, "_lineagewire", False):
        return

    def getOrCreate(self):  # noqa: N802 - PySpark's name
        session = original(self)
        try:
            activate_if_enabled(session)
        except Exception as exc:  # noqa: BLE001 - activation must never break the job
            sys.stderr.write(f"lineagewire: not instrumenting this SparkSession: {exc}\n")
        return session

    getOrCreate._lineagewire = True
    getOrCreate.__doc__ = original.__doc__
    builder.getOrCreate = getOrCreate


class _SessionModuleHook:
    """Waits for ``pyspark.sql.session``, then wraps getOrCreate once it has run; removes itself.

    A meta path finder needs only ``find_spec``: not subclassing ``importlib.abc.MetaPathFinder`` saves
    every Python start-up the ~8 ms of importing ``importlib.abc`` (and ``typing`` with it).
    """

    def find_spec(self, name, path, target=None):
        if name != "pyspark.sql.session":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            if module.__name__ != name:
                return
            try:
                del loader.exec_module  # back to the class's own method
                _patch(module)
            except Exception as exc:  # noqa: BLE001
                sys.stderr.write(f"lineagewire: cannot hook SparkSession: {exc}\n")

        loader.exec_module = exec_and_patch
        return spec


def install_hook():
    """Hook ``pyspark.sql.session`` (once per process; at once if it is already imported)."""
    if any(isinstance(f, _SessionModuleHook) for f in sys.meta_path):
        return
    session_module = sys.modules.get("pyspark.sql.session")
    if session_module is not None:
        _patch(session_module)
        return
    sys.meta_path.insert(0, _SessionModuleHook())
