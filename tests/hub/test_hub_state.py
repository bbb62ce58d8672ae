"""State dict I/O: safetensors round trips, safe torch.load, strict loading with head re-initialisation."""

from __future__ import annotations

import os
import pickle

import pytest
import torch
from torch import nn

from zoo import hub


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.out = nn.Linear(4, 10, bias=False)
        self.out.weight = self.emb.weight  # weight tying: one storage, two names


def _net(num_classes: int = 3) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 4 * 4, num_classes))


def test_fp16_storage_loads_into_fp32_module(tmp_path):
    torch.manual_seed(0)
    src = _net()
    path = hub.save_weights(src, tmp_path / "w.safetensors", metadata={"dataset": "x"}, dtype=torch.float16)
    assert not [p for p in tmp_path.iterdir() if p.name != "w.safetensors"]  # the temp file was renamed
    sd = hub.load_state_dict(path)
    assert sd["0.weight"].dtype == torch.float16 and sd["1.num_batches_tracked"].dtype == torch.int64
    assert hub.read_metadata(path)["dataset"] == "x"
    dst = _net()
    report = hub.load_into(dst, sd)
    assert dst[0].weight.dtype == torch.float32
    assert torch.equal(dst[0].weight, src[0].weight.half().float())
    assert len(report.loaded) == len(src.state_dict()) and report.ok


def test_the_same_weights_saved_twice_are_the_same_bytes(tmp_path):
    # safetensors writes its metadata in a HashMap's order, which changed from one save to the next
    torch.manual_seed(0)
    net = _net()
    meta = {f"key{i}": "é" * i for i in range(16)}
    paths = [hub.save_weights(net, tmp_path / f"{i}.safetensors", metadata=meta) for i in range(4)]
    assert len({p.read_bytes() for p in paths}) == 1
    assert hub.read_metadata(paths[0]) == {"format": "pt", **meta}
    assert torch.equal(hub.load_state_dict(paths[0])["3.weight"], net[3].weight)


def test_a_file_whose_name_is_not_utf8_loads_as_it_was_saved(tmp_path):
    """Linux allows such names and zoo.save wrote one; safetensors refuses to open them by name ("Path ... is
    not valid UTF-8"), and the load called the good file corrupt, telling the user to replace it."""
    torch.manual_seed(0)
    net = _net()
    path = tmp_path / os.fsdecode(b"w\xff\xfe.safetensors")
    hub.save_weights(net, path, metadata={"dataset": "x"})
    assert hub.read_metadata(path)["dataset"] == "x"
    assert torch.equal(hub.load_state_dict(path)["3.weight"], net[3].weight)


def test_shared_tensors_stored_once_and_restored(tmp_path):
    src = _Tied()
    path = hub.save_weights(src, tmp_path / "tied.safetensors")
    meta = hub.read_metadata(path)
    assert "out.weight" in meta[hub.state.ALIASES_KEY]
    dst = _Tied()
    hub.load_into(dst, hub.load_state_dict(path))
    assert torch.equal(dst.out.weight, src.emb.weight) and dst.out.weight is dst.emb.weight


def test_wrappers_and_dataparallel_prefix_unwrapped(tmp_path):
    src = _net()
    wrapped = {"epoch": 3, "state_dict": {f"module.{k}": v for k, v in src.state_dict().items()}}
    torch.save(wrapped, tmp_path / "ckpt.pth")
    sd = hub.load_state_dict(tmp_path / "ckpt.pth")
    assert set(sd) == set(src.state_dict())
    torch.save({"model": src.state_dict(), "optimizer": {"lr": 0.1}}, tmp_path / "ckpt2.pt")
    assert set(hub.load_state_dict(tmp_path / "ckpt2.pt")) == set(src.state_dict())


def test_a_wrapped_models_safetensors_load_into_the_model(tmp_path):
    """model.state_dict() of a DataParallel or a torch.compile'd model, saved as safetensors: every key has the
    wrapper's prefix, and the load refused the file, listing each key twice."""
    src = _net()
    for wrapped in (nn.DataParallel(src), torch.compile(src), nn.DataParallel(torch.compile(src))):
        path = hub.save_weights(wrapped.state_dict(), tmp_path / "w.safetensors")
        dst = _net()
        assert hub.load_into(dst, hub.load_state_dict(path)).ok
        assert torch.equal(dst[0].weight, src[0].weight)


def test_a_prefix_the_model_itself_has_is_kept():
    class Holder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.module = nn.Linear(2, 2)  # its own keys start with "module."

    src = Holder()
    dst = Holder()
    hub.load_into(dst, src.state_dict())
    assert torch.equal(dst.module.weight, src.module.weight)


def test_not_a_state_dict_is_a_clear_error(tmp_path):
    torch.save([1, 2, 3], tmp_path / "list.pt")
    with pytest.raises(ValueError, match="expected a state dict"):
        hub.load_state_dict(tmp_path / "list.pt")
    (tmp_path / "junk.bin").write_bytes(b"hello world, not weights")
    with pytest.raises(ValueError, match="not a safetensors file nor a torch.save file"):
        hub.load_state_dict(tmp_path / "junk.bin")
    with pytest.raises(FileNotFoundError):
        hub.load_state_dict(tmp_path / "absent.safetensors")


