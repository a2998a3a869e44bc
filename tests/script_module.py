"""A file of scripts/ imported as a module, for the tests of the scripts' own helpers (scripts/ is not a package)."""

import importlib.util
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str):
    """scripts/<name>.py as module `name`, registered in sys.modules (dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
