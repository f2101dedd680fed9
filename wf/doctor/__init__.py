"""``wf doctor``: where the parts' records disagree, one finding each, and what ``--fix``
may repair.

- ``checks``: records, trees, branches, processes and git's locks, as a table of checks;
- ``tools``: the worker tools' versions, flags and logins; ``findings``: ``Finding``;
- ``lanes``: the orchestration's lane records and claims.

May import: every part below the CLI; nothing imports it but the CLI.
"""
