"""Where meshbot's text lands (GitHub Markdown, Slack mrkdwn, plain text and logs, JSON, HTML/SVG pages) and how text it did not write is escaped for each."""

from __future__ import annotations

import html
import json
import re
from enum import Enum
from typing import ClassVar
from urllib.parse import quote


class Medium(Enum):
    MARKDOWN = "markdown"    # PR comments, check summaries, job summaries, replies (GitHub's cmark-gfm)
    SLACK = "slack"          # Slack mrkdwn
    TEXT = "text"            # plain text: the console, logs, the text of JSON webhooks
    JSON = "json"            # a JSON body: every value a JSON literal
    HTML = "html"            # a self-contained HTML or SVG page (`meshbot dag`): every value HTML-escaped


class Written(str):
    """Text meshbot wrote for one medium (a rendered template, a hidden marker): placed there as it is.

    Every other value a template interpolates is escaped for the template's medium; a `Written` of another
    medium too, so Markdown never reaches Slack as trusted text.
    """

    medium: ClassVar[Medium]


class WrittenMarkdown(Written):
    medium = Medium.MARKDOWN


class WrittenSlack(Written):
    medium = Medium.SLACK


class WrittenText(Written):
    medium = Medium.TEXT


class WrittenJson(Written):
    medium = Medium.JSON


class WrittenHtml(Written):
    medium = Medium.HTML


WRITTEN: dict[Medium, type[Written]] = {cls.medium: cls for cls in (WrittenMarkdown, WrittenSlack, WrittenText, WrittenJson,
                                                                    WrittenHtml)}

_ZWSP = "&#x200b;"   # a zero-width space, as an entity: GitHub links no `@name` it stands inside
# Unicode that can reorder or hide what a reader sees (bidirectional overrides and isolates: "Trojan source")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
# ASCII controls but tab and newline; CR is a line break of its own in terminals and in Markdown
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")
# In code GitHub shows `<` as itself, but a reader of the raw comment (meshbot's own, for its hidden records)
# would see an HTML comment: a zero-width space keeps `<!--` in code from ever opening one.
_COMMENT_OPEN = re.compile(r"<!(?=--)")
_MD_INLINE = re.compile(r"([\\`*_\[\]|~$])")
_MD_LINE_START = re.compile(r"^(\s*)([#+=-]|\d{1,9}(?=[.)](?:\s|$)))")   # a heading, list or setext line


def markdown_text(value: object) -> str:
    r"""Text shown as itself in GitHub Markdown, on one line: no emphasis, link, image, table cell, HTML,
    math, @mention or autolink can come of it. A `quoted` part (meshbot's messages quote names
    so, and so do Spark's) becomes a code span, which shows it exactly and can hold nothing else.

    >>> markdown_text("a|b_<c>")
    'a\\|b\\_&lt;c&gt;'
    >>> markdown_text("ping @org/team about #12")
    'ping @&#x200b;org/team about #12'
    >>> markdown_text("see https://evil.example and www.evil.example")
    'see https\\://evil.example and www\\.evil.example'
    >>> markdown_text("# not a heading\n- nor a list")
    '\\# not a heading - nor a list'
    >>> markdown_text("model `shop.a_b` failed: ``x`y`` and a lone ` tick")
    'model `shop.a_b` failed: `` x`y `` and a lone \\` tick'
    """
    text = _CONTROL.sub(" ", _BIDI.sub("\ufffd", str(value)).replace("\r\n", " ").replace("\n", " "))
    parts: list[str] = []
    done = 0
    runs = list(re.finditer(r"`+", text))
    index = 0
    while index < len(runs):
        opening = runs[index]
        closing = next((j for j in range(index + 1, len(runs)) if len(runs[j].group()) == len(opening.group())), None)
        if opening.start() < done or closing is None:
            index += 1
            continue
        parts.append(_markdown_plain(text[done:opening.start()]))
        content = text[opening.end():runs[closing].start()]
        if len(content) > 1 and content[0] == content[-1] == " " and content.strip():
            content = content[1:-1]   # CommonMark strips one space on each side
        parts.append(markdown_code(content))
        done = runs[closing].end()
        index = closing + 1
    parts.append(_markdown_plain(text[done:]))
    return _MD_LINE_START.sub(_escape_line_start, "".join(parts))


