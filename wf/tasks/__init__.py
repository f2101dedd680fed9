"""TASKS.md, the backlog a person edits.

- ``taskfile``: the byte-exact engine (parse, render, splice); ``fields``: a task's fields
  (keys, order, the Status line);
- ``backlog``: the backlog and its one readiness rule; ``holds``: what keeps a task from
  the runners, and what releases it;
- ``edits``: edits that splice only touched lines; ``ops``: every write (add, set, status,
  note, done); ``archive``: DONE.md; ``merge3``: three-way
  merges of TASKS.md by task, the archive and the cost log as unions (``wf sync``);
- ``views``: what the read-only commands report; ``parsecache``, ``listcache``: the caches
  that keep ``wf list`` fast; ``bootstrap``: ``wf init``.

May import: ``wf.base``.
"""
