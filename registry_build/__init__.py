"""Build-time compiler of the tool registry (docs/tools.md section 3).

``python -m registry_build [--tools DIR ...] [--out FILE]`` scans tool folders, validates every
file of every tool, generates provider declarations, and writes one deterministic artifact. All
errors of all tools are reported in one run; any error means a non-zero exit and no artifact.
"""

from registry_build.build import BuildError, BuildResult, build_registry

__all__ = ["BuildError", "BuildResult", "build_registry"]
