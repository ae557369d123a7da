"""What ``session.start`` asks for, checked: a new session's setup (``session_setup``), the
target it starts on (through the operator's model aliases, when there are any), and the tools,
tool choice and model its user and key may have. Pure; raises ``StartRefused``."""

from __future__ import annotations

from gateway.config import Settings
from gateway.protocol import (
    ErrorCode,
    ErrorEvent,
    SessionStart,
    tool_choice_wire,
    turn_detection_wire,
)
from gateway.registry import Registry
from gateway.routing import ModelCatalog, NoSuchModel, first_target, pick_alias
from gateway.routing.resolve import key_allows_model
from gateway.session.client_tools import declarations_problem
from gateway.session.refusals import StartRefused
from gateway.session.session import SessionUser
from gateway.session.tool_choice import offered_tools, tool_choice_problem
from gateway.store import SessionSnapshot

__all__ = ["session_setup"]


def session_setup(
    start: SessionStart,
    user: SessionUser,
    registry: Registry,
    settings: Settings,
    *,
    catalog: ModelCatalog | None = None,
    session_id: str = "",
) -> SessionSnapshot:
    """A new session's setup from ``session.start``: the target it starts on (the alias its
    model names, when ``catalog`` is set), its tools checked against the registry, the user's
    roles and key, and against every provider the session may be moved to."""
    provider, model, voice = start.provider or settings.provider, start.model, start.voice
    alias = None
    if catalog is not None:
        try:
            alias = pick_alias(catalog, start.model, start.provider, user.roles, user.models)
        except NoSuchModel as refused:
            code = ErrorCode.FORBIDDEN if refused.forbidden else ErrorCode.INVALID_EVENT
            raise StartRefused(
                ErrorEvent(code=code, message=str(refused), event_id=start.event_id)
            ) from None
        if alias is not None:
            target = first_target(alias, session_id, start.provider, start.voice)
            provider, model, voice = target.provider, target.model, target.voice
    providers = [provider] if alias is None else sorted({t.provider for t in alias.targets})
    for each in providers:
        client_tools_checked(start, user, registry, each)
        tool_choice_checked(start, user, registry, each)
    if alias is None:
        model_allowed(start, user, provider)
    tools_allowed(start, user, registry)
    return SessionSnapshot(
        provider=provider,
        mode=start.mode.value,
        input_rate=start.audio.input_rate,
        output_rate=start.audio.output_rate,
        enabled_tools=user.tools if start.tools is None else tuple(start.tools),
        instructions=start.instructions or settings.default_instructions,
        model=model,
        voice=voice,
        locale=start.locale,
        tool_dialect=None if start.tool_dialect is None else str(start.tool_dialect),
        audio_encoding=start.audio.encoding,
        client_tools=tuple(tool.to_dict() for tool in start.client_tools),
        turn_detection=(
            None if start.turn_detection is None else turn_detection_wire(start.turn_detection)
        ),
        tool_choice=None if start.tool_choice is None else tool_choice_wire(start.tool_choice),
        alias=None if alias is None else alias.name,
    )


def tools_allowed(start: SessionStart, user: SessionUser, registry: Registry) -> None:
    """The tools it names exist, and its user's roles and key may use them."""
    if start.tools is None:
        return
    if user.tools is not None:
        denied = [name for name in start.tools if name not in user.tools]
        if denied:
            raise _forbidden(f"tools: this key may not use {', '.join(map(repr, denied))}", start)
    unknown = [name for name in start.tools if registry.get(name) is None]
    if unknown:
        raise StartRefused(
            ErrorEvent(
                code=ErrorCode.INVALID_EVENT,
                message=f"tools: no tool named {', '.join(map(repr, unknown))}",
                event_id=start.event_id,
            )
        )
    roles = frozenset(user.roles)
    denied = [
        name
        for name in start.tools
        if (spec := registry.get(name)) is not None and not spec.allowed_for(roles)
    ]
    if denied:
        raise _forbidden(f"tools: not allowed for this user: {', '.join(map(repr, denied))}", start)


def model_allowed(start: SessionStart, user: SessionUser, provider: str) -> None:
    """A gateway key names the models it may use (None: any): anything else is refused,
    naming it. (An alias is checked where it is picked.)"""
    model = start.model or provider
    if user.models is not None and not key_allows_model(user.models, provider, model):
        allowed = ", ".join(map(repr, user.models)) or "no model"
        raise _forbidden(f"model: this key may not use {model!r}; it may use {allowed}", start)


def _forbidden(message: str, start: SessionStart) -> StartRefused:
    return StartRefused(
        ErrorEvent(code=ErrorCode.FORBIDDEN, message=message, event_id=start.event_id)
    )


def tool_choice_checked(
    start: SessionStart, user: SessionUser, registry: Registry, provider: str
) -> None:
    """A ``tool_choice`` the session can apply on ``provider`` (``tool_choice_problem``)."""
    if start.tool_choice is None:
        return
    declared = (tool.to_dict() for tool in start.client_tools)
    offered = offered_tools(registry, user.roles, start.tools, declared)
    dialect = None if start.tool_dialect is None else str(start.tool_dialect)
    problem = tool_choice_problem(start.tool_choice, offered, provider, dialect)
    if problem is not None:
        raise StartRefused(
            ErrorEvent(
                code=ErrorCode.INVALID_EVENT,
                message=f"session.start: {problem}",
                event_id=start.event_id,
            )
        )


def client_tools_checked(
    start: SessionStart, user: SessionUser, registry: Registry, provider: str
) -> None:
    """No tool the client declared takes the name of a registry tool this user may use (the
    model could not tell them apart), and each schema is one ``provider`` can take."""
    visible = (spec.tool_id for spec in registry.visible_to(user.roles))
    problem = declarations_problem(start.client_tools, visible, provider)
    if problem is not None:
        raise StartRefused(
            ErrorEvent(
                code=ErrorCode.INVALID_EVENT,
                message=f"session.start: '{problem.at('client_tools')}' {problem.message}",
                event_id=start.event_id,
            )
        )
