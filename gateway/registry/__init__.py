"""The runtime tool registry: the built artifact, loaded once, pinned per session."""

from gateway.registry.loader import BUILD_COMMAND, Registry, load_registry
from gateway.registry.spec import Handler, ToolSpec, UnavailableTool
from gateway.registry.validation import ArgumentValidator, compile_validator

__all__ = [
    "BUILD_COMMAND",
    "ArgumentValidator",
    "Handler",
    "Registry",
    "ToolSpec",
    "UnavailableTool",
    "compile_validator",
    "load_registry",
]
