"""The ``rl-zoo`` preset against rl-baselines3-zoo's hyperparams/td3.yml, entry by entry."""

from __future__ import annotations

import pytest

from zoo.rl.config import TD3Config, preset_config, suggested_total_steps

# Transcribed by hand from rl-baselines3-zoo hyperparams/td3.yml at commit
# 22e3ff2450fd92033f7f032915e1f64894a09584 (`git -C /work/.mirror/DLR-RM+rl-baselines3-zoo/repo rev-parse HEAD`),
# in the file's own terms: YAML anchors (&pybullet-defaults, &mujoco-defaults) expanded, `policy: MlpPolicy`
# left out, policy_kwargs "dict(net_arch=[400, 300])" written as net_arch.
_PYBULLET = {"n_timesteps": 1e6, "gamma": 0.98, "buffer_size": 200000, "learning_starts": 10000,
             "noise_type": "normal", "noise_std": 0.1, "gradient_steps": 1, "train_freq": 1, "batch_size": 256,
             "learning_rate": 7e-4, "net_arch": [400, 300]}
_MUJOCO = {"n_timesteps": 1e6, "learning_starts": 10000, "noise_type": "normal", "noise_std": 0.1, "train_freq": 1,
           "gradient_steps": 1, "learning_rate": 1e-3, "batch_size": 256, "net_arch": [400, 300]}
TD3_YML: dict[str, dict] = {
    "default": {"n_timesteps": 1e6, "train_freq": 1, "gradient_steps": 1, "noise_type": "normal", "noise_std": 0.1},
    "MountainCarContinuous-v0": {"n_timesteps": 300000, "noise_type": "ornstein-uhlenbeck", "noise_std": 0.5,
                                 "gradient_steps": 1, "train_freq": 1, "learning_rate": 1e-3, "batch_size": 256,
                                 "net_arch": [400, 300]},
    "Pendulum-v1": {"n_timesteps": 20000, "gamma": 0.98, "buffer_size": 200000, "learning_starts": 10000,
                    "noise_type": "normal", "noise_std": 0.1, "gradient_steps": 1, "train_freq": 1,
                    "learning_rate": 1e-3, "net_arch": [400, 300]},
    "LunarLanderContinuous-v3": {"n_timesteps": 3e5, "gamma": 0.98, "buffer_size": 200000, "learning_starts": 10000,
                                 "noise_type": "normal", "noise_std": 0.1, "gradient_steps": 1, "train_freq": 1,
                                 "learning_rate": 1e-3, "net_arch": [400, 300]},
    "BipedalWalker-v3": {"n_timesteps": 1e6, "gamma": 0.98, "buffer_size": 200000, "learning_starts": 10000,
                         "noise_type": "normal", "noise_std": 0.1, "gradient_steps": 1, "train_freq": 1,
                         "learning_rate": 1e-3, "net_arch": [400, 300]},
    "BipedalWalkerHardcore-v3": {"n_timesteps": 1e7, "gamma": 0.99, "buffer_size": 1000000, "learning_starts": 10000,
                                 "noise_type": "normal", "noise_std": 0.1, "batch_size": 256, "train_freq": 1,
                                 "learning_rate": "lin_7e-4", "net_arch": [400, 300]},
    "HalfCheetahBulletEnv-v0": _PYBULLET,
    "AntBulletEnv-v0": _PYBULLET,
    "HopperBulletEnv-v0": _PYBULLET,
    "Walker2DBulletEnv-v0": _PYBULLET,
    "HumanoidBulletEnv-v0": {"n_timesteps": 2e6, "gamma": 0.98, "buffer_size": 200000, "learning_starts": 10000,
                             "noise_type": "normal", "noise_std": 0.1, "train_freq": 1, "learning_rate": 1e-3,
                             "net_arch": [400, 300]},
    "ReacherBulletEnv-v0": {**_PYBULLET, "n_timesteps": 3e5},
    "InvertedDoublePendulumBulletEnv-v0": _PYBULLET,
    "InvertedPendulumSwingupBulletEnv-v0": {**_PYBULLET, "n_timesteps": 3e5},
    "MinitaurBulletEnv-v0": {"n_timesteps": 1e6, "gamma": 0.99, "buffer_size": 1000000, "noise_type": "normal",
                             "noise_std": 0.1, "learning_starts": 10000, "batch_size": 256, "learning_rate": 1e-3,
                             "train_freq": 1, "gradient_steps": 1, "net_arch": [400, 300]},
    "HalfCheetah-v4": _MUJOCO,
    "Ant-v4": _MUJOCO,
    "Hopper-v4": _MUJOCO,
    "Walker2d-v4": _MUJOCO,
    "Humanoid-v4": {**_MUJOCO, "n_timesteps": 2e6},
    "Swimmer-v4": {**_MUJOCO, "gamma": 0.9999},
}
# What rl-zoo passes to SB3's TD3 for a key an entry does not set: SB3 2.x TD3.__init__ and TD3Policy defaults
# (net_arch [400, 300]).
SB3_TD3_DEFAULTS = {"learning_rate": 1e-3, "buffer_size": 1_000_000, "learning_starts": 100, "batch_size": 256,
                    "tau": 0.005, "gamma": 0.99, "train_freq": 1, "gradient_steps": 1, "policy_delay": 2,
                    "target_policy_noise": 0.2, "target_noise_clip": 0.5, "net_arch": [400, 300]}


