"""The night: ``wf batch`` (plan, run, log, summary), ``wf res`` (a command under limits),
``wf batch --prep``, ``wf pilot`` (batches back to back) and ``wf demo``.

May import: every part below it (base, tasks, cost, adapters, workers, trees, fanout, orch,
cloud); never ``wf.cli``.
"""
