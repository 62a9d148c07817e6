from pathlib import Path

import pytest

from narrative_mirror.keys import PartitionKeyError, find_chat_files, partition_key_for, validate_partition_key


@pytest.mark.parametrize("key", ["Chat_1_Emi_Elise", "demo_garden_Mara_Theo", "a.b-c_9"])
def test_valid_keys_pass_unchanged(key):
    assert validate_partition_key(key) == key


@pytest.mark.parametrize(
    "key, fragment",
    [
        ("a/b", "path separator"),
        ("a\\b", "path separator"),
        ("a..b", "'..'"),
        ("a...b", "'..'"),
        ("a,b", "comma"),
        ("a\nb", "control character"),
        ("a\x00b", "control character"),
        ("", "empty"),
        ("a'b", "outside"),
        ("-lead", "outside"),
        ("x" * 129, "longer than"),
    ],
)
def test_invalid_keys_are_rejected_with_the_reason(key, fragment):
    with pytest.raises(PartitionKeyError, match=fragment.replace(".", r"\.").replace("(", r"\(")):
        validate_partition_key(key)


def test_key_is_the_stem_with_whitespace_folded():
    assert partition_key_for(Path("/x/My Chat 1.json")) == "My_Chat_1"


def test_error_names_the_file():
    with pytest.raises(PartitionKeyError, match=r"/x/a,b\.json"):
        partition_key_for(Path("/x/a,b.json"))


def test_find_chat_files_skips_arcs_and_reports_bad_names(tmp_path):
    for name in ["Chat_1_A_B.json", "Chat_1_A_B.arcs.json", "bad,name.json", "notes.txt"]:
        (tmp_path / name).write_text("{}")
    files, problems = find_chat_files(tmp_path)
    assert list(files) == ["Chat_1_A_B"]
    assert len(problems) == 1 and "comma" in problems[0]


def test_find_chat_files_follows_no_link_out_of_the_folder(tmp_path):
    data, outside = tmp_path / "data", tmp_path / "elsewhere"
    data.mkdir(), outside.mkdir()
    (outside / "secret.json").write_text("{}")
    (data / "real.json").write_text("{}")
    (data / "escape.json").symlink_to(outside / "secret.json")
    (data / "alias.json").symlink_to(data / "real.json")  # a link inside the folder is fine
    files, problems = find_chat_files(data)
    assert sorted(files) == ["alias", "real"]
    assert len(problems) == 1 and "escape.json: links to" in problems[0] and "outside the data folder" in problems[0]


def test_missing_data_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        find_chat_files(tmp_path / "nope")
