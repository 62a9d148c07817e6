"""Errors of the command line (no Dagster import: the question path must stay light)."""


class RunFailed(RuntimeError):
    """Some runs failed; the other chat files were still processed."""

    def __init__(self, failures: list[str]):
        super().__init__(f"{len(failures)} run(s) failed:\n  " + "\n  ".join(failures))
        self.failures = failures