def _expected(entry: dict) -> dict:
    """An rl-zoo entry (SB3 defaults under it) in TD3Config's terms, and its n_timesteps."""
    e = {**SB3_TD3_DEFAULTS, **entry}
    lr = e.pop("learning_rate")
    schedule = "constant"
    if isinstance(lr, str):  # rl-zoo's "lin_<lr>": linear decay from <lr> to 0 over the run
        schedule, lr = "linear", float(lr.removeprefix("lin_"))
    out = {"actor_lr": lr, "critic_lr": lr, "lr_schedule": schedule, "exploration_noise": e.pop("noise_std"),
           "net_arch": tuple(e.pop("net_arch")), "noise_type": e.pop("noise_type")}
    steps = int(e.pop("n_timesteps"))
    return {**e, **out}, steps


def _check(env_id: str, entry: dict) -> None:
    expected, steps = _expected(entry)
    cfg = preset_config("rl-zoo", env_id)
    assert set(expected) <= set(TD3Config.field_names())
    for key, value in expected.items():
        assert getattr(cfg, key) == value, f"{env_id}: {key} is {getattr(cfg, key)!r}, td3.yml says {value!r}"
    assert suggested_total_steps("rl-zoo", env_id) == steps


@pytest.mark.parametrize("env_id", [k for k in TD3_YML if k != "default"])
def test_rl_zoo_preset_is_td3_yml(env_id):
    _check(env_id, TD3_YML[env_id])


@pytest.mark.parametrize("name", ["HalfCheetah", "Ant", "Hopper", "Walker2d", "Humanoid", "Swimmer"])
def test_mujoco_v5_takes_the_v4_entry(name):
    _check(f"{name}-v5", TD3_YML[f"{name}-v4"])


@pytest.mark.parametrize("env_id", ["InvertedPendulum-v5", "Reacher-v5", "SomethingElse-v0", ""])
def test_an_env_td3_yml_does_not_list_gets_its_default(env_id):
    _check(env_id, TD3_YML["default"])
    assert preset_config("rl-zoo", env_id).learning_starts == 100  # SB3's, not the MuJoCo entries' 10_000


def test_fujimoto_preset_kept():
    cfg = preset_config("fujimoto", "Hopper-v5")
    assert (cfg.net_arch, cfg.actor_lr, cfg.learning_starts, cfg.noise_type, cfg.lr_schedule) == (
        (256, 256), 3e-4, 25_000, "normal", "constant")
    assert suggested_total_steps("fujimoto", "Hopper-v5") == 1_000_000
    with pytest.raises(ValueError, match="unknown TD3 preset"):
        suggested_total_steps("nope", "Hopper-v5")


def test_bad_noise_type_and_schedule_are_refused():
    with pytest.raises(ValueError, match="noise_type must be one of normal, ornstein-uhlenbeck"):
        TD3Config(noise_type="ou")
    with pytest.raises(ValueError, match="lr_schedule"):
        TD3Config(lr_schedule="cosine")
