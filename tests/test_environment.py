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


def test_litellm_makes_no_logging_copy_of_the_messages() -> None:
    # litellm copies each call's messages for its logging payloads (shortening base64 images), in proportion to
    # the history; the gateway keeps no such payload, so the copy is turned off before litellm is imported
    code = (
        "import gateway, gateway.adapters.upstream\n"
        "from litellm.litellm_core_utils.logging_utils import truncate_base64_in_messages\n"
        "messages = [{'role': 'user', 'content': [{'type': 'image_url', 'image_url': {'url': 'data:image/png;base64,' + 'A' * 500}}]}]\n"
        "print(truncate_base64_in_messages(messages) is messages)"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "True"
    environ = {"MAX_BASE64_LENGTH_FOR_LOGGING": "64"}
    prepare_environment(environ)
    assert environ["MAX_BASE64_LENGTH_FOR_LOGGING"] == "64"  # an operator's choice stays
