"""Chrome-trace JSON (Perfetto, chrome://tracing) of one core's timeline.

Tracks: the slowest block class's critical path on one core (thread timelines, copy engine, loops
with their first iteration expanded) and, on a "device" track, the launch latency and the blocks of
each launch (fluid and wave-quantisation parts in its arguments).
"""

from __future__ import annotations

__all__ = ["chrome_trace"]


def chrome_trace(results, machine, name: str) -> dict:
    events = []
    tracks: dict[str, int] = {}

    def tid(track):
        if track not in tracks:
            tracks[track] = len(tracks) + 1
        return tracks[track]

    t0 = 0.0
    for r in results:
        us = 1e6
        events.append({"name": "launch latency", "ph": "X", "pid": 1, "tid": tid("device"), "ts": t0 * us,
                       "dur": r.launch_s * us, "cat": "device"})
        events.append({"name": f"{r.blocks} blocks, {r.blocks_per_core}/core, {r.waves:.2f} waves", "ph": "X",
                       "pid": 1, "tid": tid("device"), "ts": (t0 + r.launch_s) * us,
                       "dur": (r.fluid_s + r.quantisation_s) * us, "cat": "device",
                       "args": {"fluid bound (s)": r.fluid_s, "wave quantisation (s)": r.quantisation_s}})
        for ev_name, track, s, e, args in r.trace_events:
            events.append({"name": ev_name, "ph": "X", "pid": 2, "tid": tid(track), "ts": (t0 + r.launch_s + s) * us,
                           "dur": (e - s) * us, "cat": track, "args": args})
        t0 += r.time_s
    meta = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": f"{name}: device"}},
            {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": f"{name}: one {machine.core.name} "
                                                                   "(slowest block class)"}}]
    for track, i in tracks.items():
        for pid in (1, 2):
            meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": i, "args": {"name": track}})
    return {"traceEvents": meta + events, "displayTimeUnit": "ns",
            "otherData": {"kernel": name, "hw": machine.hw.name, "profile": machine.profile.name}}
