"""The Python API's entry point for running a scenario."""

from __future__ import annotations


def simulate(scenario, progress: bool = False, memory_limit: int | str | None = None):
    """Runs a scenario to the end (all flows finished, or ``stop_ps``) and
    returns its :class:`~fabriclab.sim.results.Results`. ``memory_limit``:
    bytes, a size string, 'off', or None for FABRICLAB_MEMORY_LIMIT or else
    the memory available; a scenario estimated to need more is refused
    (:class:`fabriclab.sim.limits.MemoryLimitError`). A scenario with a
    ``[recovery]`` section runs as ``fabriclab run`` runs it: segment by
    segment, with detection, isolation and restarts, returning
    :class:`fabriclab.systems.c4.recovery.RecoveryResults`
    (docs/c4-recovery.md). Bad input raises :class:`fabriclab.InputError`
    (a :class:`fabriclab.ScenarioError` names the field). Packet Rocket on
    estimated clocks (the default with ``[clocks]``) first runs the probe
    mesh alone to estimate them (``fabriclab.observe.clock.calibrate``;
    with ``[recovery]``, before each segment), and again when the table it
    carries was made for another scenario (``packet_rocket_correction_for``)."""
    if scenario.recovery is not None:
        from .systems.c4.recovery import simulate as simulate_recovery

        return simulate_recovery(scenario, memory_limit=memory_limit)
    from .observe.clock.calibrate import calibrated
    from .sim.pipeline import simulate as simulate_plain

    # Packet Rocket on estimated clocks: the calibration pass first (docs/clockwork-control.md, "Estimated clocks").
    scenario, calibration = calibrated(scenario)
    res = simulate_plain(scenario, progress, memory_limit)
    if calibration is not None:
        res.summary["packet_rocket"]["calibration"] = calibration
    return res
