"""Where the archive lives: a local folder or any fsspec URL (``s3://``, ``gs://``, ``abfs://``).

``Storage.put`` is the durability point of the archive: on a local disk it
writes a temporary file, fsyncs it, renames it over the target and fsyncs the
folder, so a crash leaves either the old file or the whole new one; on an
object store a single PUT is already all-or-nothing.
"""

from __future__ import annotations

import os
import pathlib
import uuid
from typing import Any

from lineagewire.exceptions import ConfigError, MissingExtraError

try:
    import fsspec
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("fsspec", "audit", "The audit archive") from exc

__all__ = ["Storage"]

#: the fsspec implementation each remote scheme needs, for the error that names the fix
_SCHEME_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "abfs": "adlfs", "az": "adlfs"}


class Storage:
    """The archive root ``url`` (a path or an fsspec URL) with the few operations the archive needs."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        if not url:
            raise ConfigError("archive location is empty; expected a folder or a URL such as s3://bucket/archive")
        self.url = url
        try:
            self.fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
        except ImportError as exc:
            scheme = url.split("://", 1)[0]
            pkg = _SCHEME_PACKAGES.get(scheme, f"the fsspec implementation of {scheme}://")
            raise ConfigError(f"archive {url!r} needs {pkg}; install it with: pip install {pkg}") from exc
        except ValueError as exc:
            raise ConfigError(f"archive {url!r}: {exc}; expected a folder or an fsspec URL") from exc
        self.root = root.rstrip("/")
        self.local = "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,))

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def rel(self, full: str) -> str:
        full = full.rstrip("/")
        return full[len(self.root) + 1:] if full.startswith(self.root + "/") else full

    def put(self, rel: str, data: bytes) -> None:
        """Write ``data`` at ``rel`` durably and atomically (see the module docstring)."""
        target = self.path(rel)
        if not self.local:
            self.fs.pipe_file(target, data)
            return
        folder = pathlib.Path(target).parent
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{pathlib.Path(target).name}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)  # the rename itself must survive a power cut
        finally:
            os.close(fd)

    def get(self, rel: str) -> bytes | None:
        """The bytes at ``rel``, or None if there is no such file."""
        try:
            return self.fs.cat_file(self.path(rel))
        except FileNotFoundError:
            return None

    def exists(self, rel: str) -> bool:
        return bool(self.fs.exists(self.path(rel)))

    def glob(self, pattern: str) -> list[str]:
        """Paths (relative to the root) matching ``pattern``, sorted."""
        return sorted(self.rel(p) for p in self.fs.glob(self.path(pattern)))

    def open(self, rel: str, mode: str = "rb") -> Any:
        return self.fs.open(self.path(rel), mode)
