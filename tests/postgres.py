"""A throwaway PostgreSQL server from Debian's binaries, in a temporary folder on 127.0.0.1.

``initdb`` refuses to run as root, and CI runs as root: then the data folder
belongs to the unprivileged ``nobody`` and every server command runs as that
user through ``runuser`` (util-linux); as any other user it runs directly.
Authentication is ``trust`` for the local superuser ``postgres``, which is
fine for a server bound to 127.0.0.1 that lives for one test session.
"""

from __future__ import annotations

import glob
import os
import pathlib
import pwd
import shutil
import subprocess
import tempfile
import uuid

from lineagewire.kafka.local import free_port

__all__ = ["LocalPostgres", "find_bin_dir"]

_SEARCH = ("/usr/lib/postgresql/*/bin",)


def find_bin_dir() -> pathlib.Path | None:
    """The newest Debian PostgreSQL bin folder with initdb and pg_ctl (``LINEAGEWIRE_PG_BIN`` overrides)."""
    forced = os.environ.get("LINEAGEWIRE_PG_BIN")
    candidates = [forced] if forced else sorted(
        (p for pattern in _SEARCH for p in glob.glob(pattern)), key=lambda p: int(p.split("/")[-2]), reverse=True)
    for c in candidates:
        d = pathlib.Path(c)
        if (d / "initdb").is_file() and (d / "pg_ctl").is_file():
            return d
    return None


class LocalPostgres:
    """``start()`` initdb + pg_ctl start on a free port; ``url(db)`` a SQLAlchemy URL; ``stop()`` removes it all."""

    def __init__(self, bin_dir: pathlib.Path, *, port: int | None = None) -> None:
        self.bin = bin_dir
        self.port = port or free_port()
        self.base = pathlib.Path(tempfile.mkdtemp(prefix="lineagewire-pg-"))
        self.data = self.base / "data"
        self._user: str | None = None
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                raise RuntimeError("running as root needs runuser (util-linux) to start PostgreSQL as 'nobody'")
            self._user = "nobody"
            nobody = pwd.getpwnam(self._user)
            os.chown(self.base, nobody.pw_uid, nobody.pw_gid)

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self._user is not None:
            cmd = ["runuser", "-u", self._user, "--", *cmd]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.base, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr.strip()[-2000:]}")
        return result

    def start(self) -> LocalPostgres:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = (f"-h 127.0.0.1 -p {self.port} -k {self.base} -c fsync=off -c synchronous_commit=off "
                   "-c max_connections=100")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.base / "server.log"), "-o", options, "-w",
                  "-t", "120", "start")
        return self

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; returns its SQLAlchemy URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
