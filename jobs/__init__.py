"""The Dagster jobs, schedules and the sensors that launch them, one module per domain of assets/
(``jobs/<domain>.py``, each with its ``defs``; definitions/ merges them with the assets). The
Dagster instance itself (settings, lock, storage class) is instance/.

``jobs/instance_storage.py`` only keeps an older dagster.yaml that names it loading."""
