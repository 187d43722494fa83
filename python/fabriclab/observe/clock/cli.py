"""`fabriclab clock estimate` (clock offsets and drifts from probe records) and `fabriclab clock synth`
(seeded synthetic probe records). `register(app)` adds them to the main CLI; bad input is an
InputError (exit 2). Heavy modules are imported inside the commands, so `fabriclab --help` stays fast."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from ...errors import InputError


def _out_file(path: Path, option: str) -> None:
    if path.is_dir():
        raise InputError(f"{option}: {path} is a folder; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{option}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise InputError(f"{option}: the folder {parent} is not writable")


def _stamp_origin(probes: Path) -> int:
    """The clock reading that 0 stands for in a joined probes file's stamps (``fabriclab clock join``), else 0.
    clocks.parquet carries it (metadata ``fabriclab.clock.stamp_origin_ns``) so that ``fabriclab owd`` can put
    the hosts' own readings on its scale."""
    import json

    import pyarrow.parquet as pq

    meta = pq.read_schema(str(probes)).metadata or {}
    j = json.loads(meta.get(b"fabriclab.clock.join", b"{}"))
    return int(j.get("stamp_origin_ns", j.get("origin_ns", 0)))


def _beside(out: Path, suffix: str) -> Path:
    return out.with_name(out.name.removesuffix(".parquet") + suffix)


