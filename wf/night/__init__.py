"""The night: what runs while nobody watches.

- ``batch``: ``wf batch``, the detached nightly run; ``batchplan``: its plan and record;
  ``batchcost``: its forecast, its budget, the summary's forecast vs actual;
  ``batchstatus``: ``--status`` and ``--stop``; ``batchlog``: the morning summary, from
  the orch log, the cost log and the loop's stop events; ``taskrows``: the batch's typed
  task rows and which outcomes are done; ``morning``: the morning page
  (HTML) beside the summary, and the ``batch_ended`` notice;
- ``res``: ``wf res``, a command under limits; ``resjobs``: its job records;
  ``resbackend``: the watchdog and cgroup backends;
- ``prep``: ``wf batch --prep``; ``pilot``: ``wf pilot``, batches back to back;
- ``top``: what ``wf top`` shows, a snapshot of the night read from wf's state;
- ``demo``: ``wf demo``.

May import: every part below it (base, tasks, cost, adapters, workers, trees, fanout, orch,
cloud); never ``wf.cli``.
"""
