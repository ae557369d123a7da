"""What a call of OpenAI's WebRTC interface will be, checked before anything opens: its model,
its upstream, its session config. Shared by ``POST /v1/realtime/client_secrets`` (a key minted
for a config) and ``POST /v1/realtime/calls`` (a call on it); no I/O.

A config is one or more GA ``session`` objects applied in order over the session
``session.created`` would show (``SessionView``): the ephemeral key's, then the call's own
``session`` part, each with exactly the checks of a ``session.update`` on ``/v1/realtime``
(``decode_session_patch``, ``SessionView.apply``, the ``client_tools`` rules for the caller's
roles and the upstream), so a client meets the same refusals, naming the same fields.

The model: ``session.model`` (the key's, or the call's part) or ``?model=`` on the call; all
that are given must agree, and one is needed. It picks the upstream as on ``/v1/realtime``
(``model_names``; with the operator's aliases, one the caller may use).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.config import Settings
from gateway.edges.realtime.client_tools import ToolCheck, client_tools_of
from gateway.edges.realtime.errors import CompatError, invalid_type, missing_parameter
from gateway.edges.realtime.model_names import alias_refusal, model_refusal, provider_for_model
from gateway.edges.realtime.server_wire import SessionIds
from gateway.edges.realtime.session_config import SessionPatch, SessionView, decode_session_patch
from gateway.protocol import ClientToolDeclaration
from gateway.session import SessionUser
from gateway.session.client_tools import DeclarationProblem, declarations_problem
from gateway.session.manager import SessionManager

__all__ = ["CallSetup", "model_named", "plan_call", "session_patch"]


@dataclass(frozen=True, slots=True)
class CallSetup:
    """A call's session, as checked: the bridge is built with it."""

    model: str
    provider: str | None  # None: the default provider, or the alias decides
    alias: bool  # ``model`` is one of the operator's aliases
    patches: tuple[SessionPatch, ...]  # applied over the bridge's first view, in order
    check_tools: ToolCheck
    view: SessionView  # the result, as session.created will show it


def session_patch(session: Any) -> tuple[SessionPatch, str | None]:
    """A GA ``session`` object checked as a ``session.update``'s, and its ``model`` (if any)."""
    patch = decode_session_patch(session)
    model = session.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise invalid_type("session.model", "a non-empty string", model)
    return patch, model


def model_named(named: Sequence[tuple[str, str | None]]) -> str:
    """The one model ``named`` gives (``(where, model or None)``, in order of precedence)."""
    given = [(where, model) for where, model in named if model]
    if not given:
        raise missing_parameter("model")
    first_where, first = given[0]
    for where, model in given[1:]:
        if model != first:
            raise CompatError(
                "invalid_value",
                f"Invalid value: '{model}'. {where} names another model than {first_where} "
                f"('{first}').",
                param="model",
            )
    return first


def plan_call(
    manager: SessionManager,
    settings: Settings,
    user: SessionUser,
    model: str | None,
    patches: Sequence[SessionPatch],
    *,
    model_param: str = "model",
    expires_at: int | None = None,
) -> CallSetup:
    """The call ``user`` asks for, or the ``CompatError`` that says why not. ``model`` None
    (a key minted without one: the call names it, and is checked again): the tools are
    checked for the default provider."""
    catalog = manager.parts.catalog
    refusal = None
    if model is not None:
        refusal = (
            model_refusal(model, settings)
            if catalog is None
            else alias_refusal(model, catalog, user.roles, user.models)
        )
    if refusal is not None:
        raise CompatError(refusal.code, refusal.message, param=model_param)
    alias = catalog is not None
    provider = None if alias or model is None else provider_for_model(model)
    visible = [spec.tool_id for spec in manager.registry.visible_to(user.roles)]
    upstream = provider if provider is not None else settings.provider

    def check_tools(tools: Sequence[ClientToolDeclaration]) -> DeclarationProblem | None:
        return declarations_problem(tools, visible, upstream)

    ids = SessionIds()
    view = SessionView(
        id=ids("sess"),
        model=model or "",
        expires_at=expires_at if expires_at is not None else int(time.time()) + 30 * 60,
    )
    for patch in patches:
        view = view.apply(patch)
        if patch.tools is not None:
            client_tools_of(patch.tools, check_tools)
    return CallSetup(model or "", provider, alias, tuple(patches), check_tools, view)
