"""The webhook's serving certificate, reloaded in place when its files change.

cert-manager renews the certificate into its Secret; the kubelet updates the mounted Secret volume by
swapping a symlink (`..data`), so the files change all at once without any event a process could
wait for. The files are read again every few seconds and, when their bytes differ, loaded into the same
SSL context the server listens with: the next handshake presents the new certificate, with no restart
and no moment without a listener (kopf's own file check restarts its server instead, once a minute).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
from pathlib import Path

import kopf

log = logging.getLogger("berth.operator")
CHECK_SECONDS = 5.0
# kopf's own check of the same files would restart the server: it is put off for good.
NEVER = 10.0 * 365 * 24 * 3600


class CertReloader:
    def __init__(self, context: ssl.SSLContext, certfile: str, keyfile: str) -> None:
        self.context, self.certfile, self.keyfile = context, certfile, keyfile
        self.digest = ""
        self.check()

    def _read(self) -> tuple[bytes, bytes]:
        return Path(self.certfile).read_bytes(), Path(self.keyfile).read_bytes()

    def check(self) -> bool:
        """Load the files into the context if they changed since the last load; True if they were."""
        try:
            cert, key = self._read()
        except OSError as exc:  # mid-swap, or the volume is gone for a moment: keep serving the old one
            log.warning("webhook certificate not read: %s", exc)
            return False
        digest = hashlib.sha256(cert + b"\0" + key).hexdigest()
        if digest == self.digest:
            return False
        try:
            self.context.load_cert_chain(self.certfile, self.keyfile)
        except (ssl.SSLError, OSError) as exc:  # a certificate and a key of two generations
            log.warning("webhook certificate not loaded (will retry): %s", exc)
            return False
        if self.digest:
            log.info("webhook certificate reloaded from %s", self.certfile)
        self.digest = digest
        return True

    async def run(self, interval: float = CHECK_SECONDS) -> None:
        while True:
            await asyncio.sleep(interval)
            self.check()


def server_context() -> ssl.SSLContext:
    return ssl.create_default_context(purpose=ssl.Purpose.CLIENT_AUTH)


class ReloadingWebhookServer(kopf.WebhookServer):
    """kopf's webhook server on an SSL context whose certificate `CertReloader` keeps current."""

    def __init__(self, *, certfile: str, pkeyfile: str, interval: float = CHECK_SECONDS, **kw) -> None:
        context = server_context()
        self.reloader = CertReloader(context, certfile, pkeyfile)
        self.interval = interval
        super().__init__(
            context=context, certfile=certfile, pkeyfile=pkeyfile, file_check_interval=NEVER, **kw
        )

    async def __call__(self, fn):  # type: ignore[override]
        task = asyncio.create_task(self.reloader.run(self.interval), name="webhook certificate")
        try:
            async for config in super().__call__(fn):
                yield config
        finally:
            task.cancel()
