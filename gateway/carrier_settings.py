"""Each phone carrier's own settings: its webhook's signing credential and its REST API's.

Read under the carrier's own variable names (``TWILIO_AUTH_TOKEN``, ``VONAGE_SIGNATURE_SECRET``,
…), as its console names them, and under the field names (tests, ``Settings(...)``). What every
carrier shares (the phone model, greeting, roles) is ``GATEWAY_PHONE_*`` in ``gateway.config``.
Where each is found in the carrier's console: docs/phone/.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

__all__ = ["CarrierSettings"]


def _named(variable: str) -> AliasChoices:
    return AliasChoices(variable, variable.lower())


class CarrierSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="GATEWAY_", extra="ignore", case_sensitive=False, populate_by_name=True
    )

    # Twilio: the auth token signs its webhooks; with the account sid, the gateway hangs a call
    # up through the REST API when the session ends itself (END_VOICE_SESSION).
    twilio_auth_token: SecretStr | None = Field(
        default=None, validation_alias=_named("TWILIO_AUTH_TOKEN")
    )
    twilio_account_sid: str | None = Field(
        default=None, validation_alias=_named("TWILIO_ACCOUNT_SID")
    )
    twilio_api_base: str = "https://api.twilio.com"

    # Vonage: the signature secret keys its signed webhooks (HS256 JWTs); the application id,
    # when set, refuses a webhook signed for another application of the account.
    vonage_signature_secret: SecretStr | None = Field(
        default=None, validation_alias=_named("VONAGE_SIGNATURE_SECRET")
    )
    vonage_application_id: str | None = Field(
        default=None, validation_alias=_named("VONAGE_APPLICATION_ID")
    )
    # The L16 rate Vonage streams at, both ways.
    vonage_rate: Literal[8000, 16000] = 16000

    # Plivo: the auth token signs its webhooks (X-Plivo-Signature-V3).
    plivo_auth_token: SecretStr | None = Field(
        default=None, validation_alias=_named("PLIVO_AUTH_TOKEN")
    )

    # Exotel signs nothing: its Voicebot applet's dynamic URL carries this shared secret (as
    # ?secret= or the basic-auth password). The rate its stream is asked for (sample-rate).
    exotel_answer_secret: SecretStr | None = Field(
        default=None, validation_alias=_named("EXOTEL_ANSWER_SECRET")
    )
    exotel_sample_rate: Literal[8000, 16000] = 8000

    # Telnyx: the account's public key (base64) checks its webhooks' Ed25519 signatures; the API
    # key answers and hangs up calls through Call Control; the codec of the stream both ways.
    telnyx_public_key: str | None = Field(
        default=None, validation_alias=_named("TELNYX_PUBLIC_KEY")
    )
    telnyx_api_key: SecretStr | None = Field(
        default=None, validation_alias=_named("TELNYX_API_KEY")
    )
    telnyx_api_base: str = "https://api.telnyx.com"
    telnyx_codec: Literal["PCMU", "PCMA"] = "PCMU"
    # The Call Control App that places outbound calls (its id is the dial's connection_id).
    telnyx_connection_id: str | None = Field(
        default=None, validation_alias=_named("TELNYX_CONNECTION_ID")
    )

    # Calls the gateway places (POST /v1/calls): the roles that may place them (admin may too),
    # and the number they come from when a request names none.
    calls_roles: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["calls"])
    calls_from: str | None = None

    @field_validator("calls_roles", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [r.strip() for r in value.split(",") if r.strip()]
        return value

    @field_validator("telnyx_public_key")
    @classmethod
    def _an_ed25519_public_key(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        try:
            raw = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("must be the base64 public key of the Telnyx portal") from None
        if len(raw) != 32:
            raise ValueError("must be a 32-byte Ed25519 public key, in base64")
        return value.strip()
