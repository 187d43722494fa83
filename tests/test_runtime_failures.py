"""Failure behaviour of the runtime: a rank killed mid-allreduce is named by
every other rank within the timeout; a wrong join token is refused; a
corrupted or truncated message is detected naming the peer and the step;
bad input names its field."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from fabriclab.errors import InputError
from fabriclab.runtime import BootstrapError, Communicator, CorruptMessage, JoinRefused, RuntimeInputError
from fabriclab.runtime.launch import free_port, rank_env
from test_runtime_collectives import WORKER, run_world


def test_a_killed_rank_is_named_by_every_other_rank(tmp_path):
    # rank 2 kills itself at case 3, with 4 MB allreduces in flight on the others
    cases = [{"id": i, "op": "allreduce", "algo": "ring", "count": 1 << 20, "dtype": "float32", "repeat": 2,
              **({"kill_rank": 2} if i == 3 else {})} for i in range(6)]
    t0 = time.monotonic()
    codes, outs = run_world(4, cases, tmp_path, timeout=30, extra_env={"FABRICLAB_TIMEOUT_S": "3"})
    elapsed = time.monotonic() - t0
    assert codes[2] == -9
    for r in (0, 1, 3):
        assert codes[r] == 3, f"rank {r}: {outs[r]}"
        assert "PEERFAILURE peer=2 " in outs[r] and "rank 2 failed" in outs[r], f"rank {r}: {outs[r]}"
    assert elapsed < 20, elapsed  # start-up plus at most the 3 s timeout, not a hang


def test_a_frozen_rank_is_named_within_the_timeout(tmp_path):
    # rank 2 stops itself (SIGSTOP: every thread frozen, sockets open) at case 2;
    # the others hear nothing from it, not even heartbeats, for the 1 s timeout
    cases = [{"id": i, "op": "allreduce", "algo": "ring", "count": 1 << 18, "dtype": "float32",
              **({"stop_rank": 2} if i == 2 else {})} for i in range(4)]
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    port, procs = free_port(), []
    for r in range(4):
        env = rank_env(r, 4, port, "test-token")
        env["FABRICLAB_TIMEOUT_S"] = "1"
        procs.append(subprocess.Popen([sys.executable, WORKER, str(tmp_path / "cases.json"), str(tmp_path)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    t0 = time.monotonic()
    try:
        outs = {r: procs[r].communicate(timeout=30)[0] for r in (0, 1, 3)}
        elapsed = time.monotonic() - t0
    finally:
        for p in procs:
            p.kill()
            p.wait()
    for r in (0, 1, 3):
        assert procs[r].returncode == 3, f"rank {r}: {outs[r]}"
        assert "PEERFAILURE peer=2 " in outs[r], f"rank {r}: {outs[r]}"
    assert elapsed < 15, elapsed


def _process_state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_close_returns_within_the_linger_when_a_peer_is_frozen(tmp_path):
    # rank 1 (a worker) stops itself right after joining; rank 0 (here)
    # closes: its FIN is never answered, so the close gives up once rank 1
    # has been silent for timeout_s (plus one poll of at most 0.1 s)
    cases = [{"id": 0, "op": "allreduce", "algo": "ring", "count": 4, "dtype": "float32", "stop_rank": 1}]
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    port = free_port()
    worker = subprocess.Popen([sys.executable, WORKER, str(tmp_path / "cases.json"), str(tmp_path)],
                              env=rank_env(1, 2, port, "test-token"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        c = Communicator(0, 2, "127.0.0.1", port, "test-token", timeout_s=1, connect_timeout_s=20)
        deadline = time.monotonic() + 20
        while _process_state(worker.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _process_state(worker.pid) == "T", "rank 1 did not stop"
        took = []

        def close():
            t0 = time.monotonic()
            c.close()
            took.append(time.monotonic() - t0)

        t = threading.Thread(target=close, daemon=True)
        t.start()
        t.join(20)
        assert took, "close() hung with a frozen peer"
        assert took[0] < 1.1 + 0.9, took  # the linger bound, with slack for a loaded host
    finally:
        worker.kill()
        worker.wait()


def _pair(make0, make1):
    """Creates two communicators concurrently (bootstrap releases the GIL)."""
    out = {}

    def one(k, f):
        try:
            out[k] = f()
        except Exception as e:  # noqa: BLE001 - the test inspects it
            out[k] = e

    ts = [threading.Thread(target=one, args=(0, make0)), threading.Thread(target=one, args=(1, make1))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    return out[0], out[1]


def test_wrong_join_token_is_refused():
    port = free_port()
    c0, c1 = _pair(lambda: Communicator(0, 2, "127.0.0.1", port, "right", connect_timeout_s=2),
                   lambda: Communicator(1, 2, "127.0.0.1", port, "wrong", connect_timeout_s=2))
    assert isinstance(c1, JoinRefused) and "wrong join token" in str(c1), c1
    assert isinstance(c0, BootstrapError) and "timed out waiting for 1 more rank" in str(c0), c0


def _faulty_exchange(fault):
    port = free_port()
    c0, c1 = _pair(lambda: Communicator(0, 2, "127.0.0.1", port, "t", checksum=True, timeout_s=3),
                   lambda: Communicator(1, 2, "127.0.0.1", port, "t", checksum=True, timeout_s=3, _fault=fault))
    res = {}

    def go(k, c):
        try:
            c.allreduce(np.ones(1000, np.float32))
            res[k] = None
        except Exception as e:  # noqa: BLE001
            res[k] = e

    ts = [threading.Thread(target=go, args=(k, c)) for k, c in ((0, c0), (1, c1))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    c0.close()
    c1.close()
    return res


def test_corrupted_message_is_detected_naming_peer_and_step():
    res = _faulty_exchange(("corrupt", 0, 0))  # rank 1's first message to rank 0
    e = res[0]
    assert isinstance(e, CorruptMessage) and e.peer == 1, e
    assert "checksum mismatch" in str(e) and "recv step" in str(e), e


def test_truncated_message_is_detected():
    res = _faulty_exchange(("truncate", 0, 0))
    e = res[0]
    assert isinstance(e, CorruptMessage) and e.peer == 1, e
    assert "truncated message: got 1000 of 2000 payload bytes" in str(e), e


def test_bad_input_names_the_field():
    with pytest.raises(RuntimeInputError, match="^rank: "):
        Communicator(2, 2, "127.0.0.1", 1234, "t")
    with pytest.raises(InputError, match="^MASTER_PORT: must be an integer"):
        Communicator.from_env({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "x", "MASTER_PORT": "http"})
    with pytest.raises(InputError, match="^FABRICLAB_TOKEN: not set"):
        Communicator.from_env({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "x", "MASTER_PORT": "1"})
    with pytest.raises(InputError, match="^timeout_s: "):
        Communicator(0, 1, "127.0.0.1", 1, "t", timeout_s=-1)
    c = Communicator(0, 1, "127.0.0.1", 1, "t")
    with pytest.raises(InputError, match="^array: dtype uint8"):
        c.allreduce(np.zeros(4, np.uint8))
    with pytest.raises(InputError, match="^array: must be C-contiguous"):
        c.allreduce(np.zeros((4, 4), np.float32)[:, 1])
    with pytest.raises(InputError, match="^algo: tree supports allreduce only"):
        c.broadcast(np.zeros(4, np.float32), algo="tree")
    with pytest.raises(InputError, match="^root: "):
        c.broadcast(np.zeros(4, np.float32), root=1)
    x = np.arange(5, dtype=np.int32)
    assert (c.allreduce(x) == np.arange(5)).all()  # one rank: the sum of one input
    c.close()
