"""Where the instance class lived before ``instance/storage.py``: a dagster.yaml edited by hand that
still names ``module: jobs.instance_storage`` keeps loading (generated ones are rewritten to the new
module by ``instance.lifecycle.dagster_home``). Nothing else imports it."""

from instance import storage as _storage
from instance.storage import NarrativeMirrorInstance, PooledSqliteEventLogStorage, PooledSqliteRunStorage  # noqa: F401 - the names a dagster.yaml or a stored instance reference may give


def __getattr__(name: str):
    return getattr(_storage, name)  # the PostgreSQL classes, made when first asked for
