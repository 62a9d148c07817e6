"""A folder or a zip of an export, read one member at a time, and JSON loading that names places.

Slack, Messenger and WhatsApp exports come as a zip or as the folder it unpacks to; readers see
both through :class:`ExportTree` (member names use ``/``, relative to the tree's root).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from narrative_mirror.exports.records import ExportFormatError


class ExportTree:
    """Read-only view of a folder or a zip archive."""

    def __init__(self, path: Path):
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        if path.is_file():
            try:
                self._zip = zipfile.ZipFile(path)
            except zipfile.BadZipFile as exc:
                raise ExportFormatError(path, None, f"not a readable zip archive ({exc})") from exc
        elif not path.is_dir():
            raise ExportFormatError(path, None, "no such file or folder")

    def names(self) -> list[str]:
        """Every file member, sorted."""
        if self._zip is not None:
            return sorted(n for n in self._zip.namelist() if not n.endswith("/"))
        return sorted(p.relative_to(self.path).as_posix() for p in self.path.rglob("*") if p.is_file())

    def open(self, name: str) -> IO[bytes]:
        if self._zip is not None:
            return self._zip.open(name)
        return (self.path / name).open("rb")

    def read_text(self, name: str) -> str:
        with self.open(name) as handle:
            data = handle.read()
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ExportFormatError(self.label(name), None, f"not UTF-8 text ({exc})") from exc

    def label(self, name: str) -> str:
        """How errors name a member: ``export.zip!general/2024-01-02.json`` or the file path."""
        if self._zip is not None:
            return f"{self.path}!{name}"
        return str(self.path / name)

    def load_json(self, name: str) -> Any:
        return loads_json(self.read_text(name), self.label(name))

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()


def loads_json(text: str, label: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExportFormatError(label, exc.lineno, f"invalid JSON at column {exc.colno}: {exc.msg}") from exc


def load_json_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ExportFormatError(path, None, f"not UTF-8 text ({exc})") from exc
    return loads_json(text, str(path))


def parent_of(name: str) -> str:
    return name.rsplit("/", 1)[0] if "/" in name else ""


def base_of(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def iter_with_index(items: Any, label: str, path: str) -> Iterator[tuple[int, Any]]:
    """``enumerate`` over a JSON array, or an error naming the path when it is not one."""
    if not isinstance(items, list):
        raise ExportFormatError(label, path, f"expected an array, found {type(items).__name__}")
    return enumerate(items)


def json_error_path(handle: IO[bytes]) -> str:
    """The JSON path (``chats.list[3].messages[12].date``) where streaming ``handle`` fails."""
    import ijson

    from narrative_mirror.exports import jsonstream

    stack: list[list[Any]] = []

    def enter_value() -> None:
        if stack and stack[-1][0] == "array":
            stack[-1][1] += 1

    try:
        for _prefix, event, value in jsonstream.parse(handle):
            if event == "map_key":
                stack[-1][1] = value
            elif event in ("start_map", "start_array"):
                enter_value()
                stack.append(["map", None] if event == "start_map" else ["array", -1])
            elif event in ("end_map", "end_array"):
                stack.pop()
            else:
                enter_value()
    except ijson.JSONError:
        pass
    parts = []
    for kind, position in stack:
        if kind == "map" and position is not None:
            parts.append(f".{position}")
        elif kind == "array" and position >= 0:
            parts.append(f"[{position}]")
    return "".join(parts).lstrip(".") or "$"
