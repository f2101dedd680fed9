"""Git and the working trees: the one module that runs git and imports GitPython (``gitops``, with
what it reads without git in ``gitfiles``), lane worktrees and
remote-less clones (``worktrees``), their admin (``treeadmin``) and the merge that never
loses a commit (``merge``).

May import: ``wf.base``, ``wf.tasks``, ``wf.cost``, ``wf.adapters``, ``wf.workers``.
"""