def _escape_line_start(match: re.Match[str]) -> str:
    lead, mark = match.groups()
    return f"{lead}{mark}\\" if mark[0].isdigit() else f"{lead}\\{mark}"


def _markdown_plain(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_INLINE.sub(r"\\\1", text)
    text = re.sub(r"(?<=[A-Za-z]):(?=//)", r"\\:", text)
    text = re.sub(r"(?i)\bwww\.", lambda m: m.group(0)[:3] + "\\.", text)
    return text.replace("@", "@" + _ZWSP)


def markdown_html(value: object) -> str:
    """Text inside an HTML block such as `<summary>`, where GitHub reads no Markdown (a `\\_` would show its
    backslash): HTML entities, and mentions neutralised.

    >>> markdown_html("shop.customer_revenue <a & b> @you")
    'shop.customer_revenue &lt;a &amp; b&gt; @&#x200b;you'
    """
    text = _CONTROL.sub(" ", _BIDI.sub("\ufffd", str(value)).replace("\n", " "))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("@", "@" + _ZWSP)


def markdown_code(value: object) -> str:
    """Inline code that shows `value` exactly, whatever backticks or pipes it holds, in a table cell too.

    >>> markdown_code("a`b"), markdown_code("x")
    ('`` a`b ``', '`x`')
    >>> markdown_code("a|b")
    '<code>a\\\\|b</code>'
    """
    text = _CONTROL.sub(" ", _BIDI.sub("\ufffd", str(value)).replace("\r\n", " ").replace("\n", " "))
    text = _COMMENT_OPEN.sub("<!\u200b", text)
    if "|" in text:   # a table splits its cells before reading code spans: `\|` is the only escape both take
        return f"<code>{markdown_text(text)}</code>"
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    if not longest:
        return f"`{text}`" if text.strip() else f"<code>{markdown_text(text)}</code>"
    ticks = "`" * (longest + 1)
    return f"{ticks} {text} {ticks}"


def markdown_fence(value: object, lang: str = "") -> str:
    """A code block whose fence is longer than any backtick run inside, so it always closes.

    >>> print(markdown_fence("a ``` b", "sql"))
    ````sql
    a ``` b
    ````
    """
    text = _CONTROL.sub(" ", _BIDI.sub("\ufffd", str(value)).replace("\r\n", "\n"))
    text = _COMMENT_OPEN.sub("<!\u200b", text)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    lang = re.sub(r"[^\w+-]", "", lang)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def markdown_url(value: object) -> str:
    """A link target: an http(s) URL with anything Markdown or HTML would read percent-encoded; anything
    else becomes `#` (a link to nowhere, never `javascript:` or a relative path).

    >>> markdown_url("https://github.com/o/r/runs/1?a=(b) c"), markdown_url("javascript:alert(1)")
    ('https://github.com/o/r/runs/1?a=%28b%29%20c', '#')
    """
    text = str(value or "")
    if not re.match(r"(?i)https?://[^\s/?#@]+", text):
        return "#"
    return quote(text, safe="/:?#[]@!$&'*+,;=%~.-_")


def github_mention(value: object) -> str:
    """`@login` for a GitHub login (meshbot mentions approvers and commenters on purpose); anything that is
    not a login is shown as text, never as a mention.

    >>> github_mention("octo-cat"), github_mention("org/team"), github_mention("a<b")
    ('@octo-cat', '@&#x200b;org/team', '@&#x200b;a&lt;b')
    """
    text = str(value)
    if re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}", text):
        return f"@{text}"
    return markdown_text(f"@{text}")


def slack_text(value: object) -> str:
    """Text shown as itself in Slack mrkdwn: `&`, `<` and `>` escaped as Slack asks, so no `<!channel>`,
    `<@U1>` or `<url|label>` comes of it, and no `@here` either.

    >>> slack_text("<!channel> <https://evil.example|log in> & @here")
    '&lt;!channel&gt; &lt;https://evil.example|log in&gt; &amp; @\\u200bhere'
    """
    text = _CONTROL.sub(" ", _BIDI.sub("\ufffd", str(value)).replace("\r\n", "\n"))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("@", "@\u200b")


