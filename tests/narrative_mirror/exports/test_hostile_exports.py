"""A hostile export corpus: links out of the data folder, devices, FIFOs, zip bombs, huge
messages and wrong encodings. Each is refused with one line naming the file (and the limit),
and the good chats beside it are still found."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest

from narrative_mirror.exports import read_export
from narrative_mirror.exports.folder import ImportOptions, find_folder_chats
from narrative_mirror.exports.limits import ExportRefused, LimitedReader, read_limits

DAY = "2024-01-02"
GOOD_WHATSAPP = "13/01/2024, 09:00 - Ann: hello\n13/01/2024, 09:05 - Bob: hi Ann\n"


def _data(tmp_path: Path) -> Path:
    """A data folder holding one good WhatsApp chat."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "WhatsApp Chat with Good.txt").write_text(GOOD_WHATSAPP, encoding="utf-8")
    return data


def _day(text: str, ts: str = "1704186000.000100") -> list[dict]:
    return [{"type": "message", "user": "U1", "text": text, "ts": ts}]


def _slack(folder: Path, days: dict[str, list[dict]]) -> Path:
    """A Slack export folder: ``days`` maps ``channel/YYYY-MM-DD`` to that day's messages."""
    folder.mkdir(parents=True)
    channels = sorted({name.split("/")[0] for name in days})
    (folder / "users.json").write_text(json.dumps([{"id": "U1", "name": "ann"}]))
    (folder / "channels.json").write_text(json.dumps([{"id": f"C{i}", "name": c} for i, c in enumerate(channels)]))
    for name, messages in days.items():
        (folder / f"{name}.json").parent.mkdir(exist_ok=True)
        (folder / f"{name}.json").write_text(json.dumps(messages))
    return folder