class _Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_never_executed(tmp_path, tiny_model):
    import zoo

    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pth"
    torch.save({"weight": torch.zeros(2), "payload": _Evil(str(marker))}, path)
    assert not marker.exists()
    with pytest.raises(pickle.UnpicklingError, match="refusing to load"):
        hub.load_state_dict(path)
    with pytest.raises(pickle.UnpicklingError):
        zoo.build(tiny_model, weights=str(path))
    assert not marker.exists()


def test_a_corrupt_torch_save_file_is_called_corrupt_not_malicious(tmp_path, flip_pickle_opcode):
    """Flipped or missing bytes are a corrupt file (with the unpickler's reason, without torch's advice to
    load it with weights_only=False); only a pickle naming code to run is refused as such."""
    path = tmp_path / "ok.pt"
    torch.save({"w": torch.randn(64)}, path)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(hub.CorruptWeightsError, match="truncated.pt: not a readable torch.save file"):
        hub.load_state_dict(truncated)
    flipped = flip_pickle_opcode(path, tmp_path / "flipped.pt")
    with pytest.raises(hub.CorruptWeightsError, match="Unsupported operand 43") as err:
        hub.load_state_dict(flipped)
    assert "weights_only" not in str(err.value)


def test_head_reinit_with_warning_and_report():
    torch.manual_seed(0)
    src = _net(num_classes=10)
    dst = _net(num_classes=4)
    fresh_head = dst[3].weight.detach().clone()
    with pytest.warns(UserWarning, match=r"3\.weight file \[10, 64\] model \[4, 64\]"):
        report = hub.load_into(dst, src.state_dict(), reinit=("3.",))
    assert torch.equal(dst[0].weight, src[0].weight)  # the body loaded
    assert torch.equal(dst[3].weight, fresh_head)  # the head kept its fresh init
    assert ("3.weight", (10, 64), (4, 64)) in report.reinitialized
    assert "re-initialised 3.bias" in str(report)


def test_mismatch_error_names_keys_and_both_shapes():
    src, dst = _net(num_classes=10), _net(num_classes=4)
    with pytest.raises(ValueError) as err:
        hub.load_into(dst, src.state_dict())
    msg = str(err.value)
    assert "3.weight: file [10, 64] vs model [4, 64]" in msg and "3.bias: file [10] vs model [4]" in msg
    sd = dict(src.state_dict())
    sd.pop("0.bias")
    sd["extra.weight"] = torch.zeros(2)
    with pytest.raises(ValueError) as err:
        hub.load_into(_net(num_classes=10), sd)
    assert "missing in the file: 0.bias [4]" in str(err.value)
    assert "not in the model: extra.weight [2]" in str(err.value)


def test_a_file_of_another_network_is_refused_in_a_few_lines():
    """Every key differs: the message named all of them (a ResNet18 against a HybridSN file: ~7,000
    characters); now the first few of each kind and how many in all."""
    other = {f"encoder.{i}.weight": torch.zeros(3, 3) for i in range(40)}
    with pytest.raises(ValueError) as err:
        hub.load_into(_net(), other)
    msg = str(err.value)
    assert "missing in the file: 0.weight [4, 3, 3, 3]" in msg and "not in the model: encoder.0.weight [3, 3]" in msg
    assert "... and 3 more (9 in all)" in msg and "... and 34 more (40 in all)" in msg and len(msg) < 1000


def _header_length(path) -> int:
    return int.from_bytes(path.read_bytes()[:8], "little")


@pytest.mark.parametrize("modulus, residue", [(256, 128), (65536, 0x4B50)])  # a length starting 0x80 / b"PK"
def test_a_safetensors_header_length_that_looks_like_torch_save_still_reads_as_safetensors(tmp_path, modulus, residue):
    # found on torch 2.7, where the recorded torch version is a character shorter: the file's 8-byte header
    # length began with 0x80, the first byte of a legacy torch.save pickle, and loading it failed
    torch.manual_seed(0)
    src, path = _net(), tmp_path / "w.safetensors"
    base = _header_length(hub.save_weights(src, path, metadata={"pad": ""}))
    for pad in range((residue - base) % modulus - 16, (residue - base) % modulus + 16):
        hub.save_weights(src, path, metadata={"pad": "x" * max(pad, 0)})
        if _header_length(path) % modulus == residue:
            break
    else:
        pytest.fail(f"no padding gave a header length of {residue} mod {modulus}")
    first = path.read_bytes()[:2]
    assert first[:1] == b"\x80" if modulus == 256 else first == b"PK"
    assert hub.state.file_format(path) == "safetensors"
    hub.state.check_complete(path)
    sd = hub.load_state_dict(path)
    assert all(torch.equal(sd[k], v) for k, v in src.state_dict().items())


def test_save_weights_reads_a_home_folder_path_as_zoo_save_and_build_do(tmp_path, monkeypatch):
    """Before: agent.save("~/agent.safetensors") wrote ./~/agent.safetensors, which zoo.build(weights="~/...")
    then did not find."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "home").mkdir()
    path = hub.save_weights(nn.Linear(2, 2), "~/w.safetensors")
    assert path == tmp_path / "home" / "w.safetensors" and path.is_file() and not (tmp_path / "~").exists()
