"""Orchestration: lanes of workers kept busy with the right task, every finished task
checked, merged and logged before the next one starts.

- ``state``: the typed records and enums (results, outcomes, stop reasons);
- ``pick``: choose, claim and ready a lane's next task;
- ``post``: a worker's report through the outcome table;
- ``loop``: ``wf orch run``, the same loop with no orchestrating agent;
- ``report``: the worker's four lines; ``gate``: the post-merge check;
- ``scripted``, ``demo``, ``install``: the scripted worker, ``wf demo``, ``wf install``.
"""
