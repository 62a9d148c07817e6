"""The Dagster instance of a home: its settings file, one command at a time and the recovery of
killed runs (``lifecycle``), and the instance class with its storages (``storage``, named in
dagster.yaml as ``module: instance.storage``)."""
