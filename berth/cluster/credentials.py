"""Credentials for the Kubernetes API, found as kubectl finds them.

The kubeconfig is read by the `kubernetes` package's loader (merging, contexts, certificates, tokens,
proxy-url); berth itself runs only the exec credential plugin (through the same package's ExecProvider),
so that a failing plugin is one line naming it and a credential is renewed before it expires. Requests
still go through berth's own client (berth.cluster.kubeapi.KubeClient, on aiohttp), which asks these
Credentials for the Authorization header of each request.

Where the credentials come from, as kubectl: --kubeconfig FILE; else the files of $KUBECONFIG, merged;
else ~/.kube/config; else the pod's service account (in a cluster).
"""

from __future__ import annotations

import datetime
import os
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from berth.errors import BerthError

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD_SECONDS = 60  # projected and file tokens rotate; re-read the file regularly
# An exec credential is renewed this long before it expires: 30 s, or a fifth of a shorter lifetime.
RENEW_BEFORE_SECONDS = 30.0
RENEW_FRACTION = 0.2


def _one_line(text: str, limit: int = 600) -> str:
    line = " | ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return line if len(line) <= limit else line[: limit - 3] + "..."


class ExecPlugin:
    """A `users[].user.exec` credential plugin: run when a credential is needed, again when it is about to
    expire (or the API server refused it). Thread-safe: the client runs it off the event loop."""

    def __init__(self, exec_config: Any, cwd: str, cluster: Any, *, where: str) -> None:
        from kubernetes.config.exec_provider import ExecProvider
        from kubernetes.config.kube_config import ConfigException

        self.command = str(exec_config.safe_get("command") or "")
        self.install_hint = str(exec_config.safe_get("installHint") or "").strip()
        self.where = where
        try:
            self._provider = ExecProvider(exec_config, cwd, cluster)
        except ConfigException as exc:
            raise BerthError(f"{where}: exec plugin {self.command!r}: {exc}") from None
        self._lock = threading.Lock()
        self.token = ""
        self.cert: tuple[str, str] | None = None  # PEM client certificate and key, when it gives those
        self.expires: float | None = None  # time.time() of expirationTimestamp
        self._renew_at: float | None = None
        self.runs = 0

    def stale(self) -> bool:
        return self.runs == 0 or (self._renew_at is not None and time.time() >= self._renew_at)

    def run(self) -> None:
        from kubernetes.config.kube_config import ConfigException

        with self._lock:
            name = f"{self.where}: exec plugin {self.command!r}"
            try:
                status = self._provider.run()
            except ConfigException as exc:
                raise BerthError(f"{name} failed: {_one_line(str(exc).removeprefix('exec: '))}") from None
            except OSError as exc:
                hint = f" ({_one_line(self.install_hint)})" if self.install_hint else ""
                raise BerthError(f"{name} could not run: {exc.strerror or exc}{hint}") from None
            token = status.get("token") if isinstance(status, dict) else None
            cert = status.get("clientCertificateData") if isinstance(status, dict) else None
            key = status.get("clientKeyData") if isinstance(status, dict) else None
            if not token and not (cert and key):
                raise BerthError(f"{name}: its ExecCredential status has neither a token nor a certificate")
            self.token = token or ""
            self.cert = (cert, key) if cert and key else None
            self.expires = self._renew_at = None
            expiry = status.get("expirationTimestamp")
            if expiry:
                try:
                    stamp = datetime.datetime.fromisoformat(str(expiry).replace("Z", "+00:00"))
                except ValueError:
                    raise BerthError(f"{name}: expirationTimestamp {expiry!r} is not a time") from None
                if stamp.tzinfo is None:
                    stamp = stamp.replace(tzinfo=datetime.UTC)
                self.expires = stamp.timestamp()
                lifetime = max(0.0, self.expires - time.time())
                self._renew_at = self.expires - min(RENEW_BEFORE_SECONDS, lifetime * RENEW_FRACTION)
            self.runs += 1


