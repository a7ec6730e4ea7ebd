"""Markdown rendering for the bot: a sandboxed Jinja2 environment, its filters, and render(name, view)."""

from __future__ import annotations

import html
import os
import re
from functools import lru_cache
from pathlib import Path

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from bot.errors import BotError
from bot.report.comment_state import has_comment_marker, is_written_here, section_close, section_open

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"


class TemplateError(BotError):
    """A bot template failed to render, or rendered without its hidden marker."""


def pct(value: float | None, decimals: int = 1) -> str:
    """A percentage with one decimal.

    >>> pct(99.456)
    '99.5%'
    """
    return "n/a" if value is None else f"{value:.{decimals}f}%"


def pluralize(count: int, singular: str, plural: str | None = None) -> str:
    """A count with its noun.

    >>> pluralize(1, "model"), pluralize(3, "model")
    ('1 model', '3 models')
    """
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"


def fence(text: str, lang: str = "") -> str:
    """A code block whose fence is longer than any backtick run inside, so it always closes.

    >>> print(fence("a ``` b", "sql"))
    ````sql
    a ``` b
    ````
    """
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def md_escape(text: str) -> str:
    """Escape characters that would turn names into markdown (tables, emphasis, links, HTML).

    >>> md_escape("a|b_<c>")
    'a\\\\|b\\\\_&lt;c&gt;'
    """
    text = str(text).replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_\[\]|])", r"\\\1", text)


def html_text(text: str) -> str:
    """Text inside an HTML block such as `<summary>`, where GitHub processes no Markdown (a `\\_` would show
    its backslash): HTML entities only.

    >>> html_text("shop.customer_revenue <a & b>")
    'shop.customer_revenue &lt;a &amp; b&gt;'
    """
    return html.escape(str(text), quote=False)


def code(text: str) -> str:
    """Inline code that survives backticks in the text.

    >>> code("a`b")
    '`` a`b ``'
    """
    text = str(text).replace("\n", " ")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _templates_dir() -> Path:
    return Path(os.environ.get("MESHBOT_TEMPLATES_DIR") or TEMPLATES_DIR)


def inert_comments(value: object) -> object:
    """Jinja's finalize: `<!--` in an interpolated value becomes `&lt;!--`, except a marker of our own
    (bot.report.comment_state), so text a pull request controls (a test message, SQL, an error) cannot forge
    the bot's hidden records.

    >>> inert_comments('x <!-- meshbot:checks {"sha": "f00"} -->')
    'x &lt;!-- meshbot:checks {"sha": "f00"} -->'
    >>> inert_comments("<!-- meshbot:section status -->")
    '<!-- meshbot:section status -->'
    """
    if isinstance(value, str) and "<!--" in value and not is_written_here(value):
        return value.replace("<!--", "&lt;!--")
    return value


@lru_cache(maxsize=4)
def _environment(folder: str) -> SandboxedEnvironment:
    env = SandboxedEnvironment(loader=jinja2.FileSystemLoader(folder), undefined=jinja2.StrictUndefined,
                               keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
                               autoescape=False, finalize=inert_comments)
    env.filters.update(pct=pct, pluralize=pluralize, fence=fence, md=md_escape, code=code, html=html_text)
    env.globals.update(section_open=section_open, section_close=section_close)
    return env


def render(template_name: str, view: object) -> str:
    """Render `templates/<template_name>` with `view` (a view-model) bound as `view`.

    The PR comment template (`comment.md.j2`) must produce the hidden marker, or it is an error,
    because without it the bot could never find its comment again and would post duplicates.
    """
    try:
        text = _environment(str(_templates_dir())).get_template(template_name).render(view=view)
    except jinja2.TemplateNotFound as error:
        raise TemplateError(f"template `{error.name}` not found in {_templates_dir()}") from None
    except jinja2.TemplateError as error:
        where = f"{template_name}:{error.lineno}" if getattr(error, "lineno", None) else template_name
        raise TemplateError(f"{where}: template failed to render: {error.message}") from None
    text = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
    if template_name.startswith("comment") and not has_comment_marker(text):
        raise TemplateError(f"{template_name}: rendered comment has no hidden meshbot marker")
    return text


def render_part(template_name: str, macro: str, view: object) -> str:
    """The macro `macro` of `templates/<template_name>` applied to `view`: a line or paragraphs of a message
    that other templates place (a check's summary, the comment's deploy section, a reply), stripped."""
    try:
        module = _environment(str(_templates_dir())).get_template(template_name).module
        part = getattr(module, macro, None)
        if part is None:
            raise TemplateError(f"{template_name}: no macro `{macro}`")
        text = str(part(view))
    except jinja2.TemplateNotFound as error:
        raise TemplateError(f"template `{error.name}` not found in {_templates_dir()}") from None
    except jinja2.TemplateError as error:
        raise TemplateError(f"{template_name} ({macro}): template failed to render: {error.message}") from None
    return re.sub(r"\n{3,}", "\n\n", text).strip()
