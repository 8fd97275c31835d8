"""DataHub GMS through acryl-datahub's ``DatahubRestEmitter``: ``ingestProposalBatch`` requests, several in flight."""

from __future__ import annotations

import logging
import threading
from typing import Any, ClassVar

from lineagewire.consumers.runtime.retry import refused_for_good, retried_4xx_text
from lineagewire.exceptions import ConfigError

from ..config import RestSinkConfig
from ..exceptions import RefusedError
from ..proposals import Proposal
from .delivery import DeliveringSink, for_emitter

log = logging.getLogger(__name__)

__all__ = ["RestSink"]


class RestSink(DeliveringSink):
    """Batches of proposals, each one ``emit_mcps`` call (one ``POST /aspects?action=ingestProposalBatch``:
    at most ``max_batch`` proposals, 200 by default as GMS takes), ``lanes`` of them in flight at once.

    Each worker thread has its own emitter (its own ``requests`` session and keep-alive connection). The
    emitters do not retry: a batch that fails is sent again whole by ``InFlight`` from the runtime's retry
    loop, which backs off and pauses the partitions. ``emitter``: one to use instead (tests).
    """

    name: ClassVar[str] = "rest"

    def __init__(self, config: RestSinkConfig, emitter: Any = None) -> None:
        super().__init__(config)
        self.config = config
        self.output = f"DataHub GMS {config.gms_url}"
        self._given = emitter
        self._local = threading.local()
        self._emitters: list[Any] = []
        self._lock = threading.Lock()
        self._checked = False

    def _new_emitter(self) -> Any:
        from datahub.emitter.rest_emitter import DatahubRestEmitter

        token = self.config.token.get_secret_value() if self.config.token else None
        return DatahubRestEmitter(self.config.gms_url, token=token, timeout_sec=self.config.timeout_sec,
                                  retry_max_times=0, openapi_ingestion=False)

    @property
    def emitter(self) -> Any:
        """This thread's emitter."""
        if self._given is not None:
            return self._given
        em = getattr(self._local, "emitter", None)
        if em is None:
            em = self._local.emitter = self._new_emitter()
            with self._lock:
                self._emitters.append(em)
        return em

    def check(self) -> None:
        from datahub.configuration.common import ConfigurationError

        try:
            self.emitter.test_connection()
        except ConfigurationError as exc:
            # Not GMS at all, or a token GMS refuses: no retry helps. Anything else (5xx, no answer) may pass.
            if "connected to the frontend service" in str(exc) or "authentication error" in str(exc):
                raise ConfigError(f"--gms-url {self.config.gms_url}: {str(exc).splitlines()[0]}") from exc
            log.warning("DataHub GMS %s does not answer yet (%s); retrying with each batch", self.config.gms_url,
                        str(exc).splitlines()[0])
            return
        except Exception as exc:  # noqa: BLE001 - any transport error: GMS is down, retried with the first batch
            log.warning("DataHub GMS %s does not answer yet (%s); retrying with each batch", self.config.gms_url, exc)
            return
        self._checked = True

    def open(self) -> None:
        if not self._checked:
            self.check()
        super().open()

    def send(self, batch: list[Proposal]) -> None:
        from datahub.configuration.common import OperationalError
        from datahub.emitter.rest_emitter import EmitMode

        em = self.emitter
        if not self._checked:
            em.test_connection()  # GMS was down at start: make sure it is GMS before writing
            self._checked = True
        try:
            em.emit_mcps(for_emitter(batch), emit_mode=EmitMode.SYNC_PRIMARY)
        except OperationalError as exc:
            status = _status(exc)
            if status is None or not refused_for_good(status):
                raise  # GMS down, busy or not reached: retried
            raise RefusedError(f"{self.output} refused {len(batch)} proposals (first {batch[0].entityUrn} "
                               f"{batch[0].aspectName}) with {status}: {str(exc.info.get('message'))[:500]}; "
                               f"expected 2xx: a 4xx answer other than {retried_4xx_text()} means GMS will "
                               "never take them, so their record is dead-lettered") from exc

    def close(self) -> None:
        super().close()
        for em in [*self._emitters, *([self._given] if self._given is not None else [])]:
            try:
                em.close()
            except Exception as exc:  # noqa: BLE001 - closing a session must not hide the shutdown
                log.debug("closing a DataHub emitter failed: %s", exc)


def _status(exc: Any) -> int | None:
    """The HTTP status of acryl-datahub's ``OperationalError``: the ``requests`` answer it was raised from (its
    ``HTTPError``), else the ``status`` of GMS's error body (``info``); None when no answer came."""
    import requests

    cause = exc.__cause__
    if isinstance(cause, requests.HTTPError) and cause.response is not None:
        return int(cause.response.status_code)
    status = exc.info.get("status") if isinstance(exc.info, dict) else None
    return status if isinstance(status, int) else None
