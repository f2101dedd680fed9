"""How a unit of the real claude, codex and opencode ends when the model API fails,
through ``wf dispatch`` (issue 21, item 6): the tools run against the scripted model API
of tests/model_api.py (every proxy is that server, so nothing leaves 127.0.0.1), and what
they retry, print and log is their own. Run when WF_REAL_TOOLS names the folder holding
the binaries (.ci/run installs the pinned ones; point it at another install to test
another version)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import WfRunner
from tests.model_api import BAD_KEY, SERVER_ERROR, Fault, ModelApi, Request, Step, Text
from tests.workers.test_workers import Workers

REAL_BIN = os.environ.get("WF_REAL_TOOLS", "")
pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(not REAL_BIN, reason="WF_REAL_TOOLS is not set (.ci/run sets it)"),
]
# Where codex goes on its own besides the model (refused by the proxy, noted): its
# update check and its plugins.
CODEX_HOMES = {"github.com:443", "api.github.com:443", "chatgpt.com:443", "ab.chatgpt.com:443"}


@pytest.fixture
def w(wf: WfRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workers:
    for tool in ("claude", "codex", "opencode"):
        if not (Path(REAL_BIN) / tool).exists():
            pytest.skip(f"{tool} is not in WF_REAL_TOOLS ({REAL_BIN})")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY", "IS_SANDBOX"):
        monkeypatch.delenv(var, raising=False)
    Path(os.environ["CODEX_HOME"]).mkdir(parents=True, exist_ok=True)
    workers = Workers(wf.root, tmp_path)
    workers.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), REAL_BIN, os.environ["PATH"]])
    return workers


def claude_env(api: ModelApi) -> dict[str, str]:
    return {
        **api.env(),
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "x",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def codex_env(api: ModelApi, *, retries: bool) -> dict[str, str]:
    """The scripted provider in codex's config.toml (wf's argv stays its own)."""
    limits = "" if retries else "request_max_retries = 0\nstream_max_retries = 0\n"
    (Path(os.environ["CODEX_HOME"]) / "config.toml").write_text(
        'model_provider = "scripted"\n[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "{api.url}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n{limits}'
    )
    return {**api.env(), "OPENAI_API_KEY": "x"}


def opencode_dir(api: ModelApi, tmp: Path) -> Path:
    """A folder whose opencode.json has the server as a provider's baseURL."""
    import json

    folder = tmp / "oc"
    folder.mkdir()
    provider = {
        "npm": "@ai-sdk/anthropic",
        "name": "Scripted",
        "options": {"baseURL": f"{api.url}/v1", "apiKey": "x"},
        "models": {"claude-sonnet-4-6": {"name": "Scripted Sonnet"}},
    }
    (folder / "opencode.json").write_text(json.dumps({"provider": {"scripted": provider}}))
    return folder


QUIET = {f"OPENCODE_DISABLE_{x}": "1" for x in ("MODELS_FETCH", "AUTOUPDATE", "LSP_DOWNLOAD", "SHARE")}


# ---------------------------------------------------------------- the retry's cause survives


def test_a_timeout_while_claude_retries_a_401_keeps_the_cause(w: Workers) -> None:
    """claude retries a 401 ten times with a growing backoff: a --timeout that ends it
    meanwhile is still a timeout, and says what it was retrying (typed: while_retrying)."""
    with ModelApi([BAD_KEY]) as api:
        r = w.run("dispatch", "r1", "a1", "--adapter", "claude", "--model", "sonnet", "--timeout", "10",
                  "--prompt", "Say ok.", timeout=120, **claude_env(api))  # fmt: skip
    assert r.returncode == 4, r.stdout + r.stderr
    st = w.status("r1", "a1")
    assert (st["state"], st["failure"], st["while_retrying"]) == ("timeout", "timeout", "auth"), st
    assert st["reason"].startswith("still running after 10s (timeout) while retrying (auth): API retry ")
    assert "authentication_failed 401" in st["reason"]
    assert "timeout: still running after 10s (timeout) while retrying (auth): API retry" in r.stdout
    assert len(api.requests) >= 2 and api.outside == []


def test_a_timeout_while_codex_reconnects_keeps_the_cause(w: Workers) -> None:
    """codex reconnects after a 500 ("Reconnecting... n/5 (...)") for ~25 s: a --timeout
    that ends it meanwhile names the network as what it was retrying."""
    with ModelApi([SERVER_ERROR]) as api:
        r = w.run("dispatch", "r1", "c1", "--adapter", "codex", "--model", "gpt-5.5", "--timeout", "8",
                  "--prompt", "Say ok.", timeout=120, **codex_env(api, retries=True))  # fmt: skip
    assert r.returncode == 4, r.stdout + r.stderr
    st = w.status("r1", "c1")
    assert (st["state"], st["failure"], st["while_retrying"]) == ("timeout", "timeout", "network"), st
    assert "while retrying (network): Reconnecting... " in st["reason"]
    assert "experiencing high demand" in st["reason"]
    assert set(api.outside) <= CODEX_HOMES


