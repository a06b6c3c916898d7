"""Plain-loop reference versions of the estimators (docs/design.md#advantages), written for clarity, not speed."""

from __future__ import annotations

import math
import statistics

from learner.advantages.batch import GENERATED_CODES, REASONING, SUMMARY, TOOL_CALL


def norm(values, present, eps):
    idx = [i for i, p in enumerate(present) if p]
    if len(idx) < 2:
        return [0.0] * len(values)
    vals = [values[i] for i in idx]
    mean = math.fsum(vals) / len(vals)
    scale = max(abs(v - mean) for v in vals)
    if scale == 0:
        return [0.0] * len(values)
    std = statistics.stdev([(v - mean) / scale for v in vals]) * scale
    if std <= 1e-12 * max(1.0, max(abs(v) for v in vals)):
        return [0.0] * len(values)
    return [(values[i] - mean) / (std + eps) if present[i] else 0.0 for i in range(len(values))]


def route(kinds, mode):
    kinds = list(kinds)
    anchors = [t for t, k in enumerate(kinds) if k in (TOOL_CALL, SUMMARY)]
    if mode == "none" or not anchors:
        return kinds
    out = []
    for t, k in enumerate(kinds):
        if k != REASONING:
            out.append(k)
            continue
        after = [a for a in anchors if a >= t]
        before = [a for a in anchors if a < t]
        if mode == "next":
            out.append(kinds[after[0]] if after else kinds[before[-1]])
        else:
            out.append(kinds[before[-1]] if before else kinds[after[0]])
    return out


def pref_values(batch, cfg):
    return [r.pref for r in batch.rewards]  # the scorer's, omission guard included


def with_success(scored, batch, cfg):
    """The exec-channel reward: the scored one plus success_weight · success (0 where a reward lacks it)."""
    return [v + cfg.success_weight * r.components.get("success", 0.0) for v, r in zip(scored, batch.rewards)]


def has(m, code):
    return code in m.kinds.tolist()


def any_gen(m):
    return any(k in GENERATED_CODES for k in m.kinds.tolist())


def ref_grpo(batch, cfg):
    pref = pref_values(batch, cfg)
    exec_ = with_success([r.exec for r in batch.rewards], batch, cfg)
    R = [cfg.w_exec * e + cfg.w_pref * p for e, p in zip(exec_, pref)]
    a = norm(R, [any_gen(m) for m in batch.members], cfg.eps)
    return [[a[i] if k in GENERATED_CODES else 0.0 for k in m.kinds.tolist()] for i, m in enumerate(batch.members)]


def decision_positions(batch, cfg):
    """{member: index of the token that carries its decision not to call} (decision_token on a no-tool task)."""
    if not (cfg.decision_token and batch.tool_needed is False):
        return {}
    out = {}
    for i, m in enumerate(batch.members):
        kinds = m.kinds.tolist()
        gen = [t for t, k in enumerate(kinds) if k in GENERATED_CODES]
        if TOOL_CALL not in kinds and gen:
            out[i] = gen[0]
    return out


def ref_slca(batch, cfg):
    pref = pref_values(batch, cfg)
    decide = decision_positions(batch, cfg)
    in_exec = [has(m, TOOL_CALL) or (bool(decide) and any_gen(m)) for m in batch.members]
    ae = norm(with_success([r.exec for r in batch.rewards], batch, cfg), in_exec, cfg.eps)
    ap = norm(pref, [has(m, SUMMARY) for m in batch.members], cfg.eps)
    turn_adv = {}
    if cfg.turn_level:
        turns = sorted({c.turn for r in batch.rewards for c in r.per_call})
        for t in turns:
            scores, present = [], []
            for r in batch.rewards:
                vals = [c.score for c in r.per_call if c.turn == t]
                scores.append(sum(vals) / len(vals) if vals else 0.0)
                present.append(bool(vals))
            n = norm(scores, present, cfg.eps)
            for i in range(batch.size):
                if present[i]:
                    turn_adv[(i, t)] = n[i]
    out = []
    for i, m in enumerate(batch.members):
        row = []
        for pos, (k, t) in enumerate(zip(route(m.kinds.tolist(), cfg.reasoning_route), m.turns.tolist())):
            if decide.get(i) == pos:
                row.append(cfg.w_exec * ae[i])
            elif k == TOOL_CALL:
                row.append(cfg.w_exec * turn_adv.get((i, t), ae[i]))
            elif k == SUMMARY:
                row.append(cfg.w_pref * ap[i])
            else:
                row.append(0.0)
        out.append(row)
    return out


def ref_toolpo(batch, cfg):
    pref = pref_values(batch, cfg)
    succ = [r.components.get("success", cfg.w_exec * r.exec + cfg.w_pref * p) for r, p in zip(batch.rewards, pref)]
    act = with_success([r.components.get("call_accuracy", r.exec) for r in batch.rewards], batch, cfg)
    g = norm(succ, [any_gen(m) for m in batch.members], cfg.eps)
    a = norm(act, [has(m, TOOL_CALL) for m in batch.members], cfg.eps)
    out = []
    for i, m in enumerate(batch.members):
        routed = route(m.kinds.tolist(), cfg.reasoning_route)
        out.append(
            [
                (g[i] if k in GENERATED_CODES else 0.0) + (cfg.toolpo_lambda * a[i] if c == TOOL_CALL else 0.0)
                for k, c in zip(m.kinds.tolist(), routed)
            ]
        )
    return out


def ref_rltr(batch, cfg):
    R = [
        r.components["rltr_plan"] if "rltr_plan" in r.components else r.components.get("completeness", r.exec)
        for r in batch.rewards
    ]
    a = norm(with_success(R, batch, cfg), [has(m, TOOL_CALL) for m in batch.members], cfg.eps)
    return [
        [a[i] if k == TOOL_CALL else 0.0 for k in route(m.kinds.tolist(), cfg.reasoning_route)]
        for i, m in enumerate(batch.members)
    ]


REFERENCES = {"grpo": ref_grpo, "slca": ref_slca, "toolpo": ref_toolpo, "rltr": ref_rltr}
