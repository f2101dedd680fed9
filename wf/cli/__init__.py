"""The command line (``wf``): the only package that imports click.

Each command collects its options, calls one core function and prints the result. One
module of commands per part: ``tasks``, ``git``, ``workers`` (dispatch, run), ``runs``,
``watch`` (monitor, gather), ``apply``, ``orch``, ``usage``, ``batch``, ``top``, ``cloud``,
``claims`` (claims across machines);
``base`` holds the group, the shared helpers and the entry point.
Exit codes: 0 ok, 1 an expected error (message on stderr), 2 a usage error,
3 a bug (traceback saved to a crash log), 4 a person or the caller must act,
5 gave up waiting, 130 interrupted.

The commands load lazily: ``COMMANDS`` names each command's module (under ``wf.cli``)
and the first sentence of its help, which is all ``wf --help`` shows of it; the module
is imported when the command runs (tests/cli/test_lazy.py keeps the table true).

May import: every part below it; nothing imports it but ``wf.scripted`` and ``wf.__main__``.
"""

from wf.cli.base import cli, entry, main

# name -> (module, first sentence of its help)
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("tasks", "Set up wf here: TASKS.md, wf.toml, and .worktrees/, .wf/, out/ in .gitignore."),
    "config": ("tasks", "Show the settings, one KEY, or set KEY to VALUE in wf.toml (comments kept)."),
    "check": ("tasks", "Check TASKS.md, the archive and wf.toml; exit 1 if there are errors."),
    "list": ("tasks", "List open tasks, one short row each."),
    "lanes": ("tasks", "List lanes with their model, adapter, task counts and active worker."),
    "show": ("tasks", "Show a task: where it is, whether it is runner-ready (and why not), its text."),
    "ctx": (
        "tasks",
        "What a worker needs for task ID: the task, its Done, the archive lines of its After tasks, "
        "the main tree, worktree and branch.",
    ),
    "log": ("tasks", "The last N archived (done) tasks, oldest first."),
    "add": ("tasks", "Add a task at the end of TASKS.md and print its id."),
    "set": ("tasks", "Change fields of task ID; an empty value ('') removes the field."),
    "status": ("tasks", "Set the status of task ID: STATE is pending, progress, awaiting, blocked or wip."),
    "note": ("tasks", "Append a dated 'Note:' line to task ID."),
    "edit": ("tasks", "Edit task ID in $VISUAL or $EDITOR (default vi), safely beside wf's own writes."),
    "done": ("tasks", "Archive task ID: one line in the archive, the task removed from TASKS.md."),
    "claims": (
        "claims",
        "The claims on the shared remote: who holds each task, on which machine, since when.",
    ),
    "wt": ("git", "Lane worktrees (or clones) in .worktrees/: add, list, rm, prune."),
    "merge": ("git", "Merge task branch LANE/ID into the main branch in the main checkout."),
    "sync": (
        "git",
        "Share the backlog with the other machines: fetch, merge TASKS.md by task, push with a lease.",
    ),
    "doctor": (
        "git",
        "Reconcile tree records, worktrees, LANE/* branches, live pids and stale git lock files; "
        "one line per disagreement, repaired with --fix.",
    ),
    "dispatch": ("workers", "Run one headless unit in the foreground."),
    "run": ("workers", "Run the units of a JSON or TOML manifest in parallel; one line per unit as it ends."),
    "runs": ("runs", "Recent runs (newest first); subcommands show one run's units."),
    "apply": (
        "apply",
        "Bring a clone unit's changes (its commits, edits and new files since the commit it started from) "
        "into the main checkout's files, unstaged: nothing is committed and the index is not touched.",
    ),
    "monitor": (
        "watch",
        "Wait for the first thing that needs attention among the units watched (all, the UNITs named, "
        "or with --running those still running), then print one line per unit (running ones: growing, "
        "or quiet for how long).",
    ),
    "gather": (
        "watch",
        "Wait until every unit (or the UNITs named) has ended and its results stayed quiet, printing "
        "'DONE UNIT STATE' as each lands, then each answer under a '== UNIT (state)' header.",
    ),
    "orch": ("orch", "The orchestration loop: pick a lane's next task, post its worker's report."),
    "usage": ("usage", "What a worker really spent, from its own transcript; or --report."),
    "install": (
        "orch",
        "Link the wf-worker subagent and the wf skills into Claude Code's folders (agents/wf-worker.md, "
        "skills/wf-orchestrate, skills/wf-design, skills/wf-pilot).",
    ),
    "demo": (
        "orch",
        "Run the real loop on a small made-up project, with a scripted worker (no network, no API key): "
        "two lanes, a task with After, an owner task, an awaiting one, one big enough to be sliced, "
        "one whose Done fails.",
    ),
    "res": ("batch", "Run a command under limits on its whole process tree (memory, CPU, wall time)."),
    "batch": (
        "batch",
        "Run up to N tasks unattended: a detached job (it survives the terminal and runs from cron) "
        "runs 'wf orch run' under 'wf res' limits (title wf-batch) and writes the summary "
        "out/wf-batch-<stamp>.md as it goes.",
    ),
    "pilot": (
        "batch",
        "Batches back to back, in the foreground (a terminal multiplexer, a timer): when no batch is "
        "alive and a free lane has runner-ready work, start 'wf batch K'; when there is none, one prep "
        "batch per idle spell; after each batch its stop lines and the questions a person must answer.",
    ),
    "top": ("top", "What the night is doing now: who waits for a person, each lane's task, time and cost."),
    "cloud": ("cloud", "The cloud lane: tasks run as Claude Code cloud sessions (cloud = true in wf.toml)."),
    "batch-job": ("batch", "The detached batch (started by wf batch N)."),
    "batch-tail": ("batch", "The cloud tail of a batch (started by the batch job when its loop ends)."),
    "gate-run": ("orch", "Run the gate at SHA (started by wf orch post in the background)."),
}
HIDDEN = frozenset({"batch-job", "batch-tail", "gate-run"})  # run by wf itself, not listed

cli.lazy.update({name: (module, summary, name in HIDDEN) for name, (module, summary) in COMMANDS.items()})

__all__ = ["COMMANDS", "HIDDEN", "cli", "entry", "main"]
