"""One runner session on one run folder: the request loop and its stop rules.

Before each request an ``attempt`` record is fsynced; after it an ``outcome`` record. A stop
rule raises ``Stop`` with a reason that the session's ``stop`` record carries.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import needlepoint
from needlepoint.design.profiles import ENDPOINTS, body_profile
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import sha256_hex
from needlepoint.run.clock import SIM_EPOCH, RealClock, SimClock, iso_utc
from needlepoint.run.journal import Journal
from needlepoint.run.options import LIVE_MODES, Settings
from needlepoint.run.progress import Progress
from needlepoint.run.records import SessionRecord, interrupted_fields, received_fields
from needlepoint.run.scoring import PROTOCOL_FAILURE
from needlepoint.run.transport import Scrubber


class Stop(Exception):
    """A stop rule fired: the session ends with this reason."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason)
        self.reason, self.detail = reason, detail


class Session:
    """One invocation of the runner on one run folder: the loop and its stop rules."""

    def __init__(self, s: Settings, journal: Journal) -> None:
        self.s = s
        self.journal = journal
        self.state = journal.state
        self.scrub = Scrubber(s.api_key)
        if s.simulation:
            self.clock: Any = SimClock(max(self.state.last_time or SIM_EPOCH, SIM_EPOCH))
        else:
            self.clock = RealClock()
        self.last_done_mono: float | None = None
        self.failures_in_a_row = 0
        self.last = "-"
        plan = s.prepared.plan
        self.progress = Progress(
            s.progress, len(plan), len(self.state.attempts), "SIMULATION" if s.simulation else "run"
        )

    def append(self, type_: str, **fields: Any) -> dict[str, Any]:
        return self.journal.append(type_, **self.scrub(fields))

    def now(self) -> str:
        return iso_utc(self.clock.now())

    def since_done(self) -> float | None:
        """Seconds since the latest completion, to the microsecond (None before the first)."""
        if self.last_done_mono is not None:
            return round(self.clock.monotonic() - self.last_done_mono, 6)
        if self.state.last_done is not None:
            return round(self.clock.now() - self.state.last_done, 6)
        return None

    def transport(self) -> Any:
        from needlepoint.run.transport import Transport

        mock = None
        if self.s.simulation:
            from needlepoint.run.simulate import Simulator

            sim = Simulator(
                self.s.simulate,
                self.s.prepared,
                self.clock,
                timeout_s=self.s.timeout_s,
                deadline_s=self.s.deadline_s,
                params=self.s.sim_params,
            )
            mock = sim.transport()
        return Transport(
            self.s.base_url or "http://simulation.invalid/v1",
            api_key=self.s.api_key,
            timeout_s=self.s.timeout_s,
            deadline_s=self.s.deadline_s,
            clock=self.clock,
            mock=mock,
            user_agent=f"needlepoint/{needlepoint.__version__}",
            path=ENDPOINTS[body_profile(self.s.prepared.protocol)],
        )

    def check_budget(self) -> None:
        """Stop rules that apply before a request may be sent."""
        if self.state.attempt_count >= self.s.allow:
            raise Stop(
                "allowance_spent",
                f"{self.state.attempt_count} attempts recorded, --allow {self.s.allow}",
            )
        if self.s.cost_cap is not None:
            if self.state.unknown_cost:
                seq = self.state.unknown_cost[-1]
                raise Stop(
                    "cost_unknown",
                    f"the cost of seq {seq} is unknown ({self.state.why_unknown(seq)}), so the "
                    f"cap of {self.s.cost_cap:g} cannot be enforced",
                )
            if self.state.spent >= self.s.cost_cap:
                raise Stop("cost_cap", f"spent {self.state.spent:.6f} of {self.s.cost_cap:g}")

    def wait_gap(self, seq: int) -> float | None:
        gap = self.since_done()
        while gap is not None and gap < self.s.min_gap_s:
            # At least a microsecond: a gap finer than that (1.0000004) would round to a
            # wait of 0, and a simulated clock, which a sleep of 0 never moves, would loop.
            remaining = max(round(self.s.min_gap_s - gap, 6), 0.000001)
            self.progress.waiting(seq, self.last, remaining)
            live = self.progress.mode in LIVE_MODES and not self.clock.simulated
            step = 1.0 if live else remaining  # a live countdown ticks each second
            self.clock.sleep(min(step, remaining))
            gap = self.since_done()
        return gap

    def check_outcome(self, seq: int, status: str, http_status: int | None) -> None:
        """Stop rules that apply after an outcome."""
        if http_status in self.s.stop_statuses:
            raise Stop("stop_status", f"HTTP {http_status} at seq {seq}")
        self.failures_in_a_row = self.failures_in_a_row + 1 if status == PROTOCOL_FAILURE else 0
        if self.failures_in_a_row >= self.s.max_consecutive_failures:
            raise Stop(
                "consecutive_failures",
                f"{self.failures_in_a_row} protocol failures in a row, the last at seq {seq}",
            )

    def one(self, transport: Any, seq: int, expected_sha: str) -> None:
        self.check_budget()
        gap = self.wait_gap(seq)
        outgoing = transport.build(self.s.prepared.bodies[seq])
        if outgoing.sha256 != expected_sha:
            raise NeedlepointError(f"seq {seq}: body to send does not hash to plan.csv's value")
        self.progress.sending(seq, self.last)
        self.append("attempt", seq=seq, request_sha256=outgoing.sha256, time=self.now(), gap_s=gap)
        try:
            ex = transport.send(outgoing)
        except BaseException as exc:  # KeyboardInterrupt mid-request: it may have executed
            detail = f"{type(exc).__name__} while the request was in flight"
            self.append("outcome", **interrupted_fields(seq, self.now(), detail, False))
            raise
        # An echoing server: the key goes in every spelling, before anything is classified, so
        # the classification audit-run derives from the stored body is the one recorded.
        ex = dataclasses.replace(
            ex,
            body=self.scrub(ex.body),
            headers=self.scrub(ex.headers),
            error_detail=self.scrub(ex.error_detail),
        )
        # Whatever arrived is journalled before anything else can go wrong.
        record = self.append(
            "outcome",
            **received_fields(
                seq,
                self.now(),
                ex,
                answer=self.s.prepared.answer_key[seq],
                model=self.s.model,
                unknown=self.s.prepared.protocol.get("unknown", "UNKNOWN"),
                rates=(self.s.input_rate, self.s.output_rate),
                profile=body_profile(self.s.prepared.protocol),
            ),
        )
        c = record["classification"]
        self.last_done_mono = self.clock.monotonic()
        self.last = c["kind"] or c["status"]
        self.progress.done(seq, self.last, self.s.min_gap_s)
        self.check_outcome(seq, c["status"], ex.http_status)

    def run(self, run_json_sha256: str) -> tuple[str, str]:
        s = self.s
        dropped = self.journal.dropped_tail
        record = SessionRecord(
            session=len(self.state.sessions) + 1,
            time=self.now(),
            run_json_sha256=run_json_sha256,
            package_version=needlepoint.__version__,
            **s.limits(),
            dropped_tail_sha256=sha256_hex(dropped) if dropped else None,
            declaration_sha256=None if s.declaration is None else s.declaration.sha256,
        )
        self.append("session", **record.to_plain())
        for seq in self.state.dangling:
            detail = "attempt journalled, but the process ended before its outcome"
            self.append("outcome", **interrupted_fields(seq, self.now(), detail, True))
        reason, detail = "complete", "every planned seq has been attempted"
        transport = self.transport()
        try:
            for row in s.prepared.plan:
                if row.seq not in self.state.attempts:
                    self.one(transport, row.seq, row.request_sha256)
        except Stop as stop:
            reason, detail = stop.reason, stop.detail
        except KeyboardInterrupt:
            reason, detail = "interrupted", "KeyboardInterrupt"
            self.append("stop", time=self.now(), reason=reason, detail=detail)
            raise
        except BaseException as exc:
            reason, detail = "crashed", f"{type(exc).__name__}: {exc}"
            self.append("stop", time=self.now(), reason=reason, detail=detail)
            raise
        finally:
            transport.close()
            self.progress.close(reason)
        self.append("stop", time=self.now(), reason=reason, detail=detail)
        return reason, detail
