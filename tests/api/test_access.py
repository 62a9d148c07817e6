from __future__ import annotations

import json
import os
import stat

import pytest

from api.access import (
    TOKEN_PREFIX,
    TokenFileError,
    TokenFileUnavailable,
    add_token,
    hash_token,
    load_tokens,
    remove_token,
)


def test_add_token_returns_the_secret_once_and_stores_only_its_hash(tmp_path):
    path = tmp_path / "conf" / "tokens.json"
    token = add_token(path, "ana-laptop", ["Chat_1_Emi_Elise", "tiny_*"])
    assert token.startswith(TOKEN_PREFIX) and len(token) > 40
    text = path.read_text()
    assert token not in text and token[len(TOKEN_PREFIX) :] not in text
    data = json.loads(text)
    assert data["version"] == 1
    (row,) = data["tokens"]
    assert row["name"] == "ana-laptop" and row["sha256"] == hash_token(token)
    assert row["chats"] == ["Chat_1_Emi_Elise", "tiny_*"] and row["created"].endswith("Z")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not [p for p in path.parent.iterdir() if p.name != "tokens.json"]  # no temp file left

    second = add_token(path, "ben", ["*"])
    assert second != token
    assert [e.name for e in load_tokens(path).entries] == ["ana-laptop", "ben"]


def test_authenticate_finds_the_entry_and_its_scope(tmp_path):
    path = tmp_path / "tokens.json"
    ana = add_token(path, "ana", ["Chat_1_Emi_Elise", "tiny_*", "Chat_[89]_*"])
    ben = add_token(path, "ben", ["*"])
    store = load_tokens(path)
    entry = store.authenticate(ana)
    assert entry is not None and entry.name == "ana"
    assert entry.allows("Chat_1_Emi_Elise") and entry.allows("tiny_bakery_Ana_Ben") and entry.allows("Chat_9_X_Y")
    assert not entry.allows("Chat_10_Fahim_Muhhamed") and not entry.allows("Chat_1_Emi_Elise2")
    assert not entry.allows("TINY_bakery")  # case-sensitive, whatever the platform
    assert entry.visible(["Chat_2_a", "tiny_x", "Chat_1_Emi_Elise"]) == ["tiny_x", "Chat_1_Emi_Elise"]
    assert store.authenticate(ben).allows("anything_at_all")
    for wrong in (None, "", ana + "x", ana[:-1], ana.upper(), "x" * 10_000, hash_token(ana)):
        assert store.authenticate(wrong) is None


def test_add_token_validates_name_and_scope(tmp_path):
    path = tmp_path / "tokens.json"
    add_token(path, "ana", ["*"])
    with pytest.raises(TokenFileError, match="exists already"):
        add_token(path, "ana", ["x"])
    for name in ("", "has space", "../up", "x" * 65):
        with pytest.raises(TokenFileError, match="name"):
            add_token(path, name, ["x"])
    for chats in ([], ["a/b"], ["a\\b"], [""], ["new\nline"], "Chat_1"):
        with pytest.raises(TokenFileError, match="chats"):
            add_token(path, "ben", chats)
    assert [e.name for e in load_tokens(path).entries] == ["ana"]  # nothing half-written


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"version": 2, "tokens": []}', "version"),
        ('{"version": 1, "tokens": {}}', "tokens must be a list"),
        ('{"version": 1, "tokens": [], "extra": 1}', r"unknown fields \['extra'\]"),
        ('{"version": 1, "tokens": [{"name": "a", "chats": ["*"]}]}', r"tokens\[0\]\.sha256: missing"),
        (
            '{"version": 1, "tokens": [{"name": "a", "sha256": "nm_plaintext", "chats": ["*"]}]}',
            r"tokens\[0\]\.sha256: must be 64 lowercase hex",
        ),
        (
            '{"version": 1, "tokens": [{"name": "a b", "sha256": "' + "0" * 64 + '", "chats": ["*"]}]}',
            r"tokens\[0\]\.name",
        ),
        (
            '{"version": 1, "tokens": [{"name": "a", "sha256": "' + "0" * 64 + '", "chats": "*"}]}',
            r"tokens\[0\]\.chats",
        ),
        (
            '{"version": 1, "tokens": [{"name": "a", "sha256": "' + "0" * 64 + '", "chats": ["x/y"]}]}',
            r"tokens\[0\]\.chats\[0\]",
        ),
        (
            '{"version": 1, "tokens": [{"name": "a", "sha256": "' + "0" * 64 + '", "chats": ["*"], "scope": 1}]}',
            r"tokens\[0\]: unknown fields \['scope'\]",
        ),
        (
            '{"version": 1, "tokens": [{"name": "a", "sha256": "' + "0" * 64 + '", "chats": ["*"]}, '
            '{"name": "a", "sha256": "' + "1" * 64 + '", "chats": ["*"]}]}',
            r"tokens\[1\]\.name",
        ),
        (
            '{"version": 1, "tokens": [{"name": "a", "sha256": "' + "0" * 64 + '", "chats": ["*"]}, '
            '{"name": "b", "sha256": "' + "0" * 64 + '", "chats": ["*"]}]}',
            r"tokens\[1\]\.sha256: the same token",
        ),
    ],
)
def test_load_names_the_file_and_the_field(tmp_path, content, where):
    path = tmp_path / "tokens.json"
    path.write_text(content)
    with pytest.raises(TokenFileError, match=where) as error:
        load_tokens(path)
    assert str(path) in str(error.value)


def test_a_missing_file_says_how_to_create_one(tmp_path):
    with pytest.raises(TokenFileError, match="token add"):
        load_tokens(tmp_path / "none.json")


def test_remove_token(tmp_path):
    path = tmp_path / "tokens.json"
    ana = add_token(path, "ana", ["*"])
    add_token(path, "ben", ["*"])
    assert remove_token(path, "ana") is True
    assert remove_token(path, "ana") is False
    store = load_tokens(path)
    assert [e.name for e in store.entries] == ["ben"] and store.authenticate(ana) is None


def test_the_store_follows_the_file_and_fails_closed_while_it_is_broken(tmp_path, caplog):
    path = tmp_path / "tokens.json"
    ana = add_token(path, "ana", ["*"])
    store = load_tokens(path)
    ben = add_token(path, "ben", ["tiny_*"])  # added while a server holds the store
    assert store.authenticate(ben).name == "ben"
    remove_token(path, "ana")  # revoked without a restart
    assert store.authenticate(ana) is None
    good = path.read_text()

    # A broken hand edit, a deleted file, a folder in its place: no token is accepted, not even
    # one read before (the old store kept them); the problem names the file, and is logged once.
    broken = good.replace('"version": 1', '"version": "one"')
    for breaks in (lambda: path.write_text(broken), path.unlink, lambda: (path.unlink(), path.mkdir())):
        caplog.clear()
        breaks()
        for _ in range(3):
            with pytest.raises(TokenFileUnavailable, match=str(path)):
                store.authenticate(ben)
        assert store.entries == () and str(path) in store.problem
        assert [r.levelname for r in caplog.records] == ["ERROR"] and str(path) in caplog.records[0].getMessage()
        if path.is_dir():
            path.rmdir()
        path.write_text(good)  # back, valid: used again without a restart
        assert store.authenticate(ben).name == "ben" and store.problem is None
        assert store.authenticate(ana) is None
