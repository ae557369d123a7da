"""The upstream providers: what the gateway knows of each, in one record per provider.

Adding a provider is a folder under ``transports/`` with its ``Transport``, and its record
(``ProviderRecord``, ``record.py``): its name, whether it speaks, its audio rates, its settings
and which of them it needs, its declaration dialect, the model names ``/v1/realtime`` picks it by,
and how it builds its transport. A built-in one is a module here listed in ``registry.BUILTIN``
(and its settings among ``ProviderSettings``' bases); any other is handed to
``PROVIDERS.register``. Nothing else in the gateway names a provider: everything asks the record
(``tests/test_providers.py`` checks it; ``tests/contract/`` checks the transport's behaviour).
"""

from gateway.providers.record import VOICE_AND_TEXT, ModelNames, ProviderRecord, UpstreamSettings
from gateway.providers.registry import (
    BUILTIN,
    DEFAULT_PROVIDER,
    PROVIDERS,
    ProviderRegistry,
    ProviderSettings,
    close_shared_upstream_clients,
    configured_models,
    make_transport,
    provider_lines,
    warm_up_upstreams,
)

__all__ = [
    "BUILTIN",
    "DEFAULT_PROVIDER",
    "PROVIDERS",
    "VOICE_AND_TEXT",
    "ModelNames",
    "ProviderRecord",
    "ProviderRegistry",
    "ProviderSettings",
    "UpstreamSettings",
    "close_shared_upstream_clients",
    "configured_models",
    "make_transport",
    "provider_lines",
    "warm_up_upstreams",
]
