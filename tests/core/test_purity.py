"""The core must stay pure: no IO frameworks, no network clients, no ML stacks."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import gateway.core

FORBIDDEN = {"asyncio", "redis", "litellm", "starlette", "uvicorn", "httpx", "torch", "sentence_transformers"}
ALLOWED_THIRD_PARTY = {"lxml", "tiktoken", "snowballstemmer"}  # pure text functions, no IO
CORE = Path(gateway.core.__file__).parent


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_core_sources_are_found() -> None:
    assert {"blocks.py", "views.py", "render.py", "budget.py"} <= {p.name for p in CORE.rglob("*.py")}


def test_core_imports_nothing_forbidden() -> None:
    offenders = {
        f"{path.name}: {module}"
        for path in CORE.rglob("*.py")
        for module in imported_modules(path)
        if module.split(".")[0] in FORBIDDEN
    }
    assert not offenders


def test_core_imports_only_stdlib_its_text_libraries_and_itself() -> None:
    for path in CORE.rglob("*.py"):
        for module in imported_modules(path):
            root = module.split(".")[0]
            if root == "gateway":
                assert module.startswith("gateway.core"), f"{path.name} imports {module}"
            else:
                assert root in sys.stdlib_module_names or root in ALLOWED_THIRD_PARTY, f"{path.name} imports {module}"


def test_the_scanner_sees_forbidden_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import asyncio\nfrom redis.asyncio import Redis\nfrom . import sibling\n", encoding="utf-8")
    assert imported_modules(sample) == {"asyncio", "redis.asyncio"}


def test_public_api_is_exported() -> None:
    for name in gateway.core.__all__:
        assert hasattr(gateway.core, name), name
