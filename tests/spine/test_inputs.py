"""zoo.inputs' shared checks: the one whole-number rule and wording, and the "did you mean" hints."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.inputs import NotAnIntError, check_predict_options, close_names, did_you_mean, either, whole_number


@pytest.mark.parametrize("value", [3, np.int64(3), np.int32(3), np.uint8(3)])
def test_a_whole_number_is_an_int_or_a_numpy_integer_and_comes_back_a_python_int(value):
    got = whole_number(value, "count")
    assert got == 3 and type(got) is int


@pytest.mark.parametrize("value", [True, np.bool_(True), 3.0, np.float64(3.0), 2.5, "3", [3], None])
def test_a_bool_a_float_even_a_whole_one_a_str_or_none_is_refused_as_a_type_and_a_value_error(value):
    with pytest.raises(NotAnIntError, match=r"^count must be an int >= 1, got ") as err:
        whole_number(value, "count")
    # a TypeError by Python's convention, a ValueError to code that catches bad option values: both hold
    assert isinstance(err.value, TypeError) and isinstance(err.value, ValueError)
    assert str(err.value).endswith(repr(value))


def test_below_the_minimum_is_a_value_error_and_the_minimum_is_the_callers():
    with pytest.raises(ValueError, match=r"^count must be an int >= 1, got 0$") as err:
        whole_number(0, "count")
    assert not isinstance(err.value, TypeError)
    assert whole_number(0, "rank", minimum=0) == 0
    with pytest.raises(ValueError, match=r"^rank must be an int >= 0, got -1$"):
        whole_number(np.int64(-1), "rank", minimum=0)
    assert whole_number(-7, "seed", minimum=None) == -7
    with pytest.raises(NotAnIntError, match=r"^seed must be an int, got '7'$"):
        whole_number("7", "seed", minimum=None)


def test_none_is_taken_only_where_allowed_and_the_message_says_so_with_the_hint():
    assert whole_number(None, "max_len", allow_none=True) is None
    with pytest.raises(NotAnIntError, match=r"^max_len must be an int >= 1 or None \(new tokens\), got 2.5$"):
        whole_number(2.5, "max_len", allow_none=True, hint="new tokens")
    with pytest.raises(ValueError, match=r"^size must be an int >= 1 \(pixels\), got 0$"):
        whole_number(0, "size", hint="pixels")


def test_predict_options_take_numpy_integers_and_refuse_a_bool():
    got = check_predict_options(np.int64(3), np.int32(2))  # counts from an array; refused before
    assert got == (3, 2) and [type(n) for n in got] == [int, int]
    with pytest.raises(ValueError, match=r"^topk must be an int >= 1 \(how many classes to list per input\), "
                                         r"got True$"):
        check_predict_options(True, 2)
    with pytest.raises(ValueError, match=r"^batch_size must be an int >= 1, got 0$"):
        check_predict_options(1, 0)


def test_did_you_mean_names_the_close_option_whatever_its_case_or_dashes():
    valid = ["batch_size", "epochs", "schedule", "lr"]
    assert did_you_mean("epohcs", valid) == " (did you mean 'epochs'?)"
    assert did_you_mean("Batch-Size", valid) == " (did you mean 'batch_size'?)"
    assert did_you_mean("lr_sched", valid) == " (did you mean 'schedule'?)"  # 0.62: difflib's default takes it
    assert did_you_mean("momentum", valid) == ""
    assert did_you_mean("epoch", ["epochs", "epoch_s"], n=2) == " (did you mean 'epochs' or 'epoch_s'?)"


def test_close_names_find_a_model_or_weights_name_typed_in_part():
    names = ["resnet18", "resnet18.cifar10", "video-tsn", "seq2seq-transformer", "td3"]
    assert close_names("tsn", names) == ["video-tsn"]  # ratio 0.5: under difflib's default
    assert close_names("TD_3", names) == ["td3"]
    assert "resnet18.cifar10" in close_names("cifar", names)
    assert close_names("xyz", names) == []
    assert either(["a", "b", "c"]) == "'a', 'b' or 'c'" and either(["a"]) == "'a'"


def test_class_folders_are_the_visible_sub_folders_sorted(tmp_path):
    from zoo.inputs import class_folders

    for name in ("dog", "cat", ".ipynb_checkpoints", "Bird"):
        (tmp_path / name).mkdir()
    (tmp_path / "notes.txt").write_text("a file is no class")
    assert class_folders(tmp_path) == ["Bird", "cat", "dog"]
