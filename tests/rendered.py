"""What a reader sees of meshbot's text: GitHub Markdown rendered by cmark-gfm (GitHub's engine) and Slack
mrkdwn read by its documented grammar, for tests that assert what is shown rather than the raw markup."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

import cmarkgfm
from cmarkgfm.cmark import Options

ZERO_WIDTH = "\u200b"


@dataclass
class Rendered:
    """A Markdown text as GitHub shows it: its visible text and the active elements it holds."""

    html: str
    text: str
    links: list[str] = field(default_factory=list)       # href of every <a>
    images: list[str] = field(default_factory=list)      # src of every <img>
    tags: list[str] = field(default_factory=list)        # every element's name, in order
    code: list[str] = field(default_factory=list)        # the text of every <code>

    @property
    def mentions(self) -> list[str]:
        """`@login` and `@org/team` as GitHub links them: in visible text outside code, after a non-word."""
        outside = self.text
        for snippet in self.code:
            outside = outside.replace(snippet, " ")
        return re.findall(r"(?<![\w`])@[A-Za-z0-9][\w-]*(?:/[\w-]+)?", outside.replace(ZERO_WIDTH, "\x00"))


class _Reader(HTMLParser):
    def __init__(self, rendered: Rendered) -> None:
        super().__init__(convert_charrefs=True)
        self.rendered = rendered
        self._text: list[str] = []
        self._code: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.rendered.tags.append(tag)
        values = dict(attrs)
        if tag == "a":
            self.rendered.links.append(values.get("href") or "")
        if tag == "img":
            self.rendered.images.append(values.get("src") or "")
        if tag == "code":
            self._code = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "code" and self._code is not None:
            self.rendered.code.append("".join(self._code))
            self._code = None

    def handle_data(self, data: str) -> None:
        self._text.append(data)
        if self._code is not None:
            self._code.append(data)

    def close(self) -> None:
        super().close()
        self.rendered.text = "".join(self._text)


def render_markdown(markdown: str) -> Rendered:
    """`markdown` through cmark-gfm with GitHub's extensions, raw HTML kept (GitHub keeps the safe part)."""
    page = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    rendered = Rendered(html=page, text="")
    reader = _Reader(rendered)
    reader.feed(page)
    reader.close()
    return rendered


def shown(markdown: str) -> str:
    """The text a reader sees, zero-width spaces left out (they only keep mentions from linking)."""
    return render_markdown(markdown).text.replace(ZERO_WIDTH, "")


# -- Slack mrkdwn ("Formatting text for app surfaces"): control sequences are <...>; &amp; &lt; &gt; escape --

@dataclass(frozen=True)
class SlackToken:
    kind: str      # link, user, channel, special (<!here>, <!channel>, <!subteam^...>, <!date...>)
    raw: str


_SLACK_SEQUENCE = re.compile(r"<([^<>]*)>")


def slack_controls(mrkdwn: str) -> list[SlackToken]:
    """Every control sequence Slack would act on in `mrkdwn`: links, user/channel mentions, broadcasts."""
    tokens = []
    for match in _SLACK_SEQUENCE.finditer(mrkdwn):
        inner = match.group(1)
        kind = ("user" if inner.startswith("@") else "channel" if inner.startswith("#")
                else "special" if inner.startswith("!") else "link")
        tokens.append(SlackToken(kind, match.group(0)))
    return tokens


def slack_shown(mrkdwn: str) -> str:
    """The text Slack shows for a mrkdwn text without control sequences."""
    return html.unescape(mrkdwn).replace(ZERO_WIDTH, "")
