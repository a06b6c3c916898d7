"""The two-tool choice task of the learning tests, and a rollout generator for it.

Design (why this is an honest test of RL on a tiny random model): a random 2-layer model never writes a
`<tool_call>` by itself, so generation is *constrained* to the two candidate calls (`get_weather` vs
`get_time`, identical arguments) — real token-by-token sampling from the model's own distribution among the
tokens that continue a candidate, logprobs recorded unconstrained (see `learner.rollout_local`). The choice
is decided at the one token where the names diverge, where the random model is near chance. After the call
the model samples 3 free tokens (a summary segment) whose preference reward is seeded noise, so the
preference channel has variance that must not leak into the tool choice. Execution reward = 1 when the
called tool is the one the question needs, else 0.
"""

from __future__ import annotations

import random

import torch

from learner.rollout_local import build_trajectory, prompt_ids, sample_group
from slca.contracts import GoldCall, GroundTruth, Reward, RolloutGroup

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": desc,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
    for name, desc in (("get_weather", "Current weather in a city"), ("get_time", "Local time in a city"))
]
QUESTION = "What is the weather like in Paris right now?"
GOLD = "get_weather"


class TwoToolTask:
    def __init__(self, tokenizer, seed: int = 0):
        self.tokenizer = tokenizer
        self.messages = [{"role": "user", "content": QUESTION}]
        self.prompt = prompt_ids(tokenizer, self.messages, TOOLS)
        self.candidates = [
            tokenizer.encode(f'<tool_call>\n{{"name": "{n}", "arguments": {{"city": "Paris"}}}}\n</tool_call>\n')
            for n in ("get_weather", "get_time")
        ]
        self.generator = torch.Generator().manual_seed(seed)
        self.noise = random.Random(seed)
        self.truth = GroundTruth(calls=[GoldCall(name=GOLD, arguments={"city": "Paris"})])

    def group(self, model, version: int, size: int = 8, index: int = 0) -> RolloutGroup:
        trajs, rewards = [], []
        samples = sample_group(
            model,
            self.prompt,
            size,
            64,
            self.tokenizer.eos_token_id,
            self.generator,
            candidates=self.candidates,
            free_tail=3,
        )
        for s in samples:
            traj = build_trajectory(
                self.tokenizer, "two-tools", self.prompt, s, TOOLS, version, self.messages, self.truth
            )
            called = traj.tool_calls[0].name if traj.tool_calls else None
            trajs.append(traj)
            rewards.append(Reward(trajectory_id=traj.id, exec=float(called == GOLD), pref=self.noise.random()))
        return RolloutGroup(
            group_id=f"g{index}-v{version}",
            task_id="two-tools",
            policy_version_min=version,
            policy_version_max=version,
            trajectories=trajs,
            rewards=rewards,
        )


def exec_mean(group: RolloutGroup) -> float:
    return sum(r.exec for r in group.rewards) / group.size


@torch.no_grad()
def choice_probability(model, task: TwoToolTask) -> float:
    """Exact probability that constrained sampling picks the gold tool: the model's softmax at the token
    where the two candidates diverge, renormalised over the two."""
    a, b = task.candidates
    n = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    logits = model(torch.tensor([task.prompt + a[:n]])).logits[0, -1]
    pair = torch.softmax(logits[[a[n], b[n]]].float(), -1)
    return float(pair[0])
