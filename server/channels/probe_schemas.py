"""Request and reply schemas of the routes that test channels, tell a run's progress and list an
upstream's models (server/channels/probe.py, `ChannelProbes`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from core.enums import ChannelRun
from server.channels.runs import FAILURES_KEPT, Failure, RunState
from server.channels.schemas import OneOf
from server.web.schema import Int64, QueryTextRule, Reply, Schema, Str, Trimmed


class TestQuery(Schema):
    model: Annotated[str, QueryTextRule(max_len=255, plain=True)] = Field(
        "", description="the model to test; by default the channel's test_model, else its first model")


class TestTime(Reply):
    """How long a channel's test took."""

    time: float = Field(description="seconds from sending the test request to its whole answer")

    @classmethod
    def of(cls, seconds: float) -> TestTime:
        return cls(time=seconds)


class TestReply(Schema):
    """The envelope with `time` next to `data` too (where new-api's clients read it)."""

    success: Literal[True]
    message: str
    time: float = Field(description="seconds the test took")
    data: TestTime


class FetchModelsBody(Schema):
    """Settings not saved yet."""

    type: Int64 = Field(description="the channel type (new-api numbers)", examples=[24])
    key: Str = Field(description="a key, or keys one per line (the first is used)", examples=["AIza-key"])
    base_url: Trimmed | None = Field(None, description="\"\" or absent: the type's default address")


class RunQuery(Schema):
    run: Annotated[str, OneOf(tuple(str(r) for r in ChannelRun))] = Field(
        description="test: testing every channel; balance: updating every balance", examples=["test"])


class RunFailure(Reply):
    channel_id: int
    name: str
    message: str = Field(description="what went wrong: the upstream's message, redacted")

    @classmethod
    def of(cls, failure: Failure) -> RunFailure:
        return cls(channel_id=failure.channel_id, name=failure.name, message=failure.message)


class RunProgress(Reply):
    run: str = Field(description="test or balance")
    running: bool = Field(description="false once the run has ended (or when none is known)")
    total: int = Field(description="channels in the run")
    done: int = Field(description="channels finished: passed, failed, or skipped (deleted or disabled "
                                  "meanwhile, or the run stopped)")
    passed: int = Field(description="tests passed / balances read and stored")
    failed: int
    started_at: int = Field(description="unix seconds; 0 when no run is known")
    finished_at: int = Field(description="unix seconds; 0 while running")
    failures: list[RunFailure] = Field(description=f"the first {FAILURES_KEPT} failures")

    @classmethod
    def of(cls, state: RunState) -> RunProgress:
        return cls(run=str(state.run), running=state.running, total=state.total, done=state.done,
                   passed=state.passed, failed=state.failed, started_at=state.started_at,
                   finished_at=state.finished_at, failures=[RunFailure.of(f) for f in state.failures])
