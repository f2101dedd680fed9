"""Orchestration: lanes of workers kept busy with the right task, every finished task
checked, merged and logged before the next one starts.

- ``state``: the typed records and enums (results, outcomes, stop reasons);
- ``pick``: choose, claim and ready a lane's next task, and ``CloudPlug``: the interface
  through which the cloud lane (``wf.cloud.PLUG``, handed in by the commands) plugs in;
- ``decide``: a worker's report to its outcome; ``post``: the outcome applied (merge,
  archive, release, next pick);
- ``loop``: ``wf orch run``, the scheduler; ``lanework``: each lane's worker, its end,
  its park for a usage limit; ``lanetool``: a lane's tool and model; ``ending``: how a
  worker ended, and crash signatures;
- ``events``: typed stop events, one JSON line each; ``starts``: a batch's N, local
  starts and cloud sends counted together;
- ``report``: the worker's four lines; ``gate``: the post-merge check;
- ``park``: how long a lane waits out a usage limit; ``install``: ``wf install``;
- ``budget``: a run's budget gate (``--budget``, ``weekly_reserve``), asked before each
  claim, and the plan's usage windows.

May import: every part below it (base to fanout); never ``wf.cloud`` (the cloud lane
plugs in), ``wf.night`` or ``wf.cli``.
"""
