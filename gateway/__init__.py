"""PCP Gateway: an OpenAI-compatible gateway that gives chat clients paged memory.

Importing the package prepares the process environment (offline switches for litellm,
tiktoken and huggingface) before any submodule can import those libraries.
"""

from __future__ import annotations

from gateway.environment import prepare_environment

prepare_environment()

__all__ = ["__version__"]
__version__ = "0.1.0"
