"""What a worker really cost, from its transcript: the readers and counts (``usage``), the
price table (``prices``) and the cost log every run appends to (``costlog``).

May import: ``wf.base``.
"""
