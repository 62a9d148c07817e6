"""The one door between the project and the outside world.

``environment.py`` reads every environment variable (and nothing else in the repository does);
``runtime.py`` builds the embedder, index, LLM client, retriever and event log;
``dagster_resources.py`` holds the Dagster resources of the asset graph, which build through
``runtime`` and take their settings from ``environment``. This package file imports nothing, so
``environment`` and ``runtime`` load without Dagster.
"""
