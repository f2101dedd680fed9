"""What a worker really cost, from its transcript.

- ``transcripts``: a Claude Code transcript read once per request; ``usage``: tokens and
  dollars per session (Claude Code, Codex), output estimates;
- ``prices``: the price table; ``costlog``: the cost log every run appends to, and
  ``--report``; ``report``: what ``wf usage`` reports;
- ``forecast``: what tasks will likely cost and take, from the cost log's history.

May import: ``wf.base``.
"""
