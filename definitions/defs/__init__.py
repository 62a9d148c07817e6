"""dg's component folder. Empty: every definition is plain Python, built in definitions/__init__.py."""
