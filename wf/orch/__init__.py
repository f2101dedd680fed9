"""Orchestration: lanes of workers kept busy with the right task, every finished task
checked, merged and logged before the next one starts.

- ``state``: the typed records and enums (results, outcomes, stop reasons);
- ``pick``: choose, claim and ready a lane's next task, and ``CloudPlug``: the interface
  through which the cloud lane (``wf.cloud.PLUG``, handed in by the commands) plugs in;
- ``post``: a worker's report through the outcome table;
- ``loop``: ``wf orch run``, the same loop with no orchestrating agent;
- ``starts``: a batch's N, local starts and cloud sends counted together;
- ``report``: the worker's four lines; ``gate``: the post-merge check;
- ``park``: lanes waiting out a usage limit; ``install``: ``wf install``.

May import: every part below it (base to fanout); never ``wf.cloud`` (the cloud lane
plugs in), ``wf.night`` or ``wf.cli``.
"""