def register(app: typer.Typer) -> None:
    clock_app = typer.Typer(no_args_is_help=True, help="Clock sync from probe records (Huygens; docs/clockwork.md).")
    app.add_typer(clock_app, name="clock")

    @clock_app.command("estimate")
    def estimate_cmd(
        probes: Path = typer.Argument(..., metavar="PROBES", help="probes.parquet (schema: docs/clockwork.md)."),
        out: Path = typer.Option(..., "--out", help="clocks.parquet to write: every host's offset and drift per "
                                 "window and method."),
        window_s: float = typer.Option(2.0, "--window-s", help="Window length, seconds of the reference's clock."),
        method: str = typer.Option("huygens", "--method", help="huygens, huygens-no-ne, ntp, ptp or all."),
        reference: Optional[str] = typer.Option(None, "--reference", help="A host name, or 'mean' (the ensemble "
                                                "mean); default: the first host in sorted order."),
        pure_bound_ns: float = typer.Option(100.0, "--pure-bound-ns", help="A coded pair is pure when its receive "
                                            "spacing is within this of its send spacing."),
        drop_short_edges: bool = typer.Option(False, "--drop-short-edges", help="Huygens: leave out of a window an "
                                              "edge with fewer than two pure pairs each way (instead of refusing), "
                                              "while the edges kept connect every host."),
        robust: bool = typer.Option(False, "--robust", help="Huygens: the network effect by least absolute "
                                    "deviations then Tukey's biweight, so that a few wrong edges (queued probes) do not "
                                    "pull the others; names the hosts whose estimate fewer than two of their edges "
                                    "agree with."),
        loop_check: bool = typer.Option(False, "--loop-check", help="With --robust: a second start from the edges "
                                        "a closing triangle confirms, keeping the solution more edges agree with "
                                        "(mends a minority of tilted edges; fails where most edges fail it: "
                                        "docs/clockwork.md, 'The loop check')."),
        edges: Optional[Path] = typer.Option(None, "--edges", help="Where to write the per-edge estimates; default: "
                                             "beside --out as NAME.edges.parquet."),
        score: Optional[Path] = typer.Option(None, "--score", help="With true times in the probes: where to write "
                                             "the error score; default: beside --out as NAME.score.csv."),
    ) -> None:
        """Every host's clock offset (ns) and drift (ppm) against a reference, per window: Huygens' coded-probe
        filter, max-margin fit and network effect, and the baselines."""
        from . import estimate as est
        from . import probes as pr

        methods = list(est.METHODS) if method == "all" else [method]
        if methods[0] not in est.METHODS:
            raise InputError(f"--method: {method!r} is not a method; allowed: {', '.join(est.METHODS)} or all")
        edges = edges or _beside(out, ".edges.parquet")
        _out_file(out, "--out")
        _out_file(edges, "--edges")
        p = pr.read(probes)
        score_path = (score or _beside(out, ".score.csv")) if p.has_truth else None
        if score_path is not None:
            _out_file(score_path, "--score")
        r = est.estimate(p, methods, window_s=window_s, pure_bound_ns=pure_bound_ns, reference=reference,
                         drop_short_edges=drop_short_edges, robust=robust,
                         loop_check=loop_check)
        import pyarrow.parquet as pq

        origin = _stamp_origin(probes)
        clocks = r.clocks
        if origin:
            meta = dict(clocks.schema.metadata or {})
            meta[b"fabriclab.clock.stamp_origin_ns"] = str(origin).encode()
            clocks = clocks.replace_schema_metadata(meta)
        pq.write_table(clocks, str(out))
        pq.write_table(r.edges, str(edges))
        typer.echo(f"wrote {out} ({r.clocks.num_rows} rows: {len(p.hosts)} hosts, "
                   f"{r.clocks.num_rows // max(1, len(p.hosts) * len(methods))} windows, {', '.join(methods)}) "
                   f"and {edges}")
        unconfirmed = est.unconfirmed_hosts(r.clocks)
        if unconfirmed:
            typer.echo(f"robust network effect: {len(unconfirmed)} host(s) whose estimate fewer than two of their "
                       f"edges agree with (less reliable): {', '.join(unconfirmed[:10])}"
                       f"{', ...' if len(unconfirmed) > 10 else ''}")
        if r.score is not None:
            lines = ["method,samples,p50_abs_error_ns,p99_abs_error_ns,max_abs_error_ns"]
            lines += [f"{s['method']},{s['samples']},{s['p50_abs_error_ns']:.3f},{s['p99_abs_error_ns']:.3f},"
                      f"{s['max_abs_error_ns']:.3f}" for s in r.score]
            score_path.write_text("\n".join(lines) + "\n")
            typer.echo("error against true time (|offset error| over hosts and windows, ns):")
            typer.echo(f"  {'method':<14} {'samples':>8} {'p50':>12} {'p99':>12} {'max':>12}")
            for s in r.score:
                typer.echo(f"  {s['method']:<14} {s['samples']:>8} {s['p50_abs_error_ns']:>12.3f} "
                           f"{s['p99_abs_error_ns']:>12.3f} {s['max_abs_error_ns']:>12.3f}")
            typer.echo(f"wrote {score_path}")

    @clock_app.command("colocation")
    def colocation_cmd(
        clocks: Path = typer.Argument(..., metavar="CLOCKS", help="clocks.parquet (`fabriclab clock estimate`)."),
        out: Path = typer.Option(..., "--out", help="groups to write (Parquet): group, host, size, confidence."),
        probes: Optional[Path] = typer.Option(None, "--probes", help="probes.parquet: adds the sender-side delay "
                                              "correlation (default: clocks only)."),
        pairs: Optional[Path] = typer.Option(None, "--pairs", help="Where to write every pair's statistics; "
                                             "default: beside --out as NAME.pairs.parquet."),
        method: str = typer.Option("huygens", "--method", help="The estimator's method to read."),
        hosts: Optional[str] = typer.Option(None, "--hosts", help="Comma-separated hosts to group (default: "
                                            "every host of CLOCKS)."),
        alpha: float = typer.Option(1e-4, "--alpha", help="Significance of the test 'one oscillator'."),
        offset_floor_ns: float = typer.Option(3.0, "--offset-floor-ns", help="Least noise of an offset "
                                              "difference."),
        drift_floor_ppm: float = typer.Option(0.05, "--drift-floor-ppm", help="Least uncertainty of a drift."),
    ) -> None:
        """VMs sharing a physical machine: equal drift and a constant offset difference across windows (one
        oscillator), helped by correlated sender-side delays (docs/clockwork.md)."""
        from . import colocation as co
        from . import probes as pr

        pairs = pairs or _beside(out, ".pairs.parquet")
        _out_file(out, "--out")
        _out_file(pairs, "--pairs")
        t = co.read_clocks(clocks)
        p = pr.read(probes) if probes is not None else None
        names = [h.strip() for h in hosts.split(",") if h.strip()] if hosts else None
        r = co.detect(t, p, method=method, alpha=alpha, offset_floor_ns=offset_floor_ns,
                      drift_floor_ppm=drift_floor_ppm, hosts=names)
        import pyarrow.parquet as pq

        pq.write_table(r.groups, str(out))
        pq.write_table(r.pairs, str(pairs))
        g = r.groups.to_pydict()
        for k, members in enumerate(r.group_sets()):
            conf = next(c for gg, c in zip(g["group"], g["confidence"]) if gg == k)
            typer.echo(f"  group {k}: {', '.join(sorted(members))} (confidence {conf:.3f})")
        typer.echo(f"wrote {out} ({len(r.group_sets())} groups of {r.groups.num_rows} hosts) and {pairs}")

    @clock_app.command("synth")
    def synth_cmd(
        out: Path = typer.Option(..., "--out", help="probes.parquet to write."),
        hosts: int = typer.Option(16, "--hosts", help="Number of hosts."),
        peers: int = typer.Option(5, "--peers", help="K: peers each host probes (at most hosts - 1)."),
        duration_s: float = typer.Option(10.0, "--duration-s", help="Seconds of probes."),
        rate_hz: float = typer.Option(50.0, "--rate-hz", help="Coded pairs per second to each peer."),
        spacing_ns: int = typer.Option(10_000, "--spacing-ns", help="Spacing of a coded pair's two probes."),
        stamps: str = typer.Option("nic", "--stamps", help="Timestamp noise: none, nic (tens of ns) or software "
                                   "(µs, heavy tail)."),
        stamp_noise_ns: float = typer.Option(20.0, "--stamp-noise-ns", help="nic: the noise's standard deviation; "
                                             "software: the median of its log-normal (335 fits this lab's veths)."),
        drift_spread_ppm: float = typer.Option(30.0, "--drift-spread-ppm", help="Drifts are drawn within ± this "
                                               "(at most 1000)."),
        drift_walk_ppm: float = typer.Option(0.0, "--drift-walk-ppm", help="Random walk of the drift, ppm per "
                                             "square root of a second."),
        offset_spread_ns: float = typer.Option(100_000.0, "--offset-spread-ns",
                                               help="Offsets are drawn within ± this."),
        queue_prob: float = typer.Option(0.2, "--queue-prob", help="Chance that a probe queues."),
        seed: int = typer.Option(0, "--seed", help="Random seed."),
        truth: bool = typer.Option(True, "--truth/--no-truth", help="Write the true times (true_tx_ps, true_rx_ps)."),
    ) -> None:
        """Seeded synthetic probe records from known clocks (no fabric: a delay per pair of hosts, queueing and
        timestamp noise), for trying the estimator."""
        from . import probes as pr
        from . import synthetic

        _out_file(out, "--out")
        t, _ = synthetic.generate(hosts=hosts, peers=peers, duration_s=duration_s, rate_hz=rate_hz,
                                  spacing_ns=spacing_ns, seed=seed, offset_spread_ns=offset_spread_ns,
                                  drift_spread_ppm=drift_spread_ppm, drift_walk_ppm=drift_walk_ppm,
                                  queue_prob=queue_prob, stamps=stamps, stamp_noise_ns=stamp_noise_ns)
        if not truth:
            t = t.drop_columns(["true_tx_ps", "true_rx_ps"])
        pr.write(t, out)
        typer.echo(f"wrote {out} ({t.num_rows} probes, {hosts} hosts x {peers} peers, {duration_s:g} s)")

    @clock_app.command("agent")
    def agent_cmd(
        name: str = typer.Option(..., "--name", help="This host's name, as its peers name it."),
        listen: str = typer.Option(..., "--listen", help="ADDR:PORT to bind (UDP, IPv4)."),
        peers: str = typer.Option("", "--peers", help="NAME=ADDR:PORT,... : the peers this agent probes. Every probe "
                                  "received is echoed whatever this list says."),
        duration_s: float = typer.Option(..., "--duration-s", help="Seconds of probing."),
        rate_hz: float = typer.Option(100.0, "--rate-hz", help="Coded pairs per second to each peer."),
        spacing_ns: int = typer.Option(20_000, "--spacing-ns", help="Spacing of a coded pair's two probes, ns "
                                       "on this host's clock."),
        out: Path = typer.Option(..., "--out", help="This agent's half of the records (Parquet): what it sent and "
                                 "received; `fabriclab clock join` makes probes.parquet of all the halves."),
        offset_ns: int = typer.Option(0, "--offset-ns", help="Emulated clock: offset added to every stamp."),
        drift_ppm: float = typer.Option(0.0, "--drift-ppm", help="Emulated clock: drift, ppm (within ±1000)."),
        epoch_ns: Optional[int] = typer.Option(None, "--epoch-ns", help="Emulated clock: the CLOCK_REALTIME instant "
                                               "where the drift term is zero; default: the agent's start."),
        start_ns: Optional[int] = typer.Option(None, "--start-ns", help="CLOCK_REALTIME instant to start probing "
                                               "(default: now); it listens and echoes from the start."),
        linger_s: float = typer.Option(0.5, "--linger-s", help="Seconds to keep echoing after the last probe."),
        stamps: str = typer.Option("kernel", "--stamps", help="kernel (SO_TIMESTAMPING software stamps) or user "
                                   "(user-space clock_gettime)."),
        host_clock: str = typer.Option("realtime", "--clock", help="realtime: stamps on CLOCK_REALTIME (the kernel's); "
                                       "monotonic: on this host's CLOCK_MONOTONIC (each CLOCK_REALTIME stamp moved by "
                                       "CLOCK_REALTIME - CLOCK_MONOTONIC as read here: a time namespace's offset shows)."),
        flush_s: Optional[float] = typer.Option(None, "--flush-s", help="Also write --out with the records so far "
                                                "every this many seconds while probing (for `rocket-table "
                                                "--from-halves --watch-s`; 0.1..3600): only new records are "
                                                "converted in the probe loop, a helper thread writes the file."),
    ) -> None:
        """A real clock agent: coded UDP probe pairs to its peers, echoes, kernel timestamps, an emulated clock
        (docs/clockwork.md, "The real agent")."""
        import time

        from . import agent as ag

        ag.check_options(name, duration_s, rate_hz, spacing_ns, drift_ppm, offset_ns, epoch_ns)
        addr = ag.parse_addr(listen, "--listen")
        peer_list = ag.parse_peers(peers, name)
        if stamps not in ("kernel", "user"):
            raise InputError(f"--stamps: {stamps!r} is not kernel or user")
        if host_clock not in ("realtime", "monotonic"):
            raise InputError(f"--clock: {host_clock!r} is not realtime or monotonic")
        if not 0 <= linger_s <= 60:
            raise InputError(f"--linger-s: must be within 0..60, got {linger_s}")
        if flush_s is not None and not 0.1 <= flush_s <= 3600:
            raise InputError(f"--flush-s: must be within 0.1..3600 seconds, got {flush_s}")
        _out_file(out, "--out")
        clock = ag.EmulatedClock(offset_ns, drift_ppm, time.time_ns() if epoch_ns is None else epoch_ns)
        a = ag.Agent(name, addr, peer_list, duration_s, rate_hz, spacing_ns, clock, start_ns=start_ns,
                     linger_s=linger_s, stamps=stamps, host_clock=host_clock, flush_every_s=flush_s, flush_to=out)
        import signal

        def _stop(_sig, _frame):
            raise KeyboardInterrupt

        old = signal.signal(signal.SIGTERM, _stop)
        try:
            counts = a.run()
        finally:
            signal.signal(signal.SIGTERM, old)
        ag.write_half(a, out)
        typer.echo(f"wrote {out}: {len(a.tx)} sent and {len(a.rx)} received probes ({a.mode} stamps); "
                   + ", ".join(f"{k} {v}" for k, v in counts.items()))

    @clock_app.command("join")
    def join_cmd(
        halves: list[Path] = typer.Argument(..., metavar="HALVES...", help="The agents' --out files."),
        out: Path = typer.Option(..., "--out", help="probes.parquet to write."),
    ) -> None:
        """Joins the agents' halves into probes.parquet: each probe's send stamp from its sender, its receive
        stamp from its receiver; pairs not whole on both sides are dropped (and counted)."""
        from . import agent as ag
        from . import probes as pr

        _out_file(out, "--out")
        j = ag.join(halves)
        if j.probes == 0:
            raise InputError("HALVES: no probe is in both a sender's and a receiver's half; are these the halves of "
                             "agents that probed one another?")
        pr.write(j.table, out)
        typer.echo(f"wrote {out}: {j.probes} probes ({j.probes // 2} pairs); {j.dropped_pairs} pairs dropped "
                   "(a probe lost or unstamped)")

    @clock_app.command("mesh")
    def mesh_cmd(
        cluster: str = typer.Option("box", "--cluster", help="A cluster-in-a-box made by `fabriclab cluster up`."),
        out: Path = typer.Option(..., "--out", help="probes.parquet to write (and NAME.emulated.csv beside it: "
                                 "every host's emulated offset and drift)."),
        duration_s: float = typer.Option(3.0, "--duration-s", help="Seconds of probing."),
        peers: Optional[int] = typer.Option(None, "--peers", help="K, peers per host (default 5, or all if fewer)."),
        rate_hz: float = typer.Option(100.0, "--rate-hz", help="Coded pairs per second to each peer."),
        spacing_ns: int = typer.Option(20_000, "--spacing-ns", help="Spacing of a coded pair's probes, ns."),
        offset_spread_ns: Optional[float] = typer.Option(None, "--offset-spread-ns", help="Emulated offsets are "
                                                         "drawn within ± this (default 100000 with --clock realtime, "
                                                         "0 with monotonic)."),
        drift_spread_ppm: Optional[float] = typer.Option(None, "--drift-spread-ppm", help="Emulated drifts are drawn "
                                                         "within ± this, at most 1000 (default 30 with --clock "
                                                         "realtime, 0 with monotonic)."),
        seed: int = typer.Option(0, "--seed", help="Random seed (peers, offsets, drifts)."),
        stamps: str = typer.Option("kernel", "--stamps", help="kernel or user."),
        host_clock: str = typer.Option("auto", "--clock", help="realtime (CLOCK_REALTIME with emulated clocks), "
                                       "monotonic (each host's CLOCK_MONOTONIC in its time namespace), or auto: "
                                       "monotonic when the box has time namespaces (cluster up --timens)."),
    ) -> None:
        """One clock agent in every host of a cluster-in-a-box, K peers each, seeded emulated clocks; the halves
        joined into one probes.parquet. Needs root."""
        from . import agent as ag

        if stamps not in ("kernel", "user"):
            raise InputError(f"--stamps: {stamps!r} is not kernel or user")
        _out_file(out, "--out")
        j = ag.mesh(cluster, out, duration_s=duration_s, peers=peers, rate_hz=rate_hz, spacing_ns=spacing_ns,
                    offset_spread_ns=offset_spread_ns, drift_spread_ppm=drift_spread_ppm, seed=seed, stamps=stamps,
                    host_clock=host_clock)
        noise = ag.stamp_noise(j.table)
        typer.echo(f"wrote {out}: {j.probes} probes from {len(j.hosts)} hosts; {j.dropped_pairs} pairs dropped; "
                   f"rx - tx above the delay floor: p50 {noise['p50_ns']:.0f} ns, p99 {noise['p99_ns']:.0f} ns")

    @clock_app.command("rocket-table")
    def rocket_table_cmd(
        out: Path = typer.Option(..., "--out", help="The correction table to write (JSON), for `fabriclab runtime "
                                 "bench --packet-rocket-correction` and Communicator(packet_rocket_correction=...)."),
        n: Optional[int] = typer.Option(None, "-n", "--nproc", help="A probe phase over loopback: this many ranks, "
                                        "one agent each on 127.0.0.1."),
        box: Optional[str] = typer.Option(None, "--box", help="The agents' mesh in this cluster-in-a-box (root): "
                                          "one agent per host, host i = rank i; its probes are kept beside --out."),
        from_probes: Optional[Path] = typer.Option(None, "--from-probes", help="A probe file (`fabriclab clock "
                                                   "mesh`'s or join's): the table from its estimate; with --ranks."),
        from_halves: Optional[Path] = typer.Option(None, "--from-halves", help="A folder of agents' half files "
                                                   "(*.half.parquet; agents with --flush-s rewrite theirs while they "
                                                   "probe): the table from their join; with --ranks."),
        watch_s: Optional[float] = typer.Option(None, "--watch-s", help="With --from-halves: refit every this many "
                                                "seconds, replacing --out whole each time (a live refit; ranks "
                                                "re-read it with --packet-rocket-correction-reload-ms)."),
        watch_for_s: float = typer.Option(3600.0, "--watch-for-s", help="With --watch-s: stop after this many "
                                          "seconds (or at Ctrl-C); exit 1 if no table was written by then."),
        span_s: float = typer.Option(60.0, "--span-s", help="With --watch-s: fit only the last this many seconds "
                                     "of the halves (10..86400), the extending piece's slope from all of them; "
                                     "each refit's cost stays flat as the job runs."),
        ranks: Optional[str] = typer.Option(None, "--ranks", help="With --from-probes or --from-halves: the host of "
                                            "each rank, rank 0's first (the reference), comma-separated."),
        stamp_origin_ns: Optional[int] = typer.Option(None, "--stamp-origin-ns", help="With --from-probes, for a file "
                                                      "without join metadata: the CLOCK_REALTIME ns its stamps' 0 "
                                                      "stands for."),
        offsets: Optional[str] = typer.Option(None, "--clock-offsets-ns", help="-n, --box: each rank's emulated "
                                              "offset, ns, comma-separated (the bench's option of that name)."),
        drifts: Optional[str] = typer.Option(None, "--clock-drifts-ppm", help="-n, --box: each rank's emulated "
                                             "drift, ppm, comma-separated."),
        epoch_ns: Optional[int] = typer.Option(None, "--clock-epoch-ns", help="-n, --box: the emulated clocks' epoch "
                                               "(CLOCK_REALTIME ns; needed with -n, default now with --box). The "
                                               "table records it and the runtime takes it from there."),
        duration_s: float = typer.Option(2.0, "--duration-s", help="Seconds of probing."),
        rate_hz: float = typer.Option(100.0, "--rate-hz", help="Coded pairs per second to each peer."),
    ) -> None:
        """The runtime's Packet Rocket on estimated clocks: the correction table every rank applies, from a probe
        phase over loopback (-n), from the agents' mesh in a cluster-in-a-box (--box), or from a probe file
        (--from-probes) or from agents' flushed halves (--from-halves, refitted every --watch-s while they probe),
        by fabriclab's estimator (docs/clockwork-control.md, "Packet Rocket in the runtime")."""
        import time

        from . import rocket_table as rt

        def nums(text, option, kind):
            try:
                return [kind(v) for v in text.split(",")]
            except ValueError:
                raise InputError(f"{option}: must be comma-separated numbers, one per rank, got {text!r}") from None

        if sum(x is not None for x in (n, box, from_probes, from_halves)) != 1:
            raise InputError("-n: give exactly one source of probes: -n N (a probe phase over loopback), --box "
                             "CLUSTER (the box's agents), --from-probes FILE or --from-halves FOLDER")
        if watch_s is not None and from_halves is None:
            raise InputError("--watch-s: only with --from-halves (agents still probing, with --flush-s)")
        if watch_s is None and (watch_for_s != 3600.0 or span_s != rt.LIVE_SPAN_S):
            raise InputError("--watch-for-s: only with --watch-s" if watch_for_s != 3600.0
                             else "--span-s: only with --watch-s")
        _out_file(out, "--out")
        if from_probes is not None or from_halves is not None:
            src = "--from-probes" if from_probes is not None else "--from-halves"
            for value, option in ((offsets, "--clock-offsets-ns"), (drifts, "--clock-drifts-ppm"),
                                  (epoch_ns, "--clock-epoch-ns")):
                if value is not None:
                    raise InputError(f"{option}: with {src} the clocks are the probes' own; leave it out")
            if ranks is None:
                raise InputError(f"--ranks: {src} needs the host of each rank, rank 0's first")
            if from_probes is not None and not from_probes.is_file():
                raise InputError(f"--from-probes: no such file: {from_probes}")
            names = [h.strip() for h in ranks.split(",")]
            if from_halves is not None and stamp_origin_ns is not None:
                raise InputError("--stamp-origin-ns: only with --from-probes (halves say their own)")
            if watch_s is not None:
                k = rt.watch(from_halves, names, out, watch_s, watch_for_s, span_s=span_s)
                typer.echo(f"wrote {out} {k} times")
                if k == 0:
                    typer.echo(f"error: --from-halves: no table written in {watch_for_s:g} s (the refits above "
                               "say why)", err=True)
                    raise typer.Exit(1)
                return
            info = (rt.probes_table(from_probes, names, out, stamp_origin_ns) if from_probes is not None
                    else rt.halves_table(from_halves, names, out))
        else:
            for value, option, only in ((ranks, "--ranks", "--from-probes or --from-halves"),
                                        (stamp_origin_ns, "--stamp-origin-ns", "--from-probes")):
                if value is not None:
                    raise InputError(f"{option}: only with {only}")
            for value, option in ((offsets, "--clock-offsets-ns"), (drifts, "--clock-drifts-ppm")):
                if value is None:
                    raise InputError(f"{option}: -n and --box need each rank's emulated clock")
            off = nums(offsets, "--clock-offsets-ns", int)
            dr = nums(drifts, "--clock-drifts-ppm", float)
            epoch = time.time_ns() if epoch_ns is None else epoch_ns
            if box is not None:
                info = rt.box_table(box, off, dr, epoch, out, duration_s=duration_s, rate_hz=rate_hz)
            else:
                if epoch_ns is None:
                    raise InputError("--clock-epoch-ns: -n needs the emulated clocks' epoch (give the bench the same)")
                info = rt.loopback_table(n, off, dr, epoch, out, duration_s=duration_s, rate_hz=rate_hz)
        typer.echo(f"wrote {out}: {info['pieces']} pieces from {info['probes']} probes "
                   f"({info.get('dropped_pairs', 0)} pairs dropped, {info['windows']} window(s)), {info['ranks']} ranks")
        if "offset_error_ns_at_end" in info:
            errs = ", ".join(f"{v} ns" for v in info["offset_error_ns_at_end"][1:])
            typer.echo(f"residual against rank 0 at the probing's end: {errs}; drift error at most "
                       f"{info['drift_error_ppm_max']:.3f} ppm")
        clocks = info.get("clocks") or {}
        if len(clocks) == info["ranks"] and all("offset_ns" in c for c in clocks.values()):
            typer.echo("the ranks' emulated clocks (give the bench the same): --clock-offsets-ns "
                       + ",".join(str(c["offset_ns"]) for c in clocks.values()) + " --clock-drifts-ppm "
                       + ",".join(repr(c["drift_ppm"]) for c in clocks.values())
                       + f" (epoch {info['clock_epoch_ns']}, in the table)")

    @clock_app.command("overhead")
    def overhead_cmd(
        run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="A simulated run's folder, with [probes]."),
        out: Optional[Path] = typer.Option(None, "--out", help="Folder for probe_links.csv (default RUN_DIR)."),
    ) -> None:
        """What the simulated probe mesh costs each link: probe bytes (data frames on their routes, acks on the
        reversed routes) per second and as a share of the link's rate, to probe_links.csv."""
        from . import overhead as ov

        o = ov.run(run_dir, out)
        t = o.links
        top = t.sort_values("share", ascending=False, kind="stable").iloc[0]
        typer.echo(f"{o.probes} probes over {o.seconds:g} s; busiest link {top['src_node']} -> {top['dst_node']}: "
                   f"{top['bytes_per_s'] / 1e6:.3f} MB/s, {100 * top['share']:.4f} % of its rate; mean over links "
                   f"{100 * t['share'].mean():.4f} %")
        typer.echo(f"wrote {(run_dir if out is None else out) / 'probe_links.csv'}")
