"""`berth operator`: run the kopf operator with berth's settings."""

from __future__ import annotations

import asyncio
import datetime
import logging
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

import kopf

from berth.certs import self_signed
from berth.cluster.credentials import Credentials, load_credentials
from berth.cluster.kubeapi import KubeClient
from berth.errors import BerthError
from berth.operator import handlers, peering, policy_requeue, refresh  # handlers: registers them
from berth.operator.cache import OperatorCache
from berth.operator.logs import quiet_refusals
from berth.operator.tlsreload import ReloadingWebhookServer
from berth.vocab.alloc.config import AllocatorConfig

WEBHOOK_NAME = "berth.dev"
LOGIN_RETRY_SECONDS = 10
TOKEN_FILE_RELOGIN = 300  # seconds: kopf logs in again this often with a token file, to see it rotate


@dataclass(frozen=True)
class OperatorOptions:
    namespaces: tuple[str, ...] = ()  # empty: the whole cluster
    peering: str | None = "berth"  # None: standalone (one replica, no peering objects)
    # kopf pauses every operator of a peering whose priority is not the highest, and all of them on a
    # tie: each replica draws its own priority (0: at random), so exactly one is active and another
    # takes over when its peering record lapses. Paused or not, every replica serves the webhooks.
    priority: int = 0
    webhook_port: int = 9443
    webhook_addr: str = "0.0.0.0"
    webhook_host: str | None = None  # the host the API server reaches the webhook at (managed mode)
    webhook_cert: str | None = None
    webhook_key: str | None = None
    webhook_ca: str | None = None
    self_signed: bool = False
    manage_webhooks: bool = False  # write the ValidatingWebhookConfiguration (local runs)
    liveness: str | None = None  # e.g. http://0.0.0.0:8080/healthz
    # The allocator configuration berth serve schedules with: the webhook checks the packages pods name.
    config: AllocatorConfig | None = None
    # The schedulers berth serves: a pod with berth rules and another scheduler gets a warning.
    scheduler_names: tuple[str, ...] = handlers.DEFAULT_SCHEDULERS


def configure(settings: kopf.OperatorSettings, options: OperatorOptions) -> None:
    # Progress and the last handled spec live in annotations under berth.dev: the CRD's status schema is
    # structural, so kopf's own status fields would be pruned.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="berth.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="berth.dev", key="last-handled-configuration"
    )
    settings.persistence.finalizer = "berth.dev/operator"
    settings.posting.level = logging.INFO
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60
    if options.peering:
        settings.peering.name = options.peering
        settings.peering.mandatory = True
    # berth's resources are known: do not scan the cluster for CRDs (its RBAC does not allow it).
    settings.scanning.disabled = True
    settings.admission.server = _webhook_server(options)
    if options.manage_webhooks:
        settings.admission.managed = WEBHOOK_NAME


def _webhook_server(options: OperatorOptions) -> kopf.WebhookServer:
    cert, key, ca = options.webhook_cert, options.webhook_key, options.webhook_ca
    host = options.webhook_host or options.webhook_addr
    if options.self_signed:
        files = self_signed(Path(tempfile.mkdtemp(prefix="berth-webhook-")), [host, "localhost", "127.0.0.1"])
        cert, key, ca = str(files.cert), str(files.key), str(files.ca)
    if cert and key:
        # a certificate from a Secret (cert-manager renews it): reloaded in place when it changes
        return ReloadingWebhookServer(
            addr=options.webhook_addr,
            port=options.webhook_port,
            host=host,
            certfile=cert,
            pkeyfile=key,
            cafile=ca,
        )
    return kopf.WebhookServer(
        addr=options.webhook_addr,
        port=options.webhook_port,
        host=host,
        certfile=cert,
        pkeyfile=key,
        cafile=ca,
    )


