"""LanceDB on object storage (NM_LANCEDB_URI=s3://..., the AWS_* settings): the command line
builds the index into the S3-compatible server and answers from it, with nothing local."""

from __future__ import annotations

import pytest
from nm_services import clean_env, cli, demo_copy, s3_client, s3_env

pytestmark = [pytest.mark.services, pytest.mark.timeout(600)]

CHAT = "demo_garden_Mara_Theo"


def test_index_written_to_and_read_from_the_s3_compatible_server(tmp_path, monkeypatch, services, s3_bucket):
    from resources.dagster_resources import default_resources

    data = demo_copy(tmp_path / "demo", [CHAT])
    settings = s3_env(services, s3_bucket, prefix="team/index")
    home = tmp_path / "home"
    env = clean_env(NM_HOME=str(home), **settings)

    built = cli(["build", "--data", str(data)], env)
    assert not built["failures"] and "lancedb_index" in built["per_file"][CHAT]["ran"]
    assert not (home / "lancedb").exists()
    keys = [o["Key"] for o in s3_client(services).list_objects_v2(Bucket=s3_bucket, Prefix="team/index/")["Contents"]]
    assert {"messages", "blocks", "threads"} <= {k.split("/")[2].removesuffix(".lance") for k in keys}

    # Read back through the resource the assets use (options from the environment, keys as EnvVar).
    for key, value in {**settings, "NM_HOME": str(home)}.items():
        monkeypatch.setenv(key, value)
    resource = default_resources(data_dir=str(data))["lancedb"]
    assert resource.resolved_uri() == settings["NM_LANCEDB_URI"]
    options = resource.storage_options()
    assert options["aws_endpoint"] == services.s3_endpoint and options["allow_http"] == "true"
    store = resource.get()
    assert store.chat_files() == [CHAT]
    assert store.messages_for(CHAT).height == built["per_file"][CHAT]["messages"]
    assert store.full_text_search("messages", CHAT, "garden", 5)

    # A question is answered from the object store (and its retrieval event is written there, with
    # the index's options: plain http implied by the http:// endpoint, AWS_ALLOW_HTTP unset).
    env.pop("AWS_ALLOW_HTTP")
    answer = cli(["ask", "--data", str(data), "--chat", CHAT, "What did they plant in the garden?"], env)
    assert answer["evidence"] and all(e["text"] for e in answer["evidence"])
    keys = [o["Key"] for o in s3_client(services).list_objects_v2(Bucket=s3_bucket, Prefix="team/index/")["Contents"]]
    assert any("retrieval_events" in k for k in keys), sorted({k.split("/")[2] for k in keys})
    assert not (home / "lancedb").exists()