def _slack_zip(path: Path, members: dict[str, bytes | str]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("users.json", json.dumps([{"id": "U1", "name": "ann"}]))
        archive.writestr("channels.json", json.dumps([{"id": "C1", "name": "general"}, {"id": "C2", "name": "random"}]))
        for name, content in members.items():
            archive.writestr(name, content)
    return path


def _find(data: Path) -> tuple[set[str], list[str]]:
    chats, problems = find_folder_chats(data, ImportOptions(tz="UTC"))
    return set(chats), problems


@pytest.fixture
def small_limits(tmp_path, monkeypatch):
    """exports.toml limits small enough to trip with kilobytes (set through NM_CONFIG_DIR)."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "exports.toml").write_text(
        "[limits]\nmax_member_bytes = 100_000\nmax_total_bytes = 150_000\nmax_ratio = 50\n"
        "max_members = 20\nmax_message_chars = 1_000\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("NM_CONFIG_DIR", str(config))
    return read_limits()


def test_links_out_of_the_data_folder_are_refused_at_any_depth_and_the_rest_builds(tmp_path):
    data, outside = _data(tmp_path), tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text(json.dumps(_day("the secret text")))
    slack = _slack(data / "slack", {f"general/{DAY}": _day("hello"), f"random/{DAY}": _day("hi")})
    absolute, relative = slack / "general" / "2024-01-03.json", slack / "random" / "2024-01-03.json"
    absolute.symlink_to(outside / "secret.json")
    relative.symlink_to(Path("../../../outside/secret.json"))
    inside = slack / "general" / "2024-01-04.json"  # a link that stays inside the export is read
    inside.symlink_to(Path(f"{DAY}.json"))
    found, problems = _find(data)
    secret = (outside / "secret.json").resolve()
    # The channel that would read the linked file is refused, naming the link and its target.
    assert problems == [
        f"{absolute}: links to {secret}, outside the data folder: refused",
        f"{relative}: links to {secret}, outside the data folder: refused",
    ]
    assert found == {"whatsapp_good"}


def test_a_channel_folder_linked_out_of_the_export_refuses_the_export(tmp_path):
    data, outside = _data(tmp_path), tmp_path / "outside"
    (outside / "general").mkdir(parents=True)
    (outside / "general" / f"{DAY}.json").write_text(json.dumps(_day("the secret text")))
    slack = _slack(data / "slack", {f"random/{DAY}": _day("hi")})
    (slack / "general").symlink_to(outside / "general", target_is_directory=True)
    found, problems = _find(data)
    assert problems == [
        f"{slack / 'general'}: links to {(outside / 'general').resolve()}, outside the data folder: refused"
    ]
    assert found == {"whatsapp_good"}


@pytest.mark.parametrize(
    "target, why",
    [
        ("/proc/self/environ", "links to {resolved}, a system file: refused"),
        ("/dev/zero", "links to /dev/zero, a system file: refused"),
        ("loop", "a link loop: refused"),
        ("missing.txt", "a broken link: refused"),
    ],
)
def test_a_whatsapp_chat_file_linked_to_a_system_file_or_nowhere_is_refused(tmp_path, target, why):
    data = _data(tmp_path)
    chat = data / "WhatsApp Chat - Bad" / "_chat.txt"
    chat.parent.mkdir()
    if target == "loop":
        (chat.parent / "loop").symlink_to(chat)
    chat.symlink_to(target if target.startswith("/") else chat.parent / target)
    found, problems = _find(data)
    resolved = Path("/proc/self/environ").resolve() if target.startswith("/proc") else None
    assert problems == [f"{chat}: {why.format(resolved=resolved)}"]
    assert found == {"whatsapp_good"}


def test_fifos_are_refused_never_opened(tmp_path):
    data = _data(tmp_path)
    chat = data / "WhatsApp Chat - Pipe" / "_chat.txt"
    chat.parent.mkdir()
    os.mkfifo(chat)
    os.mkfifo(data / "pipe.txt")  # opening either for reading would block forever
    found, problems = _find(data)
    assert problems == [
        f"{chat}: is a FIFO, not a regular file: refused",
        f"{data / 'pipe.txt'}: is a FIFO, not a regular file: refused",
    ]
    assert found == {"whatsapp_good"}


def test_zip_members_that_are_links_or_leave_the_archive_are_refused(tmp_path):
    data = _data(tmp_path)
    link = zipfile.ZipInfo("_chat.txt")
    link.external_attr = 0o120777 << 16  # a symlink entry: its content is the target's path
    with zipfile.ZipFile(data / "WhatsApp Chat - Link.zip", "w") as archive:
        archive.writestr(link, "/etc/passwd")
    with zipfile.ZipFile(data / "WhatsApp Chat - Slip.zip", "w") as archive:
        archive.writestr("../_chat.txt", GOOD_WHATSAPP)
    found, problems = _find(data)
    assert problems == [
        f"{data / 'WhatsApp Chat - Link.zip'}!_chat.txt: is a symbolic link in the archive: refused",
        f"{data / 'WhatsApp Chat - Slip.zip'}!../_chat.txt: a member name that leaves the archive: refused",
    ]
    assert found == {"whatsapp_good"}


def test_zip_bombs_are_refused_by_ratio_member_size_total_and_entries(tmp_path, small_limits):
    data = _data(tmp_path)
    # 90 KB of spaces packs into a few hundred bytes: over max_ratio 50, under max_member_bytes
    _slack_zip(data / "ratio.zip", {f"general/{DAY}.json": json.dumps(_day(" " * 90_000))})
    noise = os.urandom(60_000).hex()  # incompressible: trips the size limits, not the ratio
    _slack_zip(data / "member.zip", {f"general/{DAY}.json": json.dumps(_day(noise + noise))})
    many = [_day(noise[i : i + 900], f"{1704186000 + i}.000100")[0] for i in range(0, 90_000, 900)]
    _slack_zip(data / "total.zip", {f"general/{DAY}.json": json.dumps(many), f"random/{DAY}.json": json.dumps(many)})
    _slack_zip(data / "entries.zip", {f"c{n}/{DAY}.json": json.dumps(_day("hi")) for n in range(20)})
    lying = bytearray((data / "entries.zip").read_bytes())  # its end record claims 1 entry, not 22
    lying[-14:-10] = struct.pack("<2H", 1, 1)
    (data / "lying.zip").write_bytes(bytes(lying))
    found, problems = _find(data)
    assert problems.pop(1).startswith(
        f"{data / 'lying.zip'}: over the limit max_members = 20 (exports.toml [limits]): 22 entries"
    )
    assert len(problems) == 4, problems
    assert problems[0].startswith(
        f"{data / 'entries.zip'}: over the limit max_members = 20 (exports.toml [limits]): 22 entries"
    )
    assert problems[1].startswith(
        f"{data / 'member.zip'}!general/{DAY}.json: over the limit max_member_bytes = 100,000 (exports.toml [limits]): "
    )
    assert problems[2].startswith(
        f"{data / 'ratio.zip'}!general/{DAY}.json: over the limit max_ratio = 50 (exports.toml [limits]): 90,"
    )
    assert problems[3] == (
        f"{data / 'total.zip'}: over the limit max_total_bytes = 150,000 (exports.toml "
        "[limits]): unpacks to more than 150,000 bytes"
    )
    # the channel read before the total ran out is a chat; nothing of the others is
    assert found == {"whatsapp_good", "slack_general"}


def test_unpacked_bytes_are_counted_as_they_come_not_taken_from_headers(small_limits):
    packed = LimitedReader(io.BytesIO(b" " * 60_000), "bomb.zip!a.json", small_limits, compressed=1_000)
    with pytest.raises(
        ExportRefused,
        match=r"bomb.zip!a.json: over the limit max_ratio = 50 .*: unpacks to more "
        r"than 50 times its 1,000 compressed bytes",
    ):
        packed.read()
    plain = LimitedReader(io.BytesIO(b"x" * 200_000), "big.json", small_limits)
    assert len(plain.read(50_000)) == 50_000
    with pytest.raises(ExportRefused, match=r"big.json: over the limit max_member_bytes = 100,000"):
        plain.read()


def _deflated_zip(path: Path, members: dict[str, tuple[bytes, int]]) -> Path:
    """A zip whose members are ``block`` repeated ``count`` times, deflated once per block (a
    full flush makes every repeat the same bytes), so a 1 GiB member takes a moment to write."""
    local, central = b"", b""
    for name, (block, count) in members.items():
        packer = zlib.compressobj(9, zlib.DEFLATED, -15)
        data = (packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)) * count + packer.flush()
        crc = 0
        for _ in range(count):
            crc = zlib.crc32(block, crc)
        size, raw = len(block) * count, name.encode()
        header = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(data), size, len(raw), 0)
        central += (
            struct.pack(
                "<4s6H3L5H2L",
                b"PK\x01\x02",
                20,
                20,
                0,
                8,
                0,
                0,
                crc,
                len(data),
                size,
                len(raw),
                0,
                0,
                0,
                0,
                0,
                len(local),
            )
            + raw
        )
        local += header + raw + data
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members), len(central), len(local), 0)
    path.write_bytes(local + central + end)
    return path


def test_a_default_sized_bomb_is_refused_before_it_is_unpacked(tmp_path):
    """1 GiB of spaces in a 1 MB Slack zip, with the shipped limits: refused from the member's
    sizes (a lie in them is caught while unpacking, above) and the good chat is still found."""
    data = _data(tmp_path)
    bomb = _deflated_zip(data / "bomb.zip", {"users.json": (b"[]", 1), f"general/{DAY}.json": (b" " * (1 << 24), 64)})
    assert bomb.stat().st_size < 2_000_000
    with zipfile.ZipFile(bomb) as archive:  # a well-formed archive
        assert archive.read("users.json") == b"[]" and archive.getinfo(f"general/{DAY}.json").file_size == 1 << 30
    found, problems = _find(data)
    assert len(problems) == 1 and problems[0].startswith(
        f"{bomb}!general/{DAY}.json: over the limit max_ratio = 300 (exports.toml [limits]): 1,073,741,824 bytes from "
    )
    assert found == {"whatsapp_good"}


def test_a_huge_message_is_refused_while_it_is_read(tmp_path, small_limits, monkeypatch):
    data = _data(tmp_path)
    (data / "WhatsApp Chat with Long.txt").write_text(GOOD_WHATSAPP + "13/01/2024, 09:07 - Ann: " + "x" * 1_500 + "\n")
    _slack(data / "slack", {f"general/{DAY}": _day("y" * 1_001), f"random/{DAY}": _day("short")})
    found, problems = _find(data)
    assert problems == [
        f"{data / 'WhatsApp Chat with Long.txt'}: over the limit max_message_chars = 1,000 (exports.toml [limits]): "
        "line 3 is longer",
        f"{data / 'slack' / 'general'}: over the limit max_message_chars = 1,000 (exports.toml [limits]): "
        "message 1704186000.000100 has 1,001 characters",
    ]
    assert found == {"whatsapp_good", "slack_random"}  # random still builds
    monkeypatch.delenv("NM_CONFIG_DIR")  # the shipped limits: a new limit re-reads what was refused
    assert _find(data) == ({"whatsapp_good", "whatsapp_long", "slack_general", "slack_random"}, [])


def test_utf16_whatsapp_with_a_bom_is_read_and_bad_encodings_are_named(tmp_path):
    data = _data(tmp_path)
    (data / "WhatsApp Chat with Sixteen.txt").write_bytes(GOOD_WHATSAPP.encode("utf-16"))
    (data / "WhatsApp Chat with NoBom.txt").write_bytes(GOOD_WHATSAPP.encode("utf-16-le"))
    (data / "WhatsApp Chat with Latin.txt").write_bytes(
        (GOOD_WHATSAPP + "13/01/2024, 09:09 - Ann: Grüße\n").encode("latin-1")
    )
    found, problems = _find(data)
    assert found == {"whatsapp_good", "whatsapp_sixteen"}

    def texts(name: str) -> list[str]:
        return [m.text for c in read_export(data / name, tz="UTC") for m in c.messages()]

    assert texts("WhatsApp Chat with Sixteen.txt") == texts("WhatsApp Chat with Good.txt") == ["hello", "hi Ann"]
    offset = len(GOOD_WHATSAPP) + len("13/01/2024, 09:09 - Ann: Gr")
    assert problems == [
        f"{data / 'WhatsApp Chat with Latin.txt'}: line 3: not UTF-8 text: byte 0xfc at offset {offset:,} "
        "cannot be decoded",
        f"{data / 'WhatsApp Chat with NoBom.txt'}: holds NUL bytes: UTF-16 text without a byte order mark? "
        "save it as UTF-8 (or UTF-16 with its BOM)",
    ]


def test_slack_day_files_without_channels_or_users_json_are_a_problem_not_skipped(tmp_path):
    data = _data(tmp_path)
    slack = _slack(data / "slack", {f"general/{DAY}": _day("hello")})
    (slack / "users.json").unlink()
    (slack / "channels.json").unlink()
    found, problems = _find(data)
    assert problems == [
        f"{slack}: holds Slack day files (YYYY-MM-DD.json) but neither channels.json nor "
        "users.json: not readable as an export"
    ]
    assert found == {"whatsapp_good"}


@pytest.mark.slow  # two Dagster builds: minutes on a loaded machine
def test_build_exits_2_naming_the_refused_files_keeps_what_was_stored_and_builds_the_good_chat(tmp_path):
    data, outside = _data(tmp_path), tmp_path / "outside"
    outside.mkdir()
    archive = data / "WhatsApp Chat - Zipped.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("_chat.txt", GOOD_WHATSAPP)
    build = [sys.executable, "-m", "cli.main", "build", "--data", str(data), "--tz", "UTC", "--json"]
    first = subprocess.run(build, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    stored = {p: p.read_bytes() for p in (Path(os.environ["NM_HOME"]) / "storage").rglob("*.parquet")}
    assert any("whatsapp_zipped" in str(p) for p in stored)
    # the zip becomes a bomb (one 1 GiB message in 1 MB), and a linked chat appears beside it
    _deflated_zip(archive, {"_chat.txt": (b"13/01/2024, 09:00 - Ann: " + b"a" * ((1 << 24) - 25), 64)})
    (outside / "secret.txt").write_text("13/01/2024, 09:00 - Eve: the secret text\n", encoding="utf-8")
    chat = data / "WhatsApp Chat - Linked" / "_chat.txt"
    chat.parent.mkdir()
    chat.symlink_to(outside / "secret.txt")
    second = subprocess.run(build, capture_output=True, text=True)
    assert second.returncode == 2, second.stderr
    linked = f"{chat}: links to {(outside / 'secret.txt').resolve()}, outside the data folder: refused"
    out = json.loads(second.stdout)
    bomb, link = sorted(out["problems"], key=lambda line: "Linked" in line)
    assert link == linked and bomb.startswith(
        f"{archive}!_chat.txt: over the limit max_ratio = 300 (exports.toml [limits]): 1,073,741,824 bytes from "
    )
    assert sorted(x for x in second.stderr.splitlines() if "_chat.txt" in x) == sorted(
        f"narrative-mirror build: {line}" for line in out["problems"]
    )
    assert list(out["per_file"]) == ["whatsapp_good"] and out["per_file"]["whatsapp_good"]["messages"] == 2
    assert stored == {p: p.read_bytes() for p in stored}  # what the zip's chat built before is kept as it was
