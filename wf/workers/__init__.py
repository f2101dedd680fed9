"""One headless worker.

- ``supervise``: start it, watch its progress and stalls, stop it; ``answer``: its answer
  (output, the FALLBACK, salvage);
- ``procs``: processes, their whole trees and their kill (the one user of psutil);
- ``runs``: its run folder (status, output, logs).

May import: ``wf.base``, ``wf.tasks``, ``wf.cost``, ``wf.adapters``.
"""
