"""Rendering the bot's templates: a sandboxed Jinja2 environment per medium that escapes every value it is given."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

import jinja2
from jinja2.sandbox import SandboxedEnvironment
from markupsafe import Markup

from bot.errors import BotError
from bot.redact import redact
from bot.report.comment_state import has_comment_marker, section_close, section_open
from bot.report.media import (ESCAPE, WRITTEN, Medium, Written, github_mention, markdown_code, markdown_fence,
                              markdown_html, markdown_text, markdown_url, medium_of, plain_text, slack_code,
                              slack_url, text_code)


def _shipped_templates() -> Path:
    """Installed from a wheel, the templates are bot/templates (setup.py maps them there); in a checkout
    they are its top-level templates/ folder."""
    installed = Path(__file__).resolve().parents[1] / "templates"
    return installed if installed.is_dir() else Path(__file__).resolve().parents[2] / "templates"


TEMPLATES_DIR = _shipped_templates()


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


def _templates_dir() -> Path:
    return Path(os.environ.get("MESHBOT_TEMPLATES_DIR") or TEMPLATES_DIR)


def _finalize(medium: Medium) -> Callable[[object], Markup]:
    """Jinja's finalize for `medium`: every interpolated value has the known secrets redacted and is escaped
    for it, except what this environment produced itself (its macros' and filters' Markup) and `Written` text
    of the same medium."""
    escape = ESCAPE[medium]

    def finalize(value: object) -> Markup:
        if isinstance(value, Written):
            return Markup(value) if value.medium is medium else Markup(escape(str(value)))
        if isinstance(value, Markup):
            return value
        text = str(value)
        masked = redact(text)   # before escaping: an escaped secret (`s3cr3t\\_pw`) no longer matches itself
        return Markup(escape(masked if masked != text else value))
    return finalize


def _join(medium: Medium) -> Callable[..., Markup]:
    """Jinja's `join`, escaping each item for `medium` (the built-in one escapes HTML only)."""
    finalize = _finalize(medium)

    def join(items: Iterable[object], separator: str = "", attribute: str | None = None) -> Markup:
        values = (getattr(item, attribute) if attribute else item for item in items)
        return Markup(str(separator).join(finalize(value) for value in values))
    return join


def _markup(function: Callable[..., str]) -> Callable[..., Markup]:
    def filtered(value: object, *args: object) -> Markup:
        return Markup(function(value, *args))
    return filtered


def _text(function: Callable[[object], str]) -> Callable[[object], Markup]:
    """`md`: text escaped once; what this environment already escaped (a macro's output) stays as it is."""
    def filtered(value: object) -> Markup:
        return value if isinstance(value, Markup) and not isinstance(value, Written) else Markup(function(value))
    return filtered


def _refuse(name: str) -> Callable[..., Markup]:
    def refused(*_: object, **__: object) -> Markup:
        raise jinja2.TemplateError(f"`{name}` would place text unescaped; meshbot's renderer escapes every value")
    return refused


@lru_cache(maxsize=8)
def _environment(folder: str, medium: Medium) -> SandboxedEnvironment:
    # autoescape makes macros and filters return Markup, which finalize lets through; finalize escapes
    # everything else for the medium, so a template never needs to remember an escaping filter.
    env = SandboxedEnvironment(loader=jinja2.FileSystemLoader(folder), undefined=jinja2.StrictUndefined,
                               keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
                               autoescape=True, finalize=_finalize(medium))
    env.filters.update(pct=pct, pluralize=pluralize, join=_join(medium), safe=_refuse("safe"))
    if medium is Medium.MARKDOWN:
        env.filters.update(md=_text(markdown_text), code=_markup(markdown_code), html=_markup(markdown_html),
                           fence=_markup(markdown_fence), e=_markup(markdown_html), escape=_markup(markdown_html),
                           url=_markup(markdown_url), mention=_markup(github_mention))
        env.globals.update(section_open=section_open, section_close=section_close)
    elif medium is Medium.SLACK:
        env.filters.update(code=_markup(slack_code), url=_markup(slack_url))
    elif medium is Medium.TEXT:
        env.filters.update(code=_markup(text_code), url=_markup(plain_text))
    return env


def _medium(template_name: str, medium: Medium | None) -> Medium:
    return medium or medium_of(template_name)


def render(template_name: str, view: object, medium: Medium | None = None) -> Written:
    """Render `templates/<template_name>` with `view` (a view-model) bound as `view`.

    The text is for `medium`, by default the one the template's name says (bot.report.media.medium_of);
    every value the template interpolates is escaped for it. The PR comment template (`comment.md.j2`)
    must produce the hidden marker, or it is an error,
    because without it the bot could never find its comment again and would post duplicates.
    """
    try:
        medium = _medium(template_name, medium)
        text = _environment(str(_templates_dir()), medium).get_template(template_name).render(view=view)
    except jinja2.TemplateNotFound as error:
        raise TemplateError(f"template `{error.name}` not found in {_templates_dir()}") from None
    except jinja2.TemplateError as error:
        where = f"{template_name}:{error.lineno}" if getattr(error, "lineno", None) else template_name
        raise TemplateError(f"{where}: template failed to render: {error.message}") from None
    text = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
    if template_name.startswith("comment") and not has_comment_marker(text):
        raise TemplateError(f"{template_name}: rendered comment has no hidden meshbot marker")
    return WRITTEN[medium](text)


def render_part(template_name: str, macro: str, view: object, medium: Medium | None = None) -> Written:
    """The macro `macro` of `templates/<template_name>` applied to `view`: a line or paragraphs of a message
    that other templates place (a check's summary, the comment's deploy section, a reply), stripped."""
    try:
        medium = _medium(template_name, medium)
        module = _environment(str(_templates_dir()), medium).get_template(template_name).module
        part = getattr(module, macro, None)
        if part is None:
            raise TemplateError(f"{template_name}: no macro `{macro}`")
        text = str(part(view))
    except jinja2.TemplateNotFound as error:
        raise TemplateError(f"template `{error.name}` not found in {_templates_dir()}") from None
    except jinja2.TemplateError as error:
        raise TemplateError(f"{template_name} ({macro}): template failed to render: {error.message}") from None
    return WRITTEN[medium](re.sub(r"\n{3,}", "\n\n", text).strip())
