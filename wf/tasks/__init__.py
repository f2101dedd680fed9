"""TASKS.md: the byte-exact engine (``taskfile``), the backlog and its readiness rule
(``backlog``, ``holds``), edits that splice only touched lines (``edits``, ``ops``), the
archive (``archive``), views (``views``), the parse and list caches, ``wf init``
(``bootstrap``).

May import: ``wf.base``.
"""
