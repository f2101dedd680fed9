"""Many headless units at once (fan-out): ``wf dispatch``, ``wf run``, ``wf runs retry``, ``wf monitor``,
``wf gather`` and the ``wf runs`` views, on top of the adapters (how to start a tool) and
the supervisor (how to watch and stop it).

| module | what |
|---|---|
| ``units`` | a request made ready to run: mode (scratch, clone, cwd), adapter, session |
| ``models`` | the model a unit asks for when it names none, and why (never an expensive default) |
| ``manifest`` | JSON/TOML manifests (``units`` or ``tasks``), run ids, ``wf runs new`` |
| ``fanout`` | dispatch, run, retry; what happens when a unit ends (cost line, left changes) |
| ``retry`` | attempts of a unit, what to re-run, the cap |
| ``watch`` | lost supervisors, monitor, gather |
| ``report`` | the lines a person reads |
| ``progress`` | the live status line on a terminal |
| ``diff`` | what a clone unit changed |
| ``contract`` | the return contract: the sections an answer gives, and its check |
| ``ledger`` | each unit's answer checked against the contract; the units whose result is missing or invalid |
| ``prompts`` | the prompt templates (``templates/*.md``): ``wf run --templates``, a unit's ``template`` |
| ``apply`` | ``wf apply``: a clone unit's changes into the main checkout, unstaged |
| ``compare`` | panels: the answers of units asked one question, section by section |

May import: ``wf.base``, ``wf.tasks``, ``wf.cost``, ``wf.adapters``, ``wf.workers``, ``wf.trees``.
"""
