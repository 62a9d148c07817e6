"""The ``narrative-mirror`` command line and the runner that drives the asset graph for it."""
