"""The ground every part stands on: errors and exit codes, ids, quantities (and a reset
time's words), atomic writes, the typed record reader, the settle step, the project lock,
the project and its wf.toml, and whether a pid lives (``pids``).

May import: nothing of wf outside ``wf.base`` (the standard library; tomlkit in
``config``; psutil in ``pids`` only where there is no ``/proc``).
"""
