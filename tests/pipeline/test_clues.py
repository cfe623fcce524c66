"""Clue parsing: markers, labels, echoes, acknowledgements, repeats, length in any script, caps."""

from memorag.prompting.clues import (
    combine_clues,
    detect_language,
    normalize,
    parse_clues,
    text_units,
    truncate_units,
)


def test_numbering_bullets_labels_and_quotes_are_stripped():
    reply = (
        "1. Mordecai brought up Hadassah\n"
        "2) the king loved Esther above all\n"
        "(3) Haman was hanged on the gallows\n"
        "- Jonah went down to Joppa\n"
        "* • Boaz took Ruth as his wife\n"
        "Clue 6: \u201cthe maid was fair and beautiful\u201d\n"
        "Q: Who was the queen before Esther?\n"
        "\u4e00\u3001\u672b\u5e95\u6539\u6536\u517b\u4e86\u4ee5\u65af\u5e16\n"
    )
    assert parse_clues(reply, max_clues=10) == [
        "Mordecai brought up Hadassah",
        "the king loved Esther above all",
        "Haman was hanged on the gallows",
        "Jonah went down to Joppa",
        "Boaz took Ruth as his wife",
        "the maid was fair and beautiful",
        "Who was the queen before Esther?",
        "\u672b\u5e95\u6539\u6536\u517b\u4e86\u4ee5\u65af\u5e16",
    ]


def test_several_numbered_items_on_one_line_are_split():
    assert parse_clues("1. the first clue here 2. the second clue here 3) a third one") == [
        "the first clue here", "the second clue here", "a third one"]


def test_duplicates_echoes_acknowledgements_and_headings_are_dropped():
    question = "Who raised Esther?"
    prompt = f"You have read the text above. Write the passages, one per line.\n\nQuestion: {question}"
    reply = (
        "Sure, here are the passages you asked for:\n"
        "I have read the text.\n"
        "Passages:\n"
        "Question: Who raised Esther?\n"
        "who raised esther\n"
        "Write the passages, one per line.\n"
        "The passages answer the question, one per line.\n"
        "Mordecai took her for his own daughter.\n"
        "- Mordecai took her for his own DAUGHTER!\n"
        "\n"
        "Surely the king will hear this\n"
    )
    assert parse_clues(reply, prompt=prompt, query=question) == [
        "Mordecai took her for his own daughter.", "Surely the king will hear this"]


def test_questions_that_restate_the_query_are_dropped_but_statements_are_kept():
    query = "Who brought up Esther after her father and mother died?"
    reply = ("Who brought upEre after his father and mother?\n"
             "Who brought up a shalomor after his father and mother?\n"
             "Mordecai brought up Esther after her father and mother died\n"
             "Who was the uncle of Esther?\n")
    assert parse_clues(reply, query=query) == [
        "Mordecai brought up Esther after her father and mother died", "Who was the uncle of Esther?"]


def test_runaway_repetition_and_short_lines_are_dropped_and_long_ones_cut():
    looping = "who's a stranger, " * 12
    long_line = " ".join(f"w{i}" for i in range(100))
    clues = parse_clues(f"{looping}\nok\nEsther\n{long_line}", min_units=2, max_units=20)
    assert clues == [" ".join(f"w{i}" for i in range(20))]


def test_length_counts_characters_in_scripts_without_spaces():
    assert text_units("Mordecai raised Esther") == 3
    assert text_units("\u672b\u5e95\u6539\u6536\u517b\u4e86\u4ee5\u65af\u5e16") == 9  # nine Chinese characters
    assert text_units("\u30a8\u30b9\u30c6\u30eb is \u738b\u5983") == 4 + 1 + 2  # katakana, a word, two kanji
    assert text_units("\u0e40\u0e2d\u0e2a\u0e40\u0e15\u0e2d\u0e23\u0e4c") == 7  # Thai: letters; the mark joins its letter
    assert text_units("Ester \u00e9tait reine , \u2014 !") == 3  # punctuation alone is no unit
    assert truncate_units("\u672b\u5e95\u6539 said so", 4) == "\u672b\u5e95\u6539 said"
    assert truncate_units("short", 5) == "short"
    # a two-character Chinese clue passes a 2-unit minimum; a one-word English one does not
    assert parse_clues("\u738b\u5983\nEsther", min_units=2) == ["\u738b\u5983"]


def test_draft_answers_are_read_whole_and_clue_count_is_capped():
    draft = "Mordecai raised her,\nhis uncle's daughter."
    assert parse_clues(draft, split_lines=False) == ["Mordecai raised her, his uncle's daughter."]
    prompt = ("You have read the text above. Write a short draft answer to the question below.\n\n"
              "Question: Who raised Esther?")
    echoed = ("The answer to the question is: You have read the text above.\nWrite a short draft answer to the "
              "question below. Mordecai raised her.\nQuestion: Who raised Esther?")
    assert parse_clues(echoed, prompt=prompt, query="Who raised Esther?", split_lines=False) == ["Mordecai raised her."]
    many = "\n".join(f"clue number {i} here" for i in range(20))
    assert len(parse_clues(many, max_clues=5)) == 5
    assert parse_clues(many, max_clues=0) == []


def test_kinds_are_combined_round_robin_without_repeats():
    spans = ["span one", "span two", "span three"]
    questions = ["question one?", "span one"]
    draft = ["the draft answer"]
    assert combine_clues([spans, questions, draft], max_clues=4, query="question one") == [
        "span one", "the draft answer", "span two", "span three"]


def test_language_detection_and_normalisation():
    assert detect_language("\u8c01\u6536\u517b\u4e86\u4ee5\u65af\u5e16\uff1f") == "zh"
    assert detect_language("Who raised Esther?") == "en"
    assert detect_language("") == "en"
    assert normalize("  Mordecai's   DAUGHTER! ") == "mordecai s daughter"