@dataclass
class Credentials:
    """Where the API server is and how to authenticate to it. `authorization()` is the Authorization
    header of the next request: a token file is re-read as it rotates, an exec plugin is run again
    before its credential expires (call `refresh()` when `stale()`)."""

    server: str
    ssl_context: ssl.SSLContext | bool
    token: str = ""
    token_file: str = ""
    namespace: str = "default"
    proxy: str | None = None
    tls_server_name: str | None = None
    exec_plugin: ExecPlugin | None = None
    basic_auth: str = ""  # a whole "Basic ..." header (username/password users)
    source: str = ""  # e.g. "kubeconfig /root/.kube/config, context kind-dev", for messages
    # The same settings as files, for clients with a TLS stack of their own (kopf's login).
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False
    _token_read: float = field(default=0.0, repr=False)
    _token_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def stale(self) -> bool:
        """Whether the next authorization() would read a file or run a plugin."""
        if self.exec_plugin is not None:
            return self.exec_plugin.stale()
        return bool(self.token_file) and time.monotonic() - self._token_read > TOKEN_REREAD_SECONDS

    def refresh(self, *, force: bool = False) -> None:
        """Read the token file or run the exec plugin now (force: even if the credential looks fresh,
        e.g. after the API server answered 401). Blocking; raises BerthError naming the source."""
        if self.exec_plugin is not None:
            if force or self.exec_plugin.stale():
                self.exec_plugin.run()
                self._load_exec_certificate()
            return
        if self.token_file and (force or self.stale()):
            with self._token_lock:
                try:
                    self.token = Path(self.token_file).read_text(encoding="utf-8").strip()
                except OSError as exc:
                    raise BerthError(f"{self.source}: token file {self.token_file}: {exc.strerror}") from None
                self._token_read = time.monotonic()

    @property
    def refreshable(self) -> bool:
        return self.exec_plugin is not None or bool(self.token_file)

    def authorization(self) -> str | None:
        if self.stale():
            self.refresh()
        token = self.exec_plugin.token if self.exec_plugin is not None else self.token
        if token:
            return f"Bearer {token}"
        return self.basic_auth or None

    def expiration(self) -> datetime.datetime | None:
        """When the current credential is due for renewal (an exec plugin's, before it expires)."""
        plugin = self.exec_plugin
        if plugin is not None and plugin._renew_at is not None:
            return datetime.datetime.fromtimestamp(plugin._renew_at, tz=datetime.UTC)
        return None

    def _load_exec_certificate(self) -> None:
        plugin = self.exec_plugin
        if plugin is None or plugin.cert is None or not isinstance(self.ssl_context, ssl.SSLContext):
            return
        from kubernetes.config.kube_config import _create_temp_file_with_content

        cert, key = plugin.cert
        self.cert_file = _create_temp_file_with_content(cert)
        self.key_file = _create_temp_file_with_content(key)
        # New connections present the new certificate; open ones keep the one they were made with.
        self.ssl_context.load_cert_chain(self.cert_file, self.key_file)


def _ssl_context(ca_file: str | None, insecure: bool, cert_file: str | None, key_file: str | None):
    context = ssl.create_default_context(cafile=ca_file) if not insecure else ssl.create_default_context()
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_file and key_file:
        context.load_cert_chain(cert_file, key_file)
    return context