def connection_info(creds: Credentials) -> kopf.ConnectionInfo:
    """berth's credentials as kopf's: the same server, CA, client certificate, proxy, namespace and
    Authorization header. kopf logs in again when `expiration` passes (an exec credential about to
    expire, a token file that may have rotated) or when the API server answers 401."""
    scheme, _, token = (creds.authorization() or "").partition(" ")
    expiration = creds.expiration()
    if expiration is None and creds.token_file:
        expiration = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=TOKEN_FILE_RELOGIN)
    return kopf.ConnectionInfo(
        server=creds.server,
        ca_path=creds.ca_file,
        insecure=creds.insecure or None,
        scheme=scheme or None,
        token=token or None,
        certificate_path=creds.cert_file,
        private_key_path=creds.key_file,
        default_namespace=creds.namespace,
        proxy_url=creds.proxy,
        expiration=expiration,
    )


def run(options: OperatorOptions, *, kubeconfig: str | None = None, context: str | None = None) -> None:
    # Before kopf starts: a bad kubeconfig, context or credential plugin is one line, at once.
    first = [load_credentials(kubeconfig, context)]
    handlers.use_allocator_config(options.config)
    handlers.use_scheduler_names(options.scheduler_names)

    @kopf.on.startup()
    def _startup(settings: kopf.OperatorSettings, **_: object) -> None:
        configure(settings, options)

    @kopf.on.login()
    def _login(logger: logging.Logger, **_: object) -> kopf.ConnectionInfo:
        # The same credentials as every other berth command; each later login reads them anew.
        try:
            creds = first.pop() if first else load_credentials(kubeconfig, context)
        except BerthError as exc:
            # e.g. a credential plugin failing for a while: kopf tries the login again
            logger.error("login: %s", exc.message)
            raise kopf.TemporaryError(exc.message, delay=LOGIN_RETRY_SECONDS) from None
        return connection_info(creds)

    # kopf pauses a replica whose peer has a higher priority: drawn here, so that the refresh can tell
    # from the peering object whether this replica is the active one (berth.operator.peering).
    priority = options.priority or secrets.randbelow(2**31 - 1) + 1

    @kopf.on.startup()
    async def _background(memo: kopf.Memo, policies_by_namespace: kopf.Index, **_: object) -> None:
        # The nodes and pods, from berth's reflector (berth.operator.cache): warm in every replica.
        cache = OperatorCache(KubeClient(load_credentials(kubeconfig, context)), options.namespaces)
        await cache.start()
        handlers.use_cache(cache)
        memo.cache = cache
        client = KubeClient(load_credentials(kubeconfig, context))

        def stale(namespaces):
            return handlers.stale_counts(namespaces, policies_by_namespace, cache.pods_of, cache.nodes)

        memo.refresh = asyncio.create_task(
            refresh.run(
                client,
                stale,
                lambda: list(policies_by_namespace),
                refresh.INTERVAL_SECONDS,
                ready=cache.ready,
                active=lambda: peering.active(client, options.peering, priority, options.namespaces),
            )
        )
        memo.refresh_client = client
        requeue_client = KubeClient(load_credentials(kubeconfig, context))
        memo.requeue = asyncio.create_task(policy_requeue.run(requeue_client, cache.waiting_by_namespace))
        memo.requeue_client = requeue_client

    @kopf.on.cleanup()
    async def _stop_refresh(memo: kopf.Memo, **_: object) -> None:
        for task, client in (("refresh", "refresh_client"), ("requeue", "requeue_client")):
            if getattr(memo, task, None) is not None:
                getattr(memo, task).cancel()
                await getattr(memo, client).aclose()
        if getattr(memo, "cache", None) is not None:
            handlers.use_cache(None)
            await memo.cache.stop()

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_refusals()
    asyncio.run(
        kopf.operator(
            clusterwide=not options.namespaces,
            namespaces=list(options.namespaces),
            standalone=options.peering is None,
            priority=priority,
            liveness_endpoint=options.liveness,
        )
    )
