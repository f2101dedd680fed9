"""``python -m wf.scripted``: the scripted worker under its first name (wf.orch.scripted),
kept because wf.toml files name it in their cmd lanes."""

from wf.orch.scripted import main

if __name__ == "__main__":
    raise SystemExit(main())
