"""What zoo.train / zoo.evaluate make of seq2seq data (zoo/seq2seq/corpus.py): a corpus folder's direction
label, sentence pairs in memory with their validation set, and zoo's own ParallelDataset."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

import zoo
from zoo.engine import LambdaCallback

DE = (Path(__file__).parent / "data" / "six.de").read_text(encoding="utf-8").splitlines()
EN = (Path(__file__).parent / "data" / "six.en").read_text(encoding="utf-8").splitlines()
TINY = {"d_model": 32, "n_heads": 2, "n_layers": 1, "d_ff": 64, "src_vocab": 300, "tgt_vocab": 300, "dropout": 0.0}
EVAL = {"amp": None, "progress": False, "bleu_sentences": 1}
QUICK = {"epochs": 1, **EVAL}


def _model(**config):
    torch.manual_seed(0)
    return zoo.build("seq2seq-transformer", **{**TINY, **config})


@pytest.fixture
def corpus(tmp_path):
    """A de-en corpus folder (train / val / test) of six sentence pairs, with no French."""
    for split in ("train", "val", "test"):
        (tmp_path / f"{split}.de").write_text("\n".join(DE) + "\n", encoding="utf-8")
        (tmp_path / f"{split}.en").write_text("\n".join(EN) + "\n", encoding="utf-8")
    return tmp_path


def test_a_failed_call_records_no_direction_and_a_retrained_model_records_its_new_one(corpus):
    """Before: a typo (direction='en-fr', no train.fr) labelled the model en-fr, a later en-de training kept
    that label (and the saved file said en-fr); a de-en model trained on en-de stayed labelled de-en without a
    word; a failed zoo.evaluate labelled an untrained model too."""
    m = _model()
    with pytest.raises(FileNotFoundError, match="'fr'"):
        zoo.train(m, corpus, direction="en-fr", **QUICK)
    assert m.config.direction is None
    with pytest.raises(ValueError, match="no tokenizer"):
        zoo.evaluate(m, corpus, direction="de-en", **EVAL)
    assert m.config.direction is None
    with pytest.raises(Exception, match="lr"):
        zoo.train(m, corpus, direction="de-en", lr=-1.0, **QUICK)  # the data loaded, the loop refused
    assert m.config.direction is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a first label is no news
        assert zoo.train(m, corpus, direction="en-de", **QUICK).model.config.direction == "en-de"
    with pytest.warns(UserWarning, match=r"trained en-de \(its recorded direction\); training it on de-en data "
                                         r".*records de-en from now on") as caught:
        r = zoo.train(m, corpus, direction="de-en", **QUICK)
    assert [w.filename for w in caught if "recorded direction" in str(w.message)] == [__file__]
    assert r.model.config.direction == "de-en"
    zoo.save(r.model, corpus / "m.safetensors")
    assert zoo.build("seq2seq-transformer", weights=str(corpus / "m.safetensors")).config.direction == "de-en"

    def fail(state, row):  # an error after the first epoch's steps: the weights are en-de's now
        raise RuntimeError("stopped mid-run")

    with pytest.warns(UserWarning, match="records en-de from now on"), pytest.raises(RuntimeError, match="mid-run"):
        zoo.train(r.model, corpus, direction="en-de", callbacks=[LambdaCallback(on_epoch_end=fail)], **QUICK)
    assert r.model.config.direction == "en-de"  # was: put back to de-en, under weights trained en-de


@pytest.mark.parametrize("sentences", [3, 2])
def test_training_and_validation_sets_given_together_as_sources_and_targets(sentences):
    """Before: ((sources, targets), (val_sources, val_targets)) and (pairs, (val_sources, val_targets)) were a
    TypeError unless each set held exactly two sentences; {"train": ..., "val": ...} and val_data= took them."""
    src, tgt, vs, vt = DE[:sentences], EN[:sentences], DE[3:3 + sentences], EN[3:3 + sentences]
    for data in (((src, tgt), (vs, vt)), (list(zip(src, tgt)), (vs, vt)), ((src, tgt), list(zip(vs, vt)))):
        m = _model()
        loader, options = m.zoo_data(data, train=True)
        assert sorted(len(b[1]) for b in loader) == [sentences]
        assert sum(len(b[1]) for b in options["val_data"]) == sentences and "eval_fn" in options
    r = zoo.train(_model(), ((src, tgt), (vs, vt)), **QUICK)
    assert "val_bleu" in r.history[-1]
    with pytest.raises(TypeError, match="zoo.evaluate scores one set"):
        zoo.evaluate(r.model, ((src, tgt), (vs, vt)), **EVAL)


def test_zoos_own_parallel_dataset_trains_and_is_scored_in_bleu():
    """Before: a ParallelDataset went to torch's default collate ("each element in list of batch should be of
    equal size"), a DataLoader of one (make_loader) was scored without the bleu the README lists, and a model
    without a tokenizer trained on a DataLoader and then could not be saved."""
    from zoo.seq2seq import ParallelDataset, ParallelText, make_loader, train_tokenizer

    text = ParallelText(DE, EN)
    tok = train_tokenizer(DE + EN, vocab_size=300, min_frequency=1)
    m = _model()
    ds = ParallelDataset(text, tok, m.max_len)
    with pytest.raises(ValueError, match=r"has no tokenizer: trained on a DataLoader .*model.tokenizer = "):
        zoo.train(m, make_loader(ds), **QUICK)
    m.tokenizer = tok
    r = zoo.train(m, ds, val_data=ds, batch_size=2, **QUICK)
    assert r.history[-1]["step"] == 3 and "val_bleu" in r.history[-1]
    for data in (ds, make_loader(ds, shuffle=False)):
        scores = zoo.evaluate(m, data, **EVAL)
        assert set(scores) == {"loss", "accuracy", "bleu"} and 0.0 <= scores["bleu"] <= 1.0


def test_vocabulary_messages_name_what_the_user_passed():
    """Before: a model built with src_vocab=tgt_vocab=100 failed "vocab_size must be at least 260 ... got 100"
    (no vocab_size was passed), and vocab_size=500 on a model with a tokenizer was ignored without a word."""
    pairs = list(zip(DE, EN))
    with pytest.raises(ValueError, match=r"src_vocab=100, tgt_vocab=100: too few ids .* at least 260 tokens .*"
                                         r"src_vocab and tgt_vocab >= 260"):
        zoo.train(_model(src_vocab=100, tgt_vocab=100), pairs, **QUICK)
    m = zoo.train(_model(), pairs, **QUICK).model
    with pytest.warns(UserWarning, match=r"vocab_size=280 is not applied: .* already has a tokenizer \(300 tokens\)"):
        zoo.train(m, pairs, vocab_size=280, **QUICK)
    assert m.tokenizer.vocab_size == 300


def test_evaluate_leaves_the_callers_global_torch_generator_alone(corpus):
    """Before: the evaluation loader had no generator of its own, so each pass drew its base seed from the
    global stream: torch.manual_seed(0); zoo.evaluate(model, pairs); torch.rand(1) gave 0.3074, not 0.4963."""
    from zoo.seq2seq import ParallelDataset, ParallelText, train_tokenizer

    m = _model()
    m.tokenizer = train_tokenizer(DE + EN, vocab_size=300, min_frequency=1)
    torch.manual_seed(0)
    untouched = torch.rand(3)
    for data, options in ((list(zip(DE, EN)), {}), (corpus, {"direction": "de-en"}),
                          (ParallelDataset(ParallelText(DE, EN), m.tokenizer, m.max_len), {})):
        torch.manual_seed(0)
        zoo.evaluate(m, data, **options, **EVAL)
        assert torch.equal(torch.rand(3), untouched), type(data).__name__



def test_num_workers_is_said_not_to_apply_to_training_and_applies_to_evaluate(corpus, monkeypatch):
    """Before: a corpus folder's (and sentence pairs') loaders were built without num_workers, so
    zoo.train(..., num_workers=2) collated every batch in the main process and said nothing. Training keeps
    doing so (its sampler gives a loader with workers another epoch's order) and says why; evaluate applies it."""
    from torch.utils.data import DataLoader

    import zoo.seq2seq.data as data_mod

    made = []

    class Recorded(DataLoader):
        def __init__(self, *args, **kwargs):
            made.append(kwargs.get("num_workers", 0))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(data_mod, "DataLoader", Recorded)
    with pytest.warns(UserWarning, match=r"num_workers=2 is not applied: seq2seq-transformer batches sentence pairs "
                                         r"with a sampler .* collated in the main process"):
        r = zoo.train(_model(), corpus, direction="de-en", num_workers=2, batch_size=2, **QUICK)
    assert made == [0, 0]  # the training and the validation loader
    made.clear()
    scores = [zoo.evaluate(r.model, corpus, direction="de-en", num_workers=n, **EVAL) for n in (0, 2)]
    assert made == [0, 2] and scores[0] == scores[1]


def test_an_empty_validation_split_is_refused_before_training(corpus):
    """Before: empty val.de / val.en, or val_data=([], []), trained a whole epoch and then failed inside
    sacreBLEU with a bare IndexError ("list index out of range") that named no file."""
    from zoo.seq2seq.translate import corpus_bleu

    for lang in ("de", "en"):
        (corpus / f"val.{lang}").write_text("", encoding="utf-8")
    m = _model()
    with pytest.raises(ValueError, match=r"'val' split is empty: .*val\.de and .*val\.en hold no lines.*val_split="):
        zoo.train(m, corpus, direction="de-en", **QUICK)
    assert m.tokenizer is None  # refused before a tokenizer was trained, let alone an epoch
    with pytest.raises(ValueError, match=r"no sentence pairs in val_data: \(sources, targets\) are two empty lists"):
        zoo.train(m, list(zip(DE, EN)), val_data=([], []), **QUICK)
    assert m.tokenizer is None
    with pytest.raises(ValueError, match="no sentences to score"):
        corpus_bleu([], [])


def test_a_parallel_dataset_encoded_with_another_tokenizer_is_refused():
    """Before: a ParallelDataset encoded with another tokenizer than the model's was trained on and scored without
    a word: its loss and accuracy were on ids that mean other words to the model, while BLEU looked right."""
    from zoo.seq2seq import ParallelDataset, ParallelText, make_loader, train_tokenizer

    text = ParallelText(DE, EN)
    m = _model()
    m.tokenizer = train_tokenizer(DE + EN, vocab_size=300, min_frequency=1)
    other = ParallelDataset(text, train_tokenizer(EN + DE[:2], vocab_size=280, min_frequency=1), m.max_len)
    own = ParallelDataset(text, m.tokenizer, m.max_len)
    with pytest.raises(ValueError, match=r"data is a ParallelDataset encoded with another tokenizer \(280 tokens, "
                                         r".*seq2seq-transformer's \(300 tokens, .*ParallelDataset\(dataset.text, "
                                         r"model.tokenizer, model.max_len\)"):
        zoo.evaluate(m, other, **EVAL)
    with pytest.raises(ValueError, match="data is a ParallelDataset encoded with another tokenizer"):
        zoo.evaluate(m, make_loader(other, shuffle=False), **EVAL)
    with pytest.raises(ValueError, match="val_data is a ParallelDataset encoded with another tokenizer"):
        zoo.train(m, own, val_data=other, **QUICK)
    assert set(zoo.evaluate(m, own, **EVAL)) == {"loss", "accuracy", "bleu"}


def _scored_sources(monkeypatch) -> list[list[str]]:
    """The source sentences each BLEU evaluation translates, in the order it gets them."""
    import zoo.seq2seq.translate as translation  # the module: zoo.seq2seq.translate is the function too

    seen: list[list[str]] = []
    real = translation._translate_texts

    def spy(model, items, **options):
        seen.append(list(items))
        return real(model, items, **options)

    monkeypatch.setattr(translation, "_translate_texts", spy)
    return seen


def test_a_subset_of_a_parallel_dataset_is_scored_in_bleu_on_its_own_sentences(monkeypatch):
    """Before: a Subset (random_split's validation part) has .dataset too, so BLEU translated and scored every
    sentence of the parent dataset: zoo.evaluate's bleu was the parent's, and zoo.train picked its best epoch by
    val_bleu on the training sentences."""
    from torch.utils.data import Subset

    from zoo.seq2seq import ParallelDataset, ParallelText, collate, train_tokenizer
    from zoo.seq2seq.translate import corpus_bleu

    m = _model()
    m.tokenizer = train_tokenizer(DE + EN, vocab_size=300, min_frequency=1)
    ds = ParallelDataset(ParallelText(DE, EN), m.tokenizer, m.max_len)
    seen = _scored_sources(monkeypatch)
    # collate_fn: the batches the original code needed to get as far as BLEU (see the next test)
    for val in (Subset(ds, [1, 5]), Subset(Subset(ds, [5, 3, 1, 0]), [2, 0])):  # nested: the parent's 1 and 5 too
        seen.clear()
        scores = zoo.evaluate(m, val, collate_fn=collate, amp=None, progress=False)
        assert seen == [[DE[1], DE[5]]]
        assert scores["bleu"] == corpus_bleu(m.translate([DE[1], DE[5]], amp=None), [EN[1], EN[5]]) / 100
        seen.clear()
        zoo.train(m, Subset(ds, [0, 2, 3, 4]), val_data=val, collate_fn=collate, epochs=1, amp=None, progress=False)
        assert seen == [[DE[1], DE[5]]]  # val_bleu, the monitored metric, on the validation part alone


def test_a_subset_of_a_parallel_dataset_is_batched_as_the_dataset_is():
    """Before: zoo.evaluate and zoo.train on a Subset of a ParallelDataset (random_split's parts) failed in torch's
    default collate, "each element in list of batch should be of equal size", while the whole dataset was batched
    by token budget with zoo's collate."""
    from torch.utils.data import Subset, random_split

    from zoo.seq2seq import ParallelDataset, ParallelText, TokenBucketSampler, train_tokenizer

    m = _model()
    m.tokenizer = train_tokenizer(DE + EN, vocab_size=300, min_frequency=1)
    ds = ParallelDataset(ParallelText(DE, EN), m.tokenizer, m.max_len)
    part = Subset(Subset(ds, [4, 2, 0, 5]), [3, 1, 0])  # the parent's items 5, 2 and 4
    loader, _ = m.zoo_data(part, train=False)
    assert isinstance(loader.batch_sampler, TokenBucketSampler) and loader.dataset is part  # a view: no copy
    assert loader.batch_sampler.lengths == [ds.lengths()[i] for i in (5, 2, 4)]
    same = ParallelDataset(ParallelText([DE[i] for i in (5, 2, 4)], [EN[i] for i in (5, 2, 4)]), m.tokenizer)
    assert zoo.evaluate(m, part, **EVAL) == pytest.approx(zoo.evaluate(m, same, **EVAL))
    train, val = random_split(ds, [4, 2], generator=torch.Generator().manual_seed(0))
    r = zoo.train(m, train, val_data=val, batch_size=2, **QUICK)
    assert r.history[-1]["step"] == 2 and "val_bleu" in r.history[-1]


def test_a_tokenizer_with_more_ids_than_the_model_is_refused_by_translate_and_evaluate(corpus):
    """Before: only training checked it; model.translate, zoo.predict and zoo.evaluate died with a bare IndexError
    ("index out of range in self") inside the embedding."""
    from zoo.seq2seq import ParallelDataset, ParallelText, train_tokenizer

    m = _model(src_vocab=280, tgt_vocab=280)
    m.tokenizer = train_tokenizer(DE + EN, vocab_size=300, min_frequency=1)
    assert m.tokenizer.vocab_size == 300
    too_big = r"tokenizer has 300 tokens but the model has src_vocab=280, tgt_vocab=280: .*at most 280 tokens"
    for call in (lambda: m.translate(DE[0]), lambda: zoo.predict(m, DE[:2]),
                 lambda: zoo.evaluate(m, list(zip(DE, EN)), **EVAL),
                 lambda: zoo.evaluate(m, corpus, direction="de-en", **EVAL),
                 lambda: zoo.evaluate(m, ParallelDataset(ParallelText(DE, EN), m.tokenizer), **EVAL),
                 lambda: zoo.train(m, ParallelDataset(ParallelText(DE, EN), m.tokenizer), **QUICK)):
        with pytest.raises(ValueError, match=too_big):
            call()
