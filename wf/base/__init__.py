"""The ground every part stands on.

- ``errors``: the one root error ``WfError``, its kinds and the exit codes;
- ``ids``, ``quantity``, ``stamps``, ``text``: ids and names, sizes and durations (and a
  reset time's words), UTC time stamps read one way, terminal-safe text;
- ``fsutil``: exact reads, atomic writes, appends, tails; ``records``: the one validated
  reader and writer of JSON state records; ``settle``: settled reads, checked renames;
- ``lock``: the project lock (filelock); ``pids``: whether a pid lives, and since when;
- ``project``: finding the main checkout; ``config``: wf.toml, read; ``configedit``: its
  edits (tomlkit);
- ``homes``: where the agent tools and wf keep their files; ``gitenv``: the variables that
  point git elsewhere; ``machine``: which machine this is (claims shared between machines).

May import: nothing of wf outside ``wf.base`` (the standard library; tomlkit in ``configedit``,
filelock in ``lock``).
"""
