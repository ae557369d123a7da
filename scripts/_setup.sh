# Shared by scripts/serve, scripts/test and scripts/bench: make .venv, install the
# project, build the tool registry. Idempotent and quiet; sourced, not executed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
# Reinstall only when the project's metadata changed since the last install.
STAMP=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$STAMP" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev,fakes,redis,otlp]'
    rm -f .venv/.installed-*
    touch "$STAMP"
fi
export PATH="$ROOT/.venv/bin:$PATH"
python -m registry_build --tools tools --out build/tool_registry.json --quiet