def kubeconfig_files(kubeconfig: str | None) -> list[str]:
    """The kubeconfig files kubectl would read: --kubeconfig, else $KUBECONFIG's files that exist, else
    ~/.kube/config when it exists; [] means none (in a pod: the service account)."""
    if kubeconfig:
        path = os.path.expanduser(kubeconfig)
        if not os.path.isfile(path):
            raise BerthError(f"kubeconfig {kubeconfig}: no such file")
        return [path]
    listed = [os.path.expanduser(p) for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    existing = [p for p in listed if os.path.isfile(p)]
    if listed and not existing and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        raise BerthError(f"KUBECONFIG={os.environ['KUBECONFIG']}: none of its files exists")
    if existing:
        return existing
    default = os.path.expanduser("~/.kube/config")
    return [default] if not listed and os.path.isfile(default) else []


def _merged(files: list[str]) -> tuple[Any, str | None]:
    """The files merged as kubectl merges them (the first file to define a name or the current-context
    wins), and that current-context."""
    import yaml
    from kubernetes.config.kube_config import ConfigException, KubeConfigMerger

    merger = KubeConfigMerger("")
    current = None
    for path in files:
        try:
            merger.load_config(path)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            raise BerthError(f"kubeconfig {path}: not YAML{where}: {getattr(exc, 'problem', exc)}") from None
        except ConfigException:
            continue  # an empty file contributes nothing, as for kubectl
        except OSError as exc:
            raise BerthError(f"kubeconfig {path}: {exc.strerror}") from None
        except (AttributeError, TypeError, KeyError) as exc:
            raise BerthError(f"kubeconfig {path}: not a kubeconfig ({type(exc).__name__}: {exc})") from None
        current = current or (merger.config_files[path] or {}).get("current-context") or None
    if merger.config is None:
        raise BerthError(f"kubeconfig {os.pathsep.join(files)}: empty")
    return merger.config, current


def from_kubeconfig(files: list[str], context: str | None = None) -> Credentials:
    from kubernetes.client import Configuration
    from kubernetes.config.kube_config import ConfigException, ConfigNode, KubeConfigLoader

    label = f"kubeconfig {os.pathsep.join(files)}"
    config, current = _merged(files)
    # every entry of the merged lists is a ConfigNode that knows the file it came from
    contexts = {c.value["name"]: c for c in config.value["contexts"]}
    name = context or current
    known = ", ".join(sorted(contexts)) or "none"
    if not name:
        raise BerthError(f"{label}: no current-context; give --context (contexts: {known})")
    if name not in contexts:
        raise BerthError(f"{label}: no context {name!r} (contexts: {known})")
    label = f"{label}, context {name}"
    ctx = contexts[name].value.get("context") or {}
    user_name = ctx.get("user")
    plugin_config: Any = None
    users = config.value["users"]
    for i, node in enumerate(users):
        value = node.value
        if value.get("name") == user_name and "exec" in (value.get("user") or {}):
            # berth runs the plugin itself (below): the loader would log its failure and carry on.
            user = {k: v for k, v in value["user"].items() if k != "exec"}
            plugin_config = ConfigNode(f"users[name={user_name}]/exec", value["user"]["exec"], node.path)
            users[i] = ConfigNode(node.name, {**value, "user": user}, node.path)
            user_path = node.path
            break
    try:
        cfg = type.__call__(Configuration)
        KubeConfigLoader(config_dict=config, active_context=name, config_base_path=None).load_and_set(cfg)
    except ConfigException as exc:
        raise BerthError(f"{label}: {exc}") from None
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise BerthError(f"{label}: {type(exc).__name__}: {exc}") from None
    if not cfg.host or cfg.host == "http://localhost":
        raise BerthError(f"{label}: cluster {ctx.get('cluster')!r} has no server")
    header = cfg.api_key.get("BearerToken") or ""
    token_file = ""
    user_node = next((u for u in config.value["users"] if u.value.get("name") == user_name), None)
    if user_node is not None:
        user_value = user_node.value.get("user") or {}
        if not user_value.get("token") and user_value.get("tokenFile"):
            base = os.path.dirname(os.path.abspath(user_node.path)) if user_node.path else ""
            token_file = os.path.normpath(os.path.join(base, user_value["tokenFile"]))
    insecure = not cfg.verify_ssl
    try:
        context_ssl = _ssl_context(cfg.ssl_ca_cert, insecure, cfg.cert_file, cfg.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise BerthError(f"{label}: certificates: {exc}") from None
    creds = Credentials(
        server=cfg.host.rstrip("/"),
        ssl_context=context_ssl,
        token=header.removeprefix("Bearer ") if header.startswith("Bearer ") else "",
        basic_auth=header if header.startswith("Basic ") else "",
        token_file=token_file,
        namespace=ctx.get("namespace") or "default",
        proxy=cfg.proxy or None,
        tls_server_name=getattr(cfg, "tls_server_name", None) or None,
        source=label,
        ca_file=cfg.ssl_ca_cert or None,
        cert_file=cfg.cert_file or None,
        key_file=cfg.key_file or None,
        insecure=insecure,
    )
    if plugin_config is not None:
        # handed to the plugin only when it asks for it (provideClusterInfo)
        cluster = config["clusters"].get_with_name(ctx.get("cluster"))["cluster"]
        cwd = os.path.dirname(os.path.abspath(user_path)) if user_path else ""
        creds.exec_plugin = ExecPlugin(plugin_config, cwd, cluster, where=f"{label}, user {user_name}")
    if creds.refreshable:
        creds.refresh()  # a plugin that fails, or a token file that is missing, fails now, at start
    return creds


def in_cluster() -> Credentials:
    from kubernetes.client import Configuration
    from kubernetes.config.incluster_config import InClusterConfigLoader
    from kubernetes.config.kube_config import ConfigException

    token, ca = SERVICE_ACCOUNT / "token", SERVICE_ACCOUNT / "ca.crt"
    cfg = type.__call__(Configuration)
    try:
        InClusterConfigLoader(str(token), str(ca), try_refresh_token=False).load_and_set(cfg)
    except ConfigException as exc:
        raise BerthError(f"in-cluster service account ({SERVICE_ACCOUNT}): {exc}") from None
    namespace_file = SERVICE_ACCOUNT / "namespace"
    creds = Credentials(
        server=cfg.host,
        ssl_context=ssl.create_default_context(cafile=str(ca)),
        token_file=str(token),
        namespace=namespace_file.read_text().strip() if namespace_file.exists() else "default",
        source=f"in-cluster service account ({SERVICE_ACCOUNT})",
        ca_file=str(ca),
    )
    creds.refresh()
    return creds


def load_credentials(kubeconfig: str | Credentials | None = None, context: str | None = None) -> Credentials:
    """Credentials as kubectl would use them for `--kubeconfig kubeconfig --context context`. Credentials
    already loaded pass through unchanged (a caller that loaded them first, to fail early)."""
    if isinstance(kubeconfig, Credentials):
        return kubeconfig
    files = kubeconfig_files(kubeconfig)
    if files:
        return from_kubeconfig(files, context)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        if context:
            raise BerthError(f"--context {context}: there is no kubeconfig to take it from")
        return in_cluster()
    raise BerthError("no kubeconfig: give --kubeconfig, set KUBECONFIG, or create ~/.kube/config")
