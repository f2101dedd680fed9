"""One headless worker: start it (``supervise``), watch its progress and stalls, kill its
whole tree (``procs``), and keep its run folder (``runs``).

May import: ``wf.base``, ``wf.tasks``, ``wf.cost``, ``wf.adapters``.
"""
