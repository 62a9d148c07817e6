import pytest

from narrative_mirror import split


def test_realtalk_default_split_is_chat_1_to_7_train_8_to_10_test():
    keys = [
        "Chat_1_Emi_Elise",
        "Chat_7_Nebraas_Vanessa",
        "Chat_8_Akib_Muhhamed",
        "Chat_9_Fahim_Akib",
        "Chat_10_Fahim_Muhhamed",
        "Chat_2_Kevin_Elise",
    ]
    assert split.keys_in("test", keys) == ["Chat_10_Fahim_Muhhamed", "Chat_8_Akib_Muhhamed", "Chat_9_Fahim_Akib"]
    assert split.keys_in("train", keys) == ["Chat_1_Emi_Elise", "Chat_2_Kevin_Elise", "Chat_7_Nebraas_Vanessa"]


def test_demo_split_has_one_test_chat():
    keys = ["demo_garden_Mara_Theo", "demo_marathon_Ines_Kofi", "demo_harbor_Lena_Sam"]
    assert split.keys_in("test", keys) == ["demo_harbor_Lena_Sam"]


def test_unknown_file_defaults_to_train_and_is_flagged():
    a = split.assign("my_own_chat")
    assert (a.split, a.configured) == ("train", False)


def test_override_config_file(tmp_path, monkeypatch):
    (tmp_path / "split.toml").write_text('[split]\ntest = ["mine*"]\ntrain = []\n')
    monkeypatch.setenv("NM_CONFIG_DIR", str(tmp_path))
    assert split.assign("mine_1").split == "test"
    assert split.assign("Chat_9_Fahim_Akib") == split.SplitAssignment("Chat_9_Fahim_Akib", "train", False)


def test_bad_config_names_the_file_and_field(tmp_path, monkeypatch):
    (tmp_path / "split.toml").write_text('[split]\ntest = "Chat_8*"\n')
    monkeypatch.setenv("NM_CONFIG_DIR", str(tmp_path))
    with pytest.raises(ValueError, match=r"split\.toml: split\.test must be a list"):
        split.assign("x")
