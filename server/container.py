"""The worker's services, wired once from its infrastructure: who builds what.

`server/context.py` opens and closes the infrastructure (engine, Redis pool, stores, caches, the quota
engine, background tasks); `build_services(state)` hands each service exactly the components it uses and
returns them as one frozen `Services`. `create_app` stores it on `app.ctx.services` after opening the
infrastructure; handlers reach their service with `services_of(request)` (`server/web/state.py`).
Services never import this module or `server/context.py` (tests/test_layers.py checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

from server.accounts.email import EmailService
from server.accounts.groups import GroupService
from server.accounts.invitations import InvitationService
from server.accounts.service import AccountService
from server.auth.cookies import SessionCookies
from server.auth.guard import Guard
from server.auth.identity import Identity
from server.auth.origin import SameSite
from server.auth.passkeys import PasskeyService
from server.auth.second_factor import TotpFactor
from server.auth.service import AuthService
from server.auth.two_factor import TwoFactorService
from server.auth.verify import VerificationService
from server.channels.balances import ChannelBalances
from server.channels.crud import ChannelCrud
from server.channels.destination import KeyDestinations
from server.channels.keyring import ChannelKeys
from server.channels.probe import ChannelProbes
from server.channels.tags import ChannelTags
from server.channels.tools import ChannelTools
from server.components.email_codes import EmailCodes, ResetTokens
from server.components.verification import SessionVerifier
from server.context import State
from server.destinations import DestinationPolicy
from server.keys.service import KeyService
from server.logs.data import UsageDataService
from server.logs.service import LogService
from server.mailer import SmtpMailer
from server.observability.service import ObservabilityService
from server.payments.checkout import Checkout
from server.payments.service import PaymentService
from server.pricing.service import PricingService
from server.redemptions.service import RedemptionService
from server.relay.pipeline import Relay
from server.system.service import SystemService
from server.topups.service import TopUpService
from server.upstream.admin import UpstreamAdmin
from server.upstream.providers import PROVIDERS


@dataclass(frozen=True, slots=True)
class Channels:
    """The channel services (server/channels/), each built with only the parts it uses; a channel route
    calls exactly one of them (`services_of(request).channels.tags.edit_tag(…)`)."""

    crud: ChannelCrud
    tags: ChannelTags
    keys: ChannelKeys
    probes: ChannelProbes
    balances: ChannelBalances
    tools: ChannelTools


@dataclass(frozen=True, slots=True)
class Services:
    """Everything the management routes and the request pipeline call, one instance per worker."""

    guard: Guard
    cookies: SessionCookies
    auth: AuthService
    passkeys: PasskeyService
    two_factor: TwoFactorService
    verification: VerificationService
    accounts: AccountService
    email: EmailService
    groups: GroupService
    invitations: InvitationService
    keys: KeyService
    channels: Channels
    logs: LogService
    usage_data: UsageDataService
    system: SystemService
    relay: Relay
    pricing: PricingService
    redemptions: RedemptionService
    topups: TopUpService
    payments: PaymentService
    observability: ObservabilityService


def build_channels(state: State, verifier: SessionVerifier) -> Channels:
    """The six channel services; the upstream calls made for an admin (tests, balances, model lists) go
    through one `UpstreamAdmin`, and a `base_url` is checked against one destination policy."""
    db, table, clock = state.db, state.channels, state.clock
    destinations = KeyDestinations(DestinationPolicy(state.config.upstream_allow_private))
    admin = UpstreamAdmin(state.upstream, PROVIDERS, timeout=state.config.admin_upstream_timeout)
    return Channels(
        crud=ChannelCrud(db=db, channels=table, box=state.box, destinations=destinations, clock=clock),
        tags=ChannelTags(db=db, channels=table, clock=clock),
        keys=ChannelKeys(db=db, channels=table, box=state.box, verifier=verifier, clock=clock),
        probes=ChannelProbes(db=db, channels=table, box=state.box, options=state.options,
                             destinations=destinations, backend=state.backend, admin=admin,
                             tasks=state.tasks, clock=clock),
        balances=ChannelBalances(db=db, channels=table, options=state.options, backend=state.backend,
                                 admin=admin, clock=clock),
        tools=ChannelTools(db=db, channels=table, backend=state.backend, clock=clock),
    )


def build_services(state: State) -> Services:
    """Wire every service to the worker's infrastructure (opened by `State.open`, closed by `State.close`)."""
    config = state.config
    cookies = SessionCookies(config.secure_cookies, state.options)
    identity = Identity(state.sessions, state.users, state.box, state.clock)
    guard = Guard(trusted_proxies=config.trusted_proxies, global_limit=config.global_rate_limit,
                  critical_limit=config.critical_rate_limit, backend=state.backend, versions=state.versions,
                  identity=identity, cookies=cookies, same_site=SameSite(config.public_url, state.options))
    codes = EmailCodes(state.kv, state.box, state.clock)
    factor = TotpFactor(db=state.db, backend=state.kv, box=state.box, clock=state.clock)
    verifier = SessionVerifier(state.clock)
    auth = AuthService(db=state.db, backend=state.kv, sessions=state.sessions, users=state.users,
                       passwords=state.passwords, box=state.box, options=state.options, clock=state.clock,
                       second_factor=factor, codes=codes)
    passkeys = PasskeyService(db=state.db, backend=state.kv, sessions=state.sessions,
                              options=state.options, verifier=verifier, second_factor=factor,
                              open_session=auth.open_session, clock=state.clock)
    two_factor = TwoFactorService(db=state.db, factor=factor, auth=auth, sessions=state.sessions,
                                  box=state.box, options=state.options, clock=state.clock)
    verification = VerificationService(factor=factor, passkeys=passkeys, sessions=state.sessions,
                                       clock=state.clock)
    accounts = AccountService(db=state.db, users=state.users, sessions=state.sessions,
                              passwords=state.passwords, quota=state.quota, options=state.options,
                              clock=state.clock)
    mailer = SmtpMailer(lambda: state.options.settings.smtp, lambda: state.options.settings.system_name)
    email = EmailService(db=state.db, backend=state.backend, codes=codes,
                         resets=ResetTokens(state.kv, state.clock), mailer=mailer, accounts=accounts,
                         users=state.users, options=state.options)
    groups = GroupService(options=state.options, channels=state.channels)
    invitations = InvitationService(db=state.db, credits=state.credits, options=state.options,
                                    clock=state.clock)
    keys = KeyService(db=state.db, keys=state.keys, quota=state.quota, box=state.box, options=state.options,
                      clock=state.clock)
    channels = build_channels(state, verifier)
    logs = LogService(db=state.log_db, backend=state.backend, keys=state.keys, users=state.users,
                      channel_name=state.channels.name, clock=state.clock)
    usage_data = UsageDataService(db=state.db, log_db=state.log_db, channel=state.channels.get,
                                  clock=state.clock)
    system = SystemService(db=state.db, options=state.options, passwords=state.passwords, clock=state.clock,
                           database_kind=config.database_kind, started_at=state.started_at)
    relay = Relay(keys=state.keys, users=state.users, options=state.options, channels=state.channels,
                  quota=state.quota, backend=state.backend, versions=state.versions, upstream=state.upstream,
                  clock=state.clock, tasks=state.tasks, stream_idle_timeout=config.stream_idle_timeout,
                  stream_keepalive=config.stream_keepalive,
                  error_logs=state.error_logs)
    redemptions = RedemptionService(db=state.db, credits=state.credits, clock=state.clock)
    pricing = PricingService(options=state.options, channels=state.channels)
    topups = TopUpService(db=state.db, credits=state.credits, options=state.options, clock=state.clock)
    payments = PaymentService(db=state.db, credits=state.credits, options=state.options,
                              checkout=Checkout(state.upstream), clock=state.clock)
    observability = ObservabilityService(
        db=state.db, backend=state.backend, sync=state.quota_sync, quota=state.quota,
        redis=not config.embedded, token=config.metrics_token, allow=config.metrics_allow,
        metrics_dir=config.metrics_dir, clock=state.clock, interval=config.ready_interval,
        timeout=config.ready_timeout, max_sync_lag=config.ready_max_sync_lag)
    return Services(guard=guard, cookies=cookies, auth=auth, two_factor=two_factor, verification=verification,
                    passkeys=passkeys, accounts=accounts, email=email, groups=groups, invitations=invitations,
                    keys=keys, channels=channels, logs=logs, usage_data=usage_data, system=system,
                    pricing=pricing, redemptions=redemptions, topups=topups, relay=relay, payments=payments,
                    observability=observability)
