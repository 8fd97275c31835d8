"""Alembic's entry point for this store's migrations; the work is in ``lineagewire.db.migrate.run_env``."""

from lineagewire.db.migrate import run_env

run_env()
