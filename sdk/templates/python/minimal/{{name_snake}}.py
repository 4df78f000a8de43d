"""{{name}} — a forewarn plugin written in Python.

forewarn calls on_event() for every change in the life of each Azure Scheduled Event this
plugin subscribes to (see {{name}}.toml), and on_start() once when it loads the plugin.
Build: ./build.sh   Test: ./test.sh   SDK reference: {{sdk_docs}}
"""

from forewarn import Context, Event, Phase, StartContext, approve, config, log

# The config key this plugin reads from [config] in {{name}}.toml, and its default.
GREETING_KEY = "greeting"
GREETING_DEFAULT = "hello from {{name}}"


def on_start(ctx: StartContext) -> None:
    """Once per daemon run, before any on_event: restore what an earlier VM saved elsewhere
    when ctx.first_run is True (e.g. a Spot VM re-created after an eviction). Keep it short."""
    log.info(f"{{name}} loaded on {ctx.vm_name} (first run: {ctx.first_run})")


def on_event(event: Event, phase: Phase, ctx: Context):
    """Answer approve() when this VM is ready for the maintenance, or defer(reason,
    retry_after_ms) to be asked again. Only the answer to PREPARE counts."""
    if not ctx.affects_this_vm:
        # The event is for another VM of the same availability set or scale set.
        return approve()

    if phase == Phase.PREPARE:
        # The event was scheduled (or rescheduled): prepare the workload, then approve.
        # Not finished yet? `return defer("waiting for ...", 5_000)` (from forewarn import defer)
        # and forewarn asks again in 5 s.
        greeting = config(GREETING_KEY, GREETING_DEFAULT)
        log.info(f"{greeting}: {event.event_type_raw} {event.id} is scheduled; approving")
        return approve()
    if phase == Phase.STARTED:
        # The maintenance is under way. Informational: the answer is not used.
        log.info(f"{event.event_type_raw} {event.id} started")
    elif phase == Phase.ENDED_AFTER_START:
        # The maintenance is over: recover (rejoin the pool, restart what you stopped).
        log.info(f"{event.event_type_raw} {event.id} is over")
    elif phase == Phase.ENDED_WITHOUT_START:
        # Azure canceled the event: undo what PREPARE did.
        log.info(f"{event.event_type_raw} {event.id} was canceled")
    return approve()

