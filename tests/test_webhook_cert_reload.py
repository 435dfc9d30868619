"""The webhook's serving certificate is reloaded when the kubelet swaps its Secret volume, without a
restart: the server keeps its listening socket and the next handshake presents the new certificate."""

from __future__ import annotations

import asyncio
import os
import ssl
from pathlib import Path

from cryptography import x509

from berth.certs import CertFiles, self_signed
from berth.operator.tlsreload import CertReloader, ReloadingWebhookServer, server_context


def _volume(root: Path) -> Path:
    """A Secret volume as the kubelet lays it out: tls.crt -> ..data/tls.crt, ..data -> a dated dir."""
    volume = root / "volume"
    volume.mkdir()
    for name in ("tls.crt", "tls.key"):
        (volume / name).symlink_to(f"..data/{name}")
    return volume


def _project(volume: Path, files: CertFiles, generation: str) -> None:
    """The kubelet's atomic update: a new dated dir, then ..data swapped to it by a rename."""
    dated = volume / f"..{generation}"
    dated.mkdir()
    (dated / "tls.crt").write_bytes(files.cert.read_bytes())
    (dated / "tls.key").write_bytes(files.key.read_bytes())
    (volume / "..data_tmp").symlink_to(dated.name)
    os.replace(volume / "..data_tmp", volume / "..data")


async def _served_serial(port: int, ca: Path) -> int:
    client = ssl.create_default_context(cafile=str(ca))
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    return x509.load_der_x509_certificate(der).serial_number


def _serial(files: CertFiles) -> int:
    return x509.load_pem_x509_certificate(files.cert.read_bytes()).serial_number


def test_a_swapped_secret_volume_is_served_from_the_next_handshake_on(tmp_path):
    old = self_signed(tmp_path / "old", ["127.0.0.1"])
    new = self_signed(tmp_path / "new", ["127.0.0.1"])
    volume = _volume(tmp_path)
    _project(volume, old, "1")
    context = server_context()
    reloader = CertReloader(context, str(volume / "tls.crt"), str(volume / "tls.key"))

    async def scenario() -> tuple[int, int, bool]:
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0, ssl=context)
        port = server.sockets[0].getsockname()[1]
        before = await _served_serial(port, old.ca)
        assert reloader.check() is False  # unchanged files: nothing to load
        _project(volume, new, "2")
        reloaded = reloader.check()
        after = await _served_serial(port, new.ca)
        server.close()
        return before, after, reloaded

    before, after, reloaded = asyncio.run(scenario())
    assert (before, after, reloaded) == (_serial(old), _serial(new), True)


def test_a_certificate_and_a_key_of_two_generations_keep_the_old_pair_until_both_match(tmp_path):
    old = self_signed(tmp_path / "old", ["127.0.0.1"])
    new = self_signed(tmp_path / "new", ["127.0.0.1"])
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(old.cert.read_bytes())
    key.write_bytes(old.key.read_bytes())
    reloader = CertReloader(server_context(), str(cert), str(key))
    cert.write_bytes(new.cert.read_bytes())  # the key not yet
    assert reloader.check() is False
    key.write_bytes(new.key.read_bytes())
    assert reloader.check() is True


def test_kopfs_webhook_server_presents_the_renewed_certificate_without_restarting(tmp_path):
    old = self_signed(tmp_path / "old", ["127.0.0.1"])
    new = self_signed(tmp_path / "new", ["127.0.0.1"])
    volume = _volume(tmp_path)
    _project(volume, old, "1")
    server = ReloadingWebhookServer(
        addr="127.0.0.1",
        port=0,
        host="127.0.0.1",
        certfile=str(volume / "tls.crt"),
        pkeyfile=str(volume / "tls.key"),
        interval=0.05,
    )

    async def fn(*_, **__):
        return {}

    async def scenario() -> tuple[int, int]:
        configs = server(fn)
        config = await configs.__anext__()
        port = int(config["url"].rsplit(":", 1)[1].split("/")[0])
        before = await _served_serial(port, old.ca)
        _project(volume, new, "2")
        for _ in range(100):  # the reloader's own task picks the new files up
            await asyncio.sleep(0.05)
            try:
                after = await _served_serial(port, new.ca)
                break
            except ssl.SSLError:
                continue
        await configs.aclose()
        return before, after

    before, after = asyncio.run(scenario())
    # the same port throughout: kopf's server was not restarted to get there
    assert (before, after) == (_serial(old), _serial(new))
