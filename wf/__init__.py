"""wf: run many AI coding agents on one git repository without losing work."""

__version__ = "0.1.0"
