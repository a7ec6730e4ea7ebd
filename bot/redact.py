"""The process's known secrets, and `redact()` that hides each of them in any text shown to a user.

Values are registered where they are read (env_var() values, the state password, credentials inside
connection URLs) and every BotError's text goes through `redact`. Values shorter than three
characters are never registered: masking every `a` or `42` would turn each message into asterisks.
"""

from __future__ import annotations

import re
import threading
from typing import Callable
from urllib.parse import unquote

MASK = "***"
MIN_LENGTH = 3

_lock = threading.Lock()
_values: list[str] = []            # as registered, replayed to a hook set later
_forms: set[str] = set()           # what `redact` looks for (values, their lines, their repr forms)
_pattern: re.Pattern[str] | None = None
_hook: Callable[[str], None] | None = None

# A setting or URL parameter whose name says it holds a secret: a name (or a dotted segment of it)
# ending in one of these words (token, sslpassword, access.key, keyPassword, client_secret...).
_SECRET_NAME = re.compile(r"(password|passwd|pwd|secret|token|key|keyfile|credentials?|authorization|bearer)$", re.I)
_PARAM = re.compile(r"([?&;])([\w.-]+)=([^&;#\s]*)")
# `user:password@`: the password runs to the URL's last `@` (one written unencoded may hold `/`, `?`, `#`, `@`)
_USERINFO = re.compile(r"(://)([^/?#\s:@]*):(\S*?)@(?=[^@\s]*(?:\s|$))")


def register(value: object) -> None:
    """Remember a secret: from now on `redact` replaces it (in any letter case) by `***`.

    Empty values and values of one or two characters are ignored (they would mask everything).
    Each line of a multi-line value, and its escaped form as `repr` prints it, is masked too. The
    `on_register` hook is told of each new value.

    >>> register("Hunter2-pw"); redact("password HUNTER2-PW refused, hunter2-pw too")
    'password *** refused, *** too'
    >>> register("ab"); redact("ab stays")
    'ab stays'
    """
    if value is None:
        return
    text = str(value)
    forms = {text, text.strip(), repr(text)[1:-1], *(line.strip() for line in text.splitlines())}
    forms = {form for form in forms if len(form) >= MIN_LENGTH}
    global _pattern
    with _lock:
        new = forms - _forms
        if not new:
            return
        _forms.update(new)
        _values.append(text)
        ordered = sorted(_forms, key=len, reverse=True)   # longest first: a secret inside another
        _pattern = re.compile("|".join(re.escape(form) for form in ordered), re.IGNORECASE)
        hook = _hook
    if hook is not None:
        hook(text)


_PLAIN = re.compile(r"[+-]?\d+(?:\.\d+)?|true|false|yes|no|on|off|none|null", re.IGNORECASE)


def register_env_value(value: object) -> None:
    """Register a value read through env_var(), unless it is a plain number or flag.

    A port, a count or `true` is no credential, and masking `5432` would garble every SHA, digest and
    timestamp that happens to hold it (GitHub would even drop a step output with a masked value in it).

    >>> register_env_value("5432"); register_env_value("s3cret-pw"); redact("sha 0f5432ab, pw s3cret-pw")
    'sha 0f5432ab, pw ***'
    >>> forget_all()
    """
    if value is not None and not _PLAIN.fullmatch(str(value).strip()):
        register(value)


def forget_all() -> None:
    """Forget every registered secret (the hook stays): for tests, which share one process."""
    global _pattern
    with _lock:
        _values.clear()
        _forms.clear()
        _pattern = None


def redact(text: str) -> str:
    """`text` with every registered secret replaced by `***`, matched case-insensitively; a `str` subclass
    (text already written for one medium) keeps its type."""
    pattern = _pattern
    if pattern is None or not text:
        return text
    done = pattern.sub(MASK, text)
    return done if type(text) is str else type(text)(done)


def on_register(hook: Callable[[str], None] | None) -> None:
    """Call `hook(value)` for every secret registered from now on, and at once for those already known.

    The CLI sets one under GitHub Actions that prints `::add-mask::` lines; None removes it.
    """
    global _hook
    with _lock:
        _hook = hook
        known = list(_values)
    for value in known if hook is not None else ():
        hook(value)


def is_secret_name(name: str) -> bool:
    """Whether a setting or URL parameter named so holds a secret.

    >>> [is_secret_name(n) for n in ("token", "sslpassword", "spark.hadoop.fs.s3a.secret.key", "user_id", "use_ssl")]
    [True, True, True, False, False]
    """
    return any(_SECRET_NAME.search(part) for part in re.split(r"[._-]", name) if part)


def url_credentials(url: str) -> tuple[str, ...]:
    """The secrets inside a connection URL: a `user:password@` password and secret-named parameters.

    Parameters are `?a=1&b=2` query parameters or Spark Connect's `;name=value` ones; each value
    comes as written and, when it differs, percent-decoded.

    >>> url_credentials("sc://h:443/;use_ssl=true;token=abc123;user_id=me")
    ('abc123',)
    >>> url_credentials("postgresql://bot:p%40ss@db:5432/m?sslmode=require&sslpassword=kp1")
    ('p%40ss', 'p@ss', 'kp1')
    >>> url_credentials("postgresql://bot:pa/ss#1@db/m"), url_credentials("https://h/hook?Authorization=Bearer-x1")
    (('pa/ss#1',), ('Bearer-x1',))
    """
    found: list[str] = []
    for match in _USERINFO.finditer(url):
        found.append(match.group(3))
    for match in _PARAM.finditer(url):
        if is_secret_name(match.group(2)):
            found.append(match.group(3))
    decoded = [form for raw in found for form in (raw, unquote(raw))]
    return tuple(dict.fromkeys(value for value in decoded if value))


def register_url(url: str | None) -> None:
    """Register every secret `url_credentials` finds in `url` (None and plain values are fine)."""
    for secret in url_credentials(url or ""):
        register(secret)


def register_setting(name: str, value: object) -> None:
    """Register a setting's value when its name says it is a secret, and any credentials in it as a URL.

    A true/false value is not registered whatever the name (it cannot be a secret worth masking).
    """
    if value is None:
        return
    text = str(value)
    if is_secret_name(name) and text.strip().lower() not in ("true", "false"):
        register(text)
    register_url(text)


def mask_url(url: str) -> str:
    """`url` with its credentials (see `url_credentials`) replaced by `***`, to name it in a message.

    >>> mask_url("sc://spark.example.com:443/;use_ssl=true;token=abc123")
    'sc://spark.example.com:443/;use_ssl=true;token=***'
    >>> mask_url("postgresql://bot:pw@db/meshbot?password=x")
    'postgresql://bot:***@db/meshbot?password=***'
    """
    url = _USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:{MASK}@", url)
    return _PARAM.sub(lambda m: f"{m.group(1)}{m.group(2)}={MASK}" if is_secret_name(m.group(2))
                      else m.group(0), url)
