"""The environment variables that point git at another repository than the folder it runs
in (a hook's or an alias's ``GIT_DIR``, a ``-c`` of the git that started wf). wf never
changes its own environment for them: ``wf.trees.gitops`` removes them from each git
child's, and a worker's environment never gets them (its own git must work on its tree).
"""

from __future__ import annotations

from collections.abc import Mapping

# Variables that point git at another repository than the folder it runs in.
LOCATION_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_QUARANTINE_PATH",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_CONFIG_PARAMETERS",  # -c settings of a git that started wf (a hook, an alias)
    "GIT_CONFIG_COUNT",
)


def without_location(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without the variables that would point a git in it elsewhere."""
    return {k: v for k, v in env.items() if k not in LOCATION_VARS}
