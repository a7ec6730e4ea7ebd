"""`notification_targets` in config.yaml / config.py: where meshbot reports applies, runs and failures."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.errors import ConfigError
from bot.redact import register, register_url

# SQLMesh's NotificationEvent values, plus test_failure and drift_detected (meshbot's own: unit tests failed;
# prod changed by anything but the default branch's deploy, told by scheduled runs); the
# migration events are accepted and never sent (`meshbot migrate` reports on its own output)
EVENTS = ("apply_start", "apply_end", "apply_failure", "run_start", "run_end", "run_failure",
          "audit_failure", "test_failure", "drift_detected", "migration_start", "migration_end", "migration_failure")
TYPES = ("slack_webhook", "webhook", "console")
_NOT_SUPPORTED = {"slack_api": "a Slack API token and channel", "smtp": "email over SMTP"}
_KEYS = {"slack_webhook": {"type", "notify_on", "url"}, "webhook": {"type", "notify_on", "url", "headers"},
         "console": {"type", "notify_on"}}


@dataclass(frozen=True)
class NotificationTarget:
    """One target: its type, the events it wants, and where it posts (URL and headers never in repr)."""

    type: str
    notify_on: frozenset[str] = frozenset()
    url: str | None = field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    config_key: str = field(default="notification_targets", compare=False)   # named in warnings

    def wants(self, event: str) -> bool:
        return event in self.notify_on


def parse_notification_targets(raw: Any, path: Path) -> tuple[NotificationTarget, ...]:
    """The `notification_targets` list; an unknown type, event or key is an error naming file and key.

    >>> parse_notification_targets([{"type": "console", "notify_on": ["run_failure"]}], Path("config.yaml"))
    (NotificationTarget(type='console', notify_on=frozenset({'run_failure'}), config_key='notification_targets[0]'),)
    >>> parse_notification_targets([{"type": "pager"}], Path("config.yaml"))
    Traceback (most recent call last):
    ...
    bot.errors.ConfigError: config.yaml: `notification_targets[0].type`: unknown notification target type `pager`; meshbot supports slack_webhook, webhook, console
    """
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError("`notification_targets` must be a list of targets", path=path)
    return tuple(_target(spec, f"notification_targets[{index}]", path) for index, spec in enumerate(raw))


def _target(spec: Any, key: str, path: Path) -> NotificationTarget:
    if not isinstance(spec, dict):
        raise ConfigError(f"`{key}` must be a mapping (type, notify_on, url...)", path=path)
    # SQLMesh's guide writes a Slack webhook target without `type`: its `url` says which one it is
    kind = str(spec.get("type") or ("slack_webhook" if "url" in spec else "")).lower()
    if kind in _NOT_SUPPORTED:
        raise ConfigError(f"`{key}.type`: `{kind}` targets ({_NOT_SUPPORTED[kind]}) are not supported by "
                          f"meshbot; use one of {', '.join(TYPES)}", path=path)
    if kind not in TYPES:
        raise ConfigError(f"`{key}.type`: unknown notification target type `{kind or '(none)'}`; meshbot "
                          f"supports {', '.join(TYPES)}", path=path)
    unknown = sorted(str(k) for k in spec if k not in _KEYS[kind])
    if unknown:
        raise ConfigError(f"`{key}`: unknown key(s) {', '.join(unknown)} for a `{kind}` target; known: "
                          f"{', '.join(sorted(_KEYS[kind]))}", path=path)
    url = _url(spec.get("url"), f"{key}.url", path) if kind != "console" else None
    return NotificationTarget(type=kind, notify_on=_events(spec.get("notify_on"), f"{key}.notify_on", path),
                              url=url, headers=_headers(spec.get("headers"), f"{key}.headers", path),
                              config_key=key)


def _events(value: Any, key: str, path: Path) -> frozenset[str]:
    items = [value] if isinstance(value, str) else value
    if items is None:
        return frozenset()
    if not isinstance(items, (list, tuple, set, frozenset)):
        raise ConfigError(f"`{key}` must be a list of events ({', '.join(EVENTS)})", path=path)
    events = {str(item).strip().lower() for item in items}
    unknown = sorted(events - set(EVENTS))
    if unknown:
        raise ConfigError(f"`{key}`: unknown event(s) {', '.join(unknown)}; known: {', '.join(EVENTS)}",
                          path=path)
    return frozenset(events)


def _url(value: Any, key: str, path: Path) -> str:
    if not value or not isinstance(value, str):
        raise ConfigError(f"`{key}` is required (usually `{{{{ env_var('...') }}}}`)", path=path)
    # A webhook URL is a credential as a whole (Slack's path is its token), not only its query
    register(value)
    register_url(value)
    if not value.lower().startswith(("https://", "http://")):
        raise ConfigError(f"`{key}` must be an http(s) URL", path=path)
    return value


def _headers(value: Any, key: str, path: Path) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ConfigError(f"`{key}` must be a mapping of header names to values", path=path)
    for item in value.values():
        register(item)
        register(str(item).split()[-1] if str(item).split() else None)   # the credential of `Bearer <token>`
    return tuple((str(name), str(item)) for name, item in value.items())
