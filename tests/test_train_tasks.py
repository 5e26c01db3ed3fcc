"""Tasks: the tiny offline model and its token-id reward, and the GSM8K-style answer checker."""

from __future__ import annotations

import json

import pytest

from bayes_grpo.train.tasks import extract_final_number, gold_answer, gsm8k_reward


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("so 3 + 4 = 7\n#### 7", 7.0),
        ("#### 1,234", 1234.0),
        ("the answer is -3.5 dollars", -3.5),
        ("first 12 then 15", 15.0),
        ("#### 5 and later 9", 5.0),
        ("no digits here", None),
        ("#### -1,234,567.25", -1234567.25),
        ("#### .5", 0.5),
        ("#### 1,2,3", 1.0),  # a list, not the number 123: commas only group thousands
        ("the digits are 1,2,3", 3.0),
        ("#### 12,34", 12.0),
        # a final answer written with a currency sign, in bold or with a plus sign is still the
        # one after ####, not a number of the text after it (it read 9, 6 and 3)
        ("#### $18\nso each of the 2 friends pays 9", 18.0),
        ("#### **42**, i.e. 7 x 6", 42.0),
        ("#### +7 after 3 rounds", 7.0),
        ("#### **$1,234.50** for 3 items", 1234.5),
    ],
)
def test_final_number_is_read_after_hashes_else_last(text, number):
    assert extract_final_number(text) == number


def test_gsm8k_reward_is_binary_and_reads_conversational_completions():
    answers = ["Natalia sold 48/2 = 24 clips in May.\n#### 72", "#### 10"]
    completions = [[{"role": "assistant", "content": "48 + 24 = 72\n#### 72"}], "I think 11"]
    assert gsm8k_reward(["p1", "p2"], completions, answers) == [1.0, 0.0]
    assert gold_answer(answers[0]) == 72.0
    with pytest.raises(ValueError, match="no number"):
        gold_answer("none")


def test_gsm8k_dataset_from_a_local_file(tmp_path):
    pytest.importorskip("datasets")
    from bayes_grpo.train.tasks import gsm8k_prompts, load_prompt_dataset

    path = tmp_path / "mini.jsonl"
    rows = [
        {"question": "What is 2+2?", "answer": "2+2=4\n#### 4"},
        {"question": "3*3?", "answer": "#### 9"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    ds = gsm8k_prompts(load_prompt_dataset(str(path)), chat=True)
    assert ds.column_names == ["answer", "prompt"] or set(ds.column_names) == {"answer", "prompt"}
    assert ds[0]["prompt"][0]["role"] == "user" and "What is 2+2?" in ds[0]["prompt"][0]["content"]
    plain = gsm8k_prompts(load_prompt_dataset(str(path)), chat=False)
    assert plain[1]["prompt"].startswith("3*3?")
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        load_prompt_dataset(str(tmp_path / "missing.jsonl"))
    with pytest.raises(ValueError, match="'question'"):
        gsm8k_prompts(load_prompt_dataset(str(path)).rename_column("question", "q"), chat=False)


def test_tiny_model_has_about_0_1m_parameters_and_a_local_tokenizer(tmp_path):
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from bayes_grpo.train.tiny import build_tiny_model, is_tiny_model_dir, tiny_vocabulary

    path = build_tiny_model(tmp_path / "tiny", seed=3)
    assert is_tiny_model_dir(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    n = sum(p.numel() for p in model.parameters())
    assert 50_000 < n < 200_000
    assert model.config.n_layer == 2 and len(tok) == len(tiny_vocabulary())
    assert tok("next 3 =")["input_ids"] == [
        tok.convert_tokens_to_ids(t) for t in ("next", "3", "=")
    ]


def test_next_digit_reward_is_checked_on_token_ids(tmp_path):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from bayes_grpo.train.tiny import build_tiny_model, make_next_digit_reward, next_digit_prompts

    tok = AutoTokenizer.from_pretrained(build_tiny_model(tmp_path / "tiny"))
    reward = make_next_digit_reward(tok)
    ids = tok.convert_tokens_to_ids
    eos, pad = tok.eos_token_id, tok.pad_token_id
    completions = [
        [ids("4"), eos],
        [ids("4"), eos, pad],
        [ids("5"), eos],
        [ids("4"), ids("4")],
        [ids("0"), eos],
    ]
    got = reward(None, None, completions, ["4", "4", "4", "4", "0"])
    assert got == [1.0, 1.0, 0.0, 0.0, 1.0]
    rows = next_digit_prompts(50, seed=1)
    assert rows == next_digit_prompts(50, seed=1)
    for row in rows:
        d = int(row["prompt"].split()[1])
        assert row["answer"] == str((d + 1) % 10)


def test_a_configuration_asked_of_a_saved_dataset_folder_is_refused_not_ignored(tmp_path):
    from datasets import Dataset

    from bayes_grpo.train.tasks import load_prompt_dataset

    folder = tmp_path / "saved"
    Dataset.from_list([{"question": "q", "answer": "#### 1"}]).save_to_disk(str(folder))
    assert len(load_prompt_dataset(str(folder))) == 1
    with pytest.raises(ValueError, match=r"dataset_config \(--dataset-config\) 'main'"):
        load_prompt_dataset(str(folder), config="main")


def test_a_dataset_that_cannot_be_loaded_is_an_error_naming_it(tmp_path, monkeypatch):
    # `train --task gsm8k --dataset openai/gsm8k` offline ended in datasets' ConnectionError
    # traceback ("Couldn't reach 'openai/gsm8k' on the Hub"), a malformed JSON Lines file in
    # "DatasetGenerationError: An error occurred while generating the dataset", naming neither
    # the file nor what was wrong with it
    import datasets.config

    from bayes_grpo.train.tasks import load_prompt_dataset

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    with pytest.raises(
        FileNotFoundError,
        match=r"^nosuchowner/nosuchds: cannot load the dataset: Couldn't reach 'nosuchowner",
    ):
        load_prompt_dataset("nosuchowner/nosuchds")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "#### 1"}\n{bad json\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl: cannot load the dataset: JSON parse error"):
        load_prompt_dataset(str(bad))
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        FileNotFoundError, match=r"empty: cannot load the dataset: .*any data files"
    ):
        load_prompt_dataset(str(tmp_path / "empty"))


def test_next_digit_reward_reads_the_first_two_tokens_as_generated(tmp_path):
    # the reward dropped every pad id before reading the first two tokens: a pad token sampled
    # before or after the digit scored 1 ("[PAD] 4 [EOS]"), and with a tokenizer whose pad is its
    # end of sequence (the runner's for a model without a pad token, e.g. gpt2) none could score
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from bayes_grpo.train.tiny import build_tiny_model, make_next_digit_reward

    tok = AutoTokenizer.from_pretrained(build_tiny_model(tmp_path / "tiny"))
    ids = tok.convert_tokens_to_ids
    eos, pad = tok.eos_token_id, tok.pad_token_id
    reward = make_next_digit_reward(tok)
    completions = [[pad, ids("4"), eos], [ids("4"), pad, eos], [ids("4"), eos, pad, pad]]
    assert reward(None, None, completions, ["4"] * 3) == [0.0, 0.0, 1.0]
    tok.pad_token = tok.eos_token
    reward = make_next_digit_reward(tok)
    assert reward(None, None, [[ids("4"), eos], [ids("5"), eos]], ["4", "4"]) == [1.0, 0.0]
