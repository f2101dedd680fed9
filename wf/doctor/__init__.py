"""``wf doctor``: where the parts' records disagree, one finding each, and what ``--fix``
may repair. ``checks`` looks at records, trees, branches, processes and git's locks;
``lanes`` at the orchestration's lane records and claims.

May import: every part below the CLI; nothing imports it but the CLI.
"""
