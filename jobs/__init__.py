"""How runs are launched on the Dagster instance: the instance in ``$NM_HOME/dagster``
(``instance``) and its storage class (``instance_storage``, named in dagster.yaml).
The domains' own jobs, schedules and sensors live beside their assets (assets/<domain>/jobs.py)."""
