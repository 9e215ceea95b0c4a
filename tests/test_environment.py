"""The offline switches the gateway sets before importing heavy libraries."""

from __future__ import annotations

import subprocess
import sys

from gateway.environment import litellm_tokenizers_dir, prepare_environment


def test_sets_what_is_missing_and_keeps_what_the_user_set() -> None:
    environ = {"HF_HUB_OFFLINE": "0"}
    prepare_environment(environ)
    assert environ["HF_HUB_OFFLINE"] == "0"
    assert environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    tokenizers = litellm_tokenizers_dir()
    assert tokenizers is not None and environ["TIKTOKEN_CACHE_DIR"] == str(tokenizers)


def test_importing_the_gateway_prepares_the_environment_in_a_clean_process() -> None:
    code = "import os, gateway, tiktoken; tiktoken.get_encoding('cl100k_base'); print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'])"
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