def slack_code(value: object) -> str:
    """Inline code in Slack mrkdwn. Slack has no escape for a backtick inside code: one becomes `ˋ`, so the
    span always closes where meshbot closes it.

    >>> slack_code("dev`<!here>")
    '`devˋ&lt;!here&gt;`'
    """
    return f"`{slack_text(str(value).replace('`', 'ˋ')).replace(chr(10), ' ')}`"


def slack_url(value: object) -> str:
    """A link in Slack mrkdwn: an http(s) URL without the characters that end or relabel a `<...>`; anything
    else shown as text.

    >>> slack_url("https://github.com/o/r/actions/runs/7"), slack_url("https://e.example|log in")
    ('<https://github.com/o/r/actions/runs/7>', 'https://e.example|log in')
    """
    text = str(value or "")
    if re.fullmatch(r"(?i)https?://[^\s<>|]+", text):
        return f"<{text.replace('&', '&amp;')}>"
    return slack_text(text)


def text_code(value: object) -> str:
    """Inline code in plain text: the value between backticks, as `plain_text` would show it.

    >>> text_code("dev")
    '`dev`'
    """
    return f"`{plain_text(value)}`"


def plain_text(value: object) -> str:
    """Text for a terminal or a CI log: no control sequence (ANSI colours, cursor moves, carriage returns)
    and no line that GitHub Actions would read as a workflow command (`::error::`, `::stop-commands::`).

    >>> plain_text("fine\\n::error::forged\\x1b[31m")
    'fine\\n\\\\::error::forged\\\\x1b[31m'
    """
    text = _BIDI.sub("\ufffd", str(value)).replace("\r\n", "\n")
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)
    return re.sub(r"(?m)^(\s*)::", r"\1\\::", text)


class WorkflowCommand(str):
    """A GitHub Actions workflow command meshbot wrote (`::error title=meshbot::...`): a log line the runner
    acts on. Every other line meshbot prints goes through `plain_text`, so none can act as one."""


def workflow_command(command: str, message: object = "", **properties: object) -> WorkflowCommand:
    """`::command key=value::message`, escaped as the runner reads it: the message stays one line, and a
    property cannot end early.

    >>> workflow_command("error", "a\\nb 100%", title="meshbot: x, y")
    '::error title=meshbot%3A x%2C y::a%0Ab 100%25'
    """
    def data(value: object) -> str:
        return str(value).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    props = ",".join(f"{key}={data(value).replace(':', '%3A').replace(',', '%2C')}"
                     for key, value in properties.items())
    return WorkflowCommand(f"::{command}{' ' + props if props else ''}::{data(message)}")


def json_value(value: object) -> str:
    """A JSON literal of `value`.

    >>> json_value('say "hi"'), json_value(None)
    ('"say \\\\"hi\\\\""', 'null')
    """
    return json.dumps(value, ensure_ascii=False, default=str)


def html_text(value: object) -> str:
    """Text for an HTML or SVG page, in an element or a quoted attribute: `<`, `&` and quotes escaped, and
    the control characters XML refuses (a standalone SVG with one would not open) replaced.

    >>> html_text('<script>"x"</script>\x01')
    '&lt;script&gt;&quot;x&quot;&lt;/script&gt;\ufffd'
    """
    return html.escape(re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", "\ufffd", str(value)), quote=True)


ESCAPE = {Medium.MARKDOWN: markdown_text, Medium.SLACK: slack_text, Medium.TEXT: plain_text,
          Medium.JSON: json_value, Medium.HTML: html_text}


def medium_of(template_name: str) -> Medium:
    """The medium a template writes, from its name: `*.md.j2`, `*.json.j2`, `*.html.j2` and `*.svg.j2`, else
    plain text.

    >>> medium_of("comment.md.j2"), medium_of("notification_webhook.json.j2"), medium_of("notification.txt.j2")
    (<Medium.MARKDOWN: 'markdown'>, <Medium.JSON: 'json'>, <Medium.TEXT: 'text'>)
    """
    if template_name.endswith(".md.j2"):
        return Medium.MARKDOWN
    if template_name.endswith(".json.j2"):
        return Medium.JSON
    if template_name.endswith((".html.j2", ".svg.j2")):
        return Medium.HTML
    return Medium.TEXT
