"""Git and the working trees.

- ``gitops``: how wf's core runs git, and the only module that imports GitPython;
  ``gitfiles``: what wf reads of git without running it (temporary indexes, git's output,
  a tree's size); ``objects``: the trees of wf's archive commit, built in-process, their
  objects stored by GitPython's object database;
- ``worktrees``: lane worktrees and remote-less clones; ``treeadmin``: ``wf wt`` (list,
  rm, prune) and releasing trees;
- ``merge``: ``wf merge``, the merge that never loses a commit, and its archive commit;
- ``remote``: the shared remote of several machines: fetch, ls-remote, and pushes that are
  each a compare-and-swap (a lease), with typed outcomes; ``sync``: ``wf sync``, the
  backlog merged with the shared remote's and pushed with a lease; ``claims``: claims
  across machines, each a ref on the shared remote made by compare-and-swap (take,
  release, steal, renew, what ``wf check`` says of them);
- ``xmerge``: ``wf merge`` across machines (the task's branch pushed first, main brought
  level with the shared remote's, pushed with a lease, a lost race redone on the new
  main); ``books``: the files of wf's archive commit and its trailer.

(The scripted worker and ``wf demo`` run git themselves, as a person or an agent does.)

May import: ``wf.base``, ``wf.tasks``, ``wf.cost``, ``wf.adapters``, ``wf.workers``.
"""
