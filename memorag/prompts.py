"""Every prompt of the package, in one place, by task and language.

Prompts are plain format strings; the code that fills them names its fields.
"""

from __future__ import annotations

# -- clue-SFT data (memorag/data/clue_builder.py) ------------------------------------------------
# Asked of a strong LLM: from (context, question, answer), the passages of the context that
# lead from the question to the answer. Fields: context, question, answer, max_clues, max_words.
CLUE_BUILDER_SYSTEM = {
    "en": "You prepare training data for a model that reads a long text once and must later point "
          "back to the passages that answer a question. You answer with passages copied exactly "
          "from the text, nothing else.",
}

CLUE_BUILDER_PROMPT = {
    "en": (
        "Below are a long text, a question about it, and the correct answer.\n\n"
        "Write the answer clues: short passages copied word for word from the text that someone "
        "would have to find in the text to answer the question. Together they should connect the "
        "question to the answer.\n\n"
        "Rules:\n"
        "- At most {max_clues} clues, one per line, with no numbering, bullets or quotation marks.\n"
        "- Copy every clue exactly from the text; do not paraphrase, and do not repeat the question.\n"
        "- Each clue has at most {max_words} words.\n\n"
        "Text:\n{context}\n\n"
        "Question: {question}\n"
        "Answer: {answer}\n\n"
        "Clues:"
    ),
}

# The instruction the memory model is trained on (and later asked) after reading a context:
# the SFT sample's `instruction`. Field: question.
CLUE_INSTRUCTION = {
    "en": (
        "You have read the text above. To answer the question below, write the passages of the text "
        "that the answer depends on, copied exactly, one per line.\n\n"
        "Question: {question}"
    ),
}


# ==============================================================================================
# The pipeline (memorag/pipeline.py). Languages: "en" and "zh"; `fill` falls back to "en".
# ==============================================================================================

# -- the memory model, after reading the context (the prompt goes after the context, in the same
# user turn). Evidence spans use CLUE_INSTRUCTION above, the instruction the memory model is
# trained on. Field: question.
MEMORY_QUESTIONS = {
    "en": (
        "You have read the text above. Someone asks the question below. Write up to four shorter "
        "questions that the text answers directly and that, answered together, settle the question. "
        "One question per line.\n\n"
        "Question: {question}"
    ),
    "zh": (
        "你已经读过上面的文本。有人提出了下面的问题。请写出最多四个更具体的小问题："
        "它们能在文本中直接找到答案，合起来可以回答原问题。每行一个问题。\n\n"
        "问题：{question}"
    ),
}

MEMORY_DRAFT = {
    "en": (
        "You have read the text above. Write a short draft answer to the question below, in one or "
        "two sentences, using the names and words of the text.\n\n"
        "Question: {question}"
    ),
    "zh": (
        "你已经读过上面的文本。请用一两句话为下面的问题写一个简短的初步答案，尽量使用文本中的人名和原词。\n\n"
        "问题：{question}"
    ),
}

# The `qa` task: the memory model answers from its memory alone. Field: question.
MEMORY_ANSWER = {
    "en": "You have read the text above. Answer the question below from it, briefly.\n\nQuestion: {question}",
    "zh": "你已经读过上面的文本。请根据文本简要回答下面的问题。\n\n问题：{question}",
}

# The `summarize` task: key points that will each retrieve passages. Field: focus (may be empty).
MEMORY_KEY_POINTS = {
    "en": (
        "You have read the text above. List its key points: the main people, events and ideas, "
        "in the order they appear. One point per line, each a short sentence.{focus}"
    ),
    "zh": "你已经读过上面的文本。请按出现顺序列出它的要点：主要人物、事件和观点。每行一个要点，每个要点一句话。{focus}",
}
KEY_POINTS_FOCUS = {
    "en": "\n\nFocus on what matters for this request: {request}",
    "zh": "\n\n重点关注与这个请求有关的内容：{request}",
}

# -- the generator, reading retrieved passages. Fields: passages, question / request.
GENERATOR_SYSTEM = {
    "en": "You answer questions about a text using only the passages you are given.",
    "zh": "你只根据给出的段落回答关于文本的问题。",
}

GENERATOR_ANSWER = {
    "en": (
        "Question: {question}\n\n"
        "Passages from the text:\n\n{passages}\n\n"
        "Using only the passages above, answer the question in one short sentence.\n"
        "Question: {question}"
    ),
    "zh": (
        "问题：{question}\n\n"
        "文本中的段落：\n\n{passages}\n\n"
        "只根据上面的段落，用一句简短的话回答问题。\n"
        "问题：{question}"
    ),
}

GENERATOR_SUMMARY = {
    "en": (
        "Request: {request}\n\n"
        "Passages from the text, in the order they appear in it:\n\n{passages}\n\n"
        "Using only the passages above, write a short summary of the text that meets the request.\n"
        "Request: {request}"
    ),
    "zh": (
        "请求：{request}\n\n"
        "按原文顺序给出的文本段落：\n\n{passages}\n\n"
        "只根据上面的段落，为文本写一个满足请求的简短摘要。\n"
        "请求：{request}"
    ),
}
DEFAULT_SUMMARY_REQUEST = {
    "en": "Summarize the text.",
    "zh": "总结这篇文本。",
}

# One retrieved passage inside the {passages} field. Fields: number, title, text.
PASSAGE = {
    "en": "[{number}] {title}\n{text}",
    "zh": "[{number}] {title}\n{text}",
}

# Replies that acknowledge instead of answering, dropped by the clue parser (lower case, no
# final punctuation; a clue line that starts with one of these is dropped).
ACKNOWLEDGEMENTS = {
    "en": (
        "i have read the text", "i've read the text", "i have read the article", "i have read",
        "sure", "certainly", "of course", "okay", "ok", "here are", "here is", "the following",
        "based on the text", "according to the text", "as an ai", "i'm sorry", "i am sorry",
        "i cannot", "i can't", "please provide", "what is your question",
    ),
    "zh": ("我已经读过", "我已阅读", "好的", "当然", "以下是", "根据文本", "请提供", "抱歉"),
}

LANGUAGES = ("en", "zh")


def fill(prompt: dict[str, str], language: str = "en", **fields: str) -> str:
    """The prompt in `language` (English when it has no such version) with its fields filled.

    Field values are inserted as they are; braces inside them are never read as fields.
    """
    template = prompt.get(language) or prompt["en"]
    return template.format(**fields)
