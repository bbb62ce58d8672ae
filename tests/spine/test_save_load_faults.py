"""Files users load into zoo.build that do not fit: each is refused with what is wrong and what to do.

Found by loading what torchvision, timm, Lightning and safetensors users have at hand into the public API.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import zoo


def _declare(path: Path, key: str, dtype: str) -> None:
    """Rewrite ``path``'s safetensors header so that tensor ``key`` claims ``dtype`` (of the same item size): the
    bytes stay, as after a hand edit or a corrupted header that still parses."""
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header[key]["dtype"] = dtype
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + data[8 + n:])


@pytest.mark.parametrize(("name", "config", "key"), [
    ("resnet18", {"num_classes": 3, "stem": "cifar"}, "conv1.weight"),
    ("hybridsn", {"n_bands": 15, "window": 9, "num_classes": 3}, "classifier.1.weight"),
])
def test_a_header_that_names_integers_for_float_weights_is_refused(tmp_path, name, config, key):
    # int32 over float32 bytes: copy_ cast them without a word, and the network's weights became ~1e9
    model = zoo.build(name, **config)
    path = zoo.save(model, tmp_path / "m.safetensors")
    meta = zoo.hub.read_metadata(path)
    _declare(path, key, "I32")
    with pytest.raises(ValueError, match=rf"integers where the model holds floating-point values.*{key}: file int32 "
                                         r"vs model float32"):
        zoo.build(name, weights=path)
    # another floating dtype is a storage choice, not a corruption: float16 weights load into the float32 network
    half = zoo.hub.save_weights(model, tmp_path / "half.safetensors", metadata=meta, dtype=torch.float16)
    again = zoo.build(name, weights=half)
    assert torch.equal(again.state_dict()[key], model.state_dict()[key].half().float())


@pytest.mark.parametrize("attribute", ["model", "net"])
def test_a_lightning_checkpoint_names_the_prefix_its_keys_carry(tmp_path, attribute):
    # a LightningModule holding the network as self.model saves "state_dict": {"model.conv1.weight": ...}
    torch.manual_seed(0)
    net = zoo.build("resnet18", num_classes=3)
    state = {f"{attribute}.{k}": v for k, v in net.state_dict().items()}
    path = tmp_path / "epoch=3.ckpt"
    torch.save({"epoch": 3, "state_dict": state}, path)
    with pytest.raises(ValueError, match=rf"every key in the file starts with '{attribute}\.', which the model's keys "
                                         rf"lack.*removeprefix\('{attribute}\.'\)"):
        zoo.build("resnet18", weights=path)
    # the remedy the message gives loads it whole
    fixed = tmp_path / "fixed.pth"
    torch.save({k.removeprefix(f"{attribute}."): v for k, v in state.items()}, fixed)
    again = zoo.build("resnet18", weights=fixed)
    assert torch.equal(again.fc.weight, net.fc.weight) and again.fc.out_features == 3


def test_a_state_dict_of_one_part_of_the_model_names_that_part(tmp_path):
    # a torchvision resnet18's state dict for TSN, which holds a resnet18 as its .backbone
    import torchvision

    path = tmp_path / "resnet18.pth"
    torch.save(torchvision.models.resnet18().state_dict(), path)
    with pytest.raises(ValueError, match=r"the file holds the weights of one part of the model, its \.backbone .*"
                                         r"load it into model\.backbone"):
        zoo.build("video-tsn", weights=path)


def _set_metadata(path: Path, key: str, value: str) -> None:
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header["__metadata__"][key] = value
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + data[8 + n:])


@pytest.mark.parametrize(("key", "broken"), [
    ("zoo.config", lambda v: v[:-1]),          # the closing brace lost
    ("zoo.pretrained_cfg", lambda v: v[:-1]),  # the family's own record (class names, preprocessing)
    ("zoo.config", lambda v: "[3]"),           # JSON, but not the object zoo wrote
])
def test_a_saved_file_whose_metadata_record_is_broken_names_the_file_and_the_record(tmp_path, key, broken):
    # a bare JSONDecodeError ("Expecting ',' delimiter: line 1 column 79") came from whichever reader met it first
    path = zoo.save(zoo.build("resnet18", num_classes=3, stem="cifar"), tmp_path / "m.safetensors")
    _set_metadata(path, key, broken(zoo.hub.read_metadata(path)[key]))
    with pytest.raises(zoo.hub.CorruptWeightsError, match=rf"m\.safetensors: its {key} metadata is not the JSON "
                                                           r"object zoo wrote"):
        zoo.build("resnet18", weights=path)


def test_a_ddp_networks_state_dict_keeps_its_trained_head_in_either_format(tmp_path):
    # "module." keys: stripped from a .pth, kept in a .safetensors, where resnet18's loader then found no
    # fc.weight to size the head by and built a fresh 1000-way one in place of the file's 3-way head
    from safetensors.torch import save_file

    torch.manual_seed(0)
    net = zoo.build("resnet18", num_classes=3)
    state = {f"module.{k}": v for k, v in net.state_dict().items()}
    torch.save(state, tmp_path / "ddp.pth")
    save_file(state, tmp_path / "ddp.safetensors")
    for path in (tmp_path / "ddp.pth", tmp_path / "ddp.safetensors"):
        again = zoo.build("resnet18", weights=path)
        assert again.fc.out_features == 3 and torch.equal(again.fc.weight, net.fc.weight), path.name


def test_a_seq2seq_file_whose_header_names_integers_for_float_weights_is_refused(tmp_path):
    """seq2seq's loader (its own, for the tokenizer and config the file carries) cast them as the others' did."""
    import shutil

    path = shutil.copy(zoo.pull("seq2seq-transformer.multi30k-de-en"), tmp_path / "m.safetensors")
    key, stored = next((k, v.dtype) for k, v in zoo.hub.load_state_dict(path).items() if v.is_floating_point())
    _declare(Path(path), key, {torch.float16: "I16", torch.bfloat16: "I16", torch.float32: "I32"}[stored])
    with pytest.raises(ValueError, match=rf"integers where seq2seq-transformer holds floating-point values.*{key}: file "
                                         r"int(16|32) vs model float32"):
        zoo.build("seq2seq-transformer", weights=path)
