"""CLI commands, one module per concern; each registers itself with `mirrorflow.cli.command`."""
import importlib
import pkgutil

for _m in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_m.name}")
