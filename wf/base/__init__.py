"""The ground every part stands on: errors and exit codes, ids, quantities, atomic writes,
the typed record reader, the settle step, the project lock, the project and its wf.toml.

It imports nothing of wf above it (only the standard library, filelock in ``lock`` and
tomlkit in ``config``).
"""
