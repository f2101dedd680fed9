from wf.cli import entry

entry()
