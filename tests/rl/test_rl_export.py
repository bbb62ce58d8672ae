"""TD3 export: the ONNX / .pt2 policy acts like ``agent.act`` in the env's units, batched or not."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import zoo
from zoo.exporting import read_metadata

ort = pytest.importorskip("onnxruntime")


@pytest.mark.parametrize(("weights", "bound"), [("pendulum-v1", 2.0), ("invertedpendulum-v5", 3.0)])
def test_policy_matches_agent_act_in_env_units(tmp_path, weights, bound):
    agent = zoo.build("td3", weights=weights)
    res = zoo.export(agent, tmp_path / "policy.onnx")
    assert res.atol == 1e-5 and res.max_abs_diff <= 1e-5
    meta = read_metadata(res.path)
    assert meta["action_low"] == [-bound] and meta["action_high"] == [bound] and meta["env"] == agent.env_id
    session = ort.InferenceSession(str(res.path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(33, agent.obs_dim)).astype(np.float32)
    obs[:3] *= 1e3  # saturated tanh: the export must land exactly on the bounds, as act() does
    (action,) = session.run(None, {"observation": obs})
    np.testing.assert_allclose(action, agent.act(obs), atol=1e-5, rtol=1e-5)
    assert np.all(np.abs(action) <= bound) and np.isclose(np.abs(action[:3]), bound, atol=1e-4).any()
    (one,) = session.run(None, {"observation": obs[:1]})  # batch 1 (the acting case)
    np.testing.assert_allclose(one[0], agent.act(obs[0]), atol=1e-5, rtol=1e-5)


def test_pt2_policy_and_training_state_untouched(tmp_path):
    agent = zoo.build("td3", weights="pendulum-v1")
    before = {k: v.clone() for k, v in agent.actor.state_dict().items()}
    res = zoo.export(agent, tmp_path / "policy", "torch.export")
    assert res.path.suffix == ".pt2"
    policy = torch.export.load(str(res.path)).module()
    obs = torch.randn(5, agent.obs_dim)
    with torch.no_grad():
        np.testing.assert_allclose(policy(obs).numpy(), agent.act(obs.numpy()), atol=1e-6)
    assert all(torch.equal(before[k], v) for k, v in agent.actor.state_dict().items())


def test_a_cast_actor_takes_observations_in_its_dtype(tmp_path):
    """An actor cast with .half() was traced on float32 observations: the ONNX checker's 'B has inconsistent
    type tensor(float16)'. The graph takes float16 observations and gives float32 actions in the env's units."""
    agent = zoo.build("td3", weights="pendulum-v1")
    agent.actor.half()
    res = zoo.export(agent, tmp_path / "policy.onnx")
    assert res.verified and res.max_abs_diff <= res.atol == 8 * 2.0**-10
    assert read_metadata(res)["observation"] == "(B, 3) float16"
    session = ort.InferenceSession(str(res.path), providers=["CPUExecutionProvider"])
    assert [session.get_inputs()[0].type, session.get_outputs()[0].type] == ["tensor(float16)", "tensor(float)"]
    obs = torch.randn(4, 3).half()
    (action,) = session.run(None, {"observation": obs.numpy()})
    with torch.no_grad():
        want = agent.scale_action(agent.actor(obs).float()).numpy()
    np.testing.assert_allclose(action, want, atol=res.atol, rtol=res.rtol)
