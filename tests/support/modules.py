"""A Python file loaded as a module without putting its folder on the path (a script or a node-side library whose
siblings' names would shadow others)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_module(path: Path, name: str | None = None) -> ModuleType:
    """The module in `path`, executed once and registered in sys.modules under `name` (default: the file's stem)."""
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
