"""Spark Connect helpers: tell a Connect session from a classic one, parse `sc://` URLs, fail fast when unreachable."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from bot.errors import EngineError
from bot.redact import mask_url

DEFAULT_PORT = 15002   # Spark Connect's default gRPC port
_PROXY_VARIABLES = ("grpc_proxy", "GRPC_PROXY", "https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY")


@dataclass(frozen=True)
class ConnectEndpoint:
    """Host and port of an `sc://host[:port][/;param=value...]` URL."""

    host: str
    port: int


def is_connect(session: Any) -> bool:
    """True for a Spark Connect client session: it has no SparkContext, JVM or RDDs in this process."""
    return any(cls.__module__.startswith("pyspark.sql.connect") for cls in type(session).__mro__)


def parse_remote(url: str) -> ConnectEndpoint:
    """Host and port of a Spark Connect URL; the port defaults to 15002.

    >>> parse_remote("sc://spark.example.com:443/;use_ssl=true")
    ConnectEndpoint(host='spark.example.com', port=443)
    >>> parse_remote("sc://127.0.0.1")
    ConnectEndpoint(host='127.0.0.1', port=15002)
    """
    parsed = urlparse(url.split(";", 1)[0])
    if parsed.scheme != "sc" or not parsed.hostname:
        raise EngineError(f"invalid Spark Connect URL `{mask_url(url)}` (connection.remote): "
                          "expected sc://host[:port]")
    try:
        port = parsed.port or DEFAULT_PORT
    except ValueError:
        raise EngineError(f"invalid port in Spark Connect URL `{mask_url(url)}` (connection.remote)") from None
    return ConnectEndpoint(host=parsed.hostname, port=port)


def check_reachable(url: str, *, timeout: float = 10.0) -> None:
    """Raise EngineError when nothing listens at the URL's host and port.

    The Connect client itself retries a refused connection for more than ten minutes before
    failing; a plain TCP connect answers at once. Skipped when a proxy is configured, since the
    client then never connects to the host directly.
    """
    endpoint = parse_remote(url)
    if any(os.environ.get(name) for name in _PROXY_VARIABLES):
        return
    try:
        with socket.create_connection((endpoint.host, endpoint.port), timeout=timeout):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise EngineError(f"could not reach Spark Connect at {mask_url(url)} (connection.remote): {reason}; "
                          "is the server running (sbin/start-connect-server.sh)?") from None
