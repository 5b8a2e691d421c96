"""`bench hosts --scale`'s arithmetic and its knobs: the ratios, the hop, the cache share and the cores-cap note
(the windows themselves need root and namespaces: `sudo openclaw-rl bench hosts --scale`, docs/deployment.md)."""

from __future__ import annotations

from bench.hosts_scale import ScaleLoad, Window, knobs_for, report


def windows(chat2_busy: float) -> list[Window]:
    return [
        Window("one-box", 1, 10.0, 20, "turns", [0.600] * 20),
        Window("hosts", 8, 10.0, 20, "turns", [0.608] * 20),
        Window("chat 1", 1, 40.0, 100, cache={"policy-1": [1000, 600]}, cpu_busy=0.3),
        Window("chat 2", 2, 40.0, 196, cache={"policy-1": [900, 800], "policy-2": [1100, 900]}, cpu_busy=chat2_busy),
        Window("env 1", 1, 40.0, 50, "steps", cpu_busy=0.3),
        Window("env 2", 2, 40.0, 95, "steps", errors={"episodes failed": 1}, cpu_busy=0.5),
    ]


def test_the_last_line_says_what_the_second_host_added_and_the_hop_cost():
    text = report(windows(0.5), ScaleLoad())
    assert text.splitlines()[-1] == (
        "hosts scale: chat 2.50 -> 4.90 turns/s (1.96x), env 1.25 -> 2.38 steps/s (1.90x), hop +8 ms p50, "
        "cache hits 60% -> 85%, errors 1"
    )
    assert "policy-2 82% of 1100" in text and "caps it" not in text


def test_a_window_on_busy_cores_is_said_to_be_capped_by_the_machine():
    text = report(windows(0.95), ScaleLoad())
    assert "chat 2: the cores were 95% busy: this machine, not the design, caps it" in text


def test_the_knobs_put_stand_ins_on_the_policy_hosts_and_keep_training_off():
    load = ScaleLoad(ms_per_token=30, max_running=3, step_command="sleep 2", envs_per_worker=5)
    knobs = knobs_for(load)
    assert knobs.train is False
    argv = knobs.policy_server
    assert argv[1:3] == ["-m", "bench.standin_engine"] and argv[argv.index("--max-running") + 1] == "3"
    assert argv[argv.index("--command") + 1] == "sleep 2" and argv[argv.index("--ms-per-token") + 1] == "30"
    assert knobs.extra_env["OPENCLAW_RL_ENVS__ENVS_PER_WORKER"] == "5"
    assert knobs.extra_env["OPENCLAW_RL_ROUTER__BALANCE_ABS_THRESHOLD"] == "3"
