

def test_a_group_size_reads_in_labels_as_given_and_unknown_as_a_question_mark():
    from bayes_grpo.runset.schema import group_size_text

    assert [group_size_text(g) for g in (4.0, 4.5, 16, float("nan"))] == ["4", "4.5", "16", "?"]