def test_a_timeout_with_no_retry_has_no_cause(w: Workers) -> None:
    """A run that was making progress when its timeout came has no retry to name."""

    def slow(request: Request) -> Step:
        import time

        time.sleep(30)  # the model takes its time (the server thread; the timeout ends the run)
        return Text("late")

    with ModelApi(slow) as api:
        r = w.run("dispatch", "r1", "a2", "--adapter", "claude", "--model", "sonnet", "--timeout", "6",
                  "--prompt", "Say ok.", timeout=120, **claude_env(api))  # fmt: skip
    assert r.returncode == 4, r.stdout + r.stderr
    st = w.status("r1", "a2")
    assert (st["state"], st["failure"], st["while_retrying"]) == ("timeout", "timeout", None), st
    assert st["reason"] == "still running after 6s (timeout)"


# ---------------------------------------------------------------- a 5xx is the service's


def test_codex_http_500_is_network_not_the_task(w: Workers) -> None:
    """codex says a 500 in words of its own, with no number: "We're currently experiencing
    high demand ..."; another 5xx as "unexpected status 503 Service Unavailable: ..." (the
    status decides, not the words: a 507 has none wf knows)."""
    faults = (SERVER_ERROR, Fault(503, "api_error", "try later"), Fault(507, "api_error", "disk full"))
    for unit, fault in ((f"c{f.status}", f) for f in faults):
        with ModelApi([fault]) as api:
            r = w.run("dispatch", "r1", unit, "--adapter", "codex", "--model", "gpt-5.5", "--prompt", "Say ok.",
                      timeout=120, **codex_env(api, retries=False))  # fmt: skip
        assert r.returncode == 4, r.stdout + r.stderr
        st = w.status("r1", unit)
        assert (st["state"], st["failure"]) == ("failed", "network"), st
        assert set(api.outside) <= CODEX_HOMES
    assert "failed network: We’re currently experiencing high demand" in w.run("runs", "status", "r1").stdout


def test_claude_http_500_is_network(w: Workers) -> None:
    with ModelApi([SERVER_ERROR]) as api:
        r = w.run("dispatch", "r1", "a5", "--adapter", "claude", "--model", "sonnet", "--prompt", "Say ok.",
                  timeout=120, **claude_env(api), CLAUDE_CODE_MAX_RETRIES="0")  # fmt: skip
    assert r.returncode == 4, r.stdout + r.stderr
    st = w.status("r1", "a5")
    assert (st["state"], st["failure"]) == ("failed", "network"), st
    assert "failed network: API Error: 500" in r.stdout and api.outside == []


@pytest.mark.slow
def test_opencode_http_500_is_network(w: Workers, tmp_path: Path) -> None:
    """opencode's error event carries the status (APIError, statusCode 500): the
    service's, whatever its message says."""
    fault = Fault(500, "api_error", "Something broke", {"retry-after-ms": "50"})
    with ModelApi([fault]) as api:
        folder = opencode_dir(api, tmp_path)
        r = w.run("dispatch", "r1", "o5", "--adapter", "opencode", "--model", "scripted/claude-sonnet-4-6",
                  "--cwd", str(folder), "--prompt", "Say ok.", timeout=150, **api.env(), **QUIET)  # fmt: skip
    assert r.returncode == 4, r.stdout + r.stderr
    st = w.status("r1", "o5")
    assert (st["state"], st["failure"]) == ("failed", "network"), st
    assert "failed network: APIError: Something broke" in r.stdout and api.outside == []


# ------------------------------------------------ opencode: the first logged error decides


@pytest.mark.slow
def test_opencode_offline_without_a_key_is_network(w: Workers) -> None:
    """No key for anthropic and no network (the proxy refuses models.dev): opencode first
    logs the failed fetch of its model list, then 'Model not found', and prints an
    UnknownError. The first logged error is the cause: network, not model."""
    with ModelApi([Text("never asked")]) as api:
        r = w.run("dispatch", "r1", "o1", "--adapter", "opencode", "--model", "anthropic/claude-sonnet-4-5",
                  "--prompt", "Say ok.", timeout=200, **api.env())  # fmt: skip
    assert r.returncode == 4, r.stdout + r.stderr
    st = w.status("r1", "o1")
    assert (st["state"], st["failure"]) == ("failed", "network"), st
    assert st["reason"].startswith("HttpClientError: ")
    assert "ProviderModelNotFoundError" in (w.unit("r1", "o1") / "worker.err").read_text()
    assert api.requests == [] and api.outside == ["models.opencode.ai:443"]


# ---------------------------------------------------------------- permission modes


def test_claude_takes_manual_the_2_1_332_name_of_the_default_mode(wf: WfRunner, w: Workers) -> None:
    """`manual` is what 2.1.332's --help lists for the default mode: a lane may say it,
    wf passes it, and the real claude runs with it (its init event says "default")."""
    (wf.root / "wf.toml").write_text('[lanes.s]\nmodel = "sonnet"\npermission_mode = "manual"\n')
    assert "permission_mode" not in wf("check").out
    manifest = wf.root / "units.json"
    manifest.write_text('{"units": [{"id": "m1", "adapter": "claude", "model": "sonnet", "prompt": "Say ok.", '
                        '"permission_mode": "manual"}]}')  # fmt: skip
    with ModelApi([Text("ok")]) as api:
        r = w.run("run", str(manifest), "--run", "r2", timeout=120, **claude_env(api))
    assert r.returncode == 0, r.stdout + r.stderr
    st = w.status("r2", "m1")
    assert st["state"] == "done" and st["access"]["permission_mode"] == "manual"
    log = (w.unit("r2", "m1") / "worker.log").read_text()
    assert '"permissionMode":"default"' in log and api.outside == []
