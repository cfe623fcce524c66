"""Every prompt of the package, in one place, by task and language.

Prompts are plain format strings; the code that fills them names its fields.
"""

from __future__ import annotations

# -- clue-SFT data (memorag/training/data/clue_builder.py) ------------------------------------------------
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
# The pipeline and its modes (memorag/pipeline/, memorag/modes/). Languages: "en" and "zh"; `fill` falls
# back to "en".
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

# The memory's draft answer, offered after the passages under the reference evidence rule
# (memorag/modes/evidence_plan.py). Field: draft. The wording is the official MemoRAG pipeline's
# (`_handle_rag` in the qhjqhj00/MemoRAG repository appends f"The answer might be {potential_answer}."),
# which it uses in every language.
DRAFT_OFFER = {
    "en": "The answer might be {draft}.",
    "zh": "The answer might be {draft}.",
}

# -- the `longrag` mode (memorag/modes/longrag.py): a long reader in two turns. Turn 1 reads the
# long units and writes a long answer (fields: passages, question); turn 2 gets the question and
# that long answer, not the units again, and extracts the short answer after few-shot examples
# (fields: examples, question, long_answer). The examples are invented, grounded in no corpus.
LONGRAG_LONG_ANSWER = {
    "en": (
        "Read the documents below, then answer the question.\n\n"
        "Documents:\n\n{passages}\n\n"
        "Find the documents that bear on the question and answer it in a few sentences, naming "
        "the facts from the documents that support the answer.\n"
        "Question: {question}"
    ),
    "zh": (
        "阅读下面的文档，然后回答问题。\n\n"
        "文档：\n\n{passages}\n\n"
        "找出与问题有关的文档，用几句话回答问题，并写出文档中支持答案的事实。\n"
        "问题：{question}"
    ),
}
LONGRAG_SHORT_ANSWER = {
    "en": (
        "A question has been answered at length. Extract the short answer: only the few words that "
        "answer the question (a name, a place, a date, a number, yes or no), with no explanation.\n\n"
        "{examples}\n\n"
        "Question: {question}\n"
        "Long answer: {long_answer}\n"
        "Short answer:"
    ),
    "zh": (
        "一个问题已经得到了详细的回答。请提取简短答案：只写回答问题的几个词（人名、地名、日期、数字、是或否），不要解释。\n\n"
        "{examples}\n\n"
        "问题：{question}\n"
        "详细答案：{long_answer}\n"
        "简短答案："
    ),
}
LONGRAG_EXAMPLES = {
    "en": (
        "Question: Who repaired the lighthouse lamp?\n"
        "Long answer: The second document says the lamp had been dark for a week until Mara Quill, the "
        "keeper's daughter, climbed the tower and replaced its wick.\n"
        "Short answer: Mara Quill\n\n"
        "Question: How many boats left the harbour before the storm?\n"
        "Long answer: On the morning of the storm three boats sailed at dawn; the others stayed moored "
        "until the wind dropped, as the harbour log in the first document records.\n"
        "Short answer: three\n\n"
        "Question: Did the village council approve the new bridge?\n"
        "Long answer: Yes. The last document reports that after a year of debate the council voted to "
        "pay for the bridge out of the mill tax.\n"
        "Short answer: yes"
    ),
    "zh": (
        "问题：谁修好了灯塔的灯？\n"
        "详细答案：第二篇文档说，灯已经熄灭了一个星期，直到看守人的女儿林小禾爬上灯塔换了灯芯。\n"
        "简短答案：林小禾\n\n"
        "问题：暴风雨来临前有几条船离开了港口？\n"
        "详细答案：第一篇文档中的港口记录写道，暴风雨那天清晨有三条船出海，其余的船一直停泊到风停。\n"
        "简短答案：三条\n\n"
        "问题：村委会批准修建新桥了吗？\n"
        "详细答案：批准了。最后一篇文档说，经过一年的讨论，村委会投票决定用磨坊税支付建桥费用。\n"
        "简短答案：是"
    ),
}
# The label before the short answer, removed when the reply echoes it.
LONGRAG_SHORT_LABEL = {
    "en": "Short answer:",
    "zh": "简短答案：",
}

# -- the `mixpr` mode (memorag/modes/mixpr.py): the router that picks local or global PageRank.
# Fields: query, excerpts (the first two and the last two chunks of the corpus).
MIXPR_ROUTER = {
    "en": (
        "Here are the first two and the last two pieces of a long text:\n\n{excerpts}\n\n"
        "Request about the text: {query}\n\n"
        "Is this request local or global? Local: it can be met from a few specific places in the "
        "text (a fact, a name, a detail, one event). Global: it needs the text as a whole (a "
        "summary, the main themes, the most frequent words, how something changes throughout).\n"
        "Answer with one word: local or global."
    ),
    "zh": (
        "下面是一篇长文本的前两段和最后两段：\n\n{excerpts}\n\n"
        "关于这篇文本的请求：{query}\n\n"
        "这个请求是 local 还是 global？local：只需文本中少数几处具体内容（一个事实、一个名字、一个细节、一个事件）。"
        "global：需要整篇文本（摘要、主要主题、最常见的词、某件事在全文中的变化）。\n"
        "只用一个英文单词回答：local 或 global。"
    ),
}

# -- the `cic` mode (memorag/modes/cic.py, cic_prompt.py): LOFT's corpus-in-context prompts, reproduced
# exactly from google-deepmind/loft prompts/constants/{common,retrieval,rag}.py (English only, as LOFT).
# Retrieval uses LOFT's hotpotqa prompts (a query may need several documents); qa uses LOFT's RAG prompts,
# which LOFT uses for every RAG dataset (its PROMPT_MAPPER sends them all to nq). The layout (instruction,
# formatting instruction, documents, examples, query, each separated by a blank line) is that of LOFT's
# PROMPT_EXAMPLE.txt; the instructions and documents form a prefix every query shares.
CIC_INSTRUCTION = {
    "retrieval": (
        "You will be given a list of documents. You need to read carefully and understand all of them. Then you "
        "will be given a query that may require you to use 1 or more documents to find the answer. Your goal is "
        "to find all documents from the list that can help answer the query. Print out the ID and TITLE of each "
        "document."
    ),
    "qa": (
        "You will be given a list of documents. You need to read carefully and understand all of them. Then you "
        "will be given a query, and your goal is to answer the query based on the documents you have read."
    ),
}
CIC_FORMATTING_INSTRUCTION = {
    "retrieval": (
        "Your final answer should be a list of IDs, in the following format:\nFinal Answer: [id1, id2, ...]\n"
        "If there is only one ID, it should be in the format:\nFinal Answer: [id1]\n\nIf there is no perfect "
        "answer output the closest one. Do not give an empty final answer."
    ),
    "qa": (
        "Your final answer should be in a list, in the following format:\nFinal Answer: ['answer1', 'answer2', "
        "...]\nIf there is only one answer, it should be in the format:\nFinal Answer: ['answer']"
    ),
}
# One document of the corpus (LOFT's CORPUS_FORMAT_ECHO; a document without a title is titled "None").
# Fields: id, title, content.
CIC_DOCUMENT = "ID: {id} | TITLE: {title} | CONTENT: {content} | END ID: {id}"
CIC_NO_TITLE = "None"
# The query of an example and of the test query (LOFT's QUERY_FORMAT_SIMPLE_REVERSE). Field: query.
CIC_QUERY = {
    "retrieval": (
        "Which documents can help answer the query? Print out the TITLE and ID of each document. Then format the "
        "IDs into a list.\nIf there is no perfect answer output the closest one. Do not give an empty final "
        "answer.\nquery: {query}\nThe following documents can help answer the query:"
    ),
    "qa": (
        "Based on the documents above, can you answer the following query? Print out the TITLE and ID of the "
        "documents you use to answer. Then format the answers into a list.\nquery: {query}"
    ),
}
CIC_EXAMPLE_SEPARATOR = "====== Example {number} ======\n"  # before an example's query. Field: number (from 1)
CIC_TEST_SEPARATOR = "====== Now let's start! ======\n"  # before the test query
CIC_NEEDED_DOCUMENT = "TITLE: {title} | ID: {id}"  # an example's reasoning: one line per gold document
CIC_FINAL_ANSWER = "Final Answer: {answer}"  # an example's answer: a Python-style list of strings
# The query of a generated example (for a corpus without labelled questions; memorag's own, not LOFT's):
# the words that follow a quoted piece of a document. Fields: lead (and other_lead, over two documents).
CIC_EXAMPLE_ONE = {
    "en": 'What words follow "{lead}" in the corpus?',
    "zh": "文档集中“{lead}”后面是什么？",
}
CIC_EXAMPLE_TWO = {
    "en": 'What words follow "{lead}", and what words follow "{other_lead}"?',
    "zh": "“{lead}”后面是什么？“{other_lead}”后面又是什么？",
}

# -- the `hyde` mode (memorag/modes/hyde.py): a hypothetical answer passage that retrieves beside
# the question. Field: question.
HYDE_PASSAGE = {
    "en": (
        "Write a short passage that answers the question below, as a paragraph of a book or an "
        "encyclopedia would. Write only the passage, in two to four sentences.\n\n"
        "Question: {question}"
    ),
    "zh": "请写一段简短的文字来回答下面的问题，写法像书或百科全书中的一个段落。只写这段文字，两到四句话。\n\n问题：{question}",
}

# -- the `rqrag` mode (memorag/modes/rqrag.py): the question rewritten and decomposed, one search
# query per line. Fields: question, max_queries.
RQRAG_QUERIES = {
    "en": (
        "Help search a text for the answer to the question below. First rewrite the question so that "
        "it is clear and complete on its own. Then break it into simpler questions, each of which can "
        "be looked up by itself. Write at most {max_queries} lines in all, one question per line: the "
        "rewritten question first, then the simpler ones. Write nothing else.\n\n"
        "Question: {question}"
    ),
    "zh": (
        "为了在文本中查找下面问题的答案，请先把问题改写得清楚完整、可以单独理解，再把它拆成几个更简单、"
        "能各自查到的小问题。总共最多写 {max_queries} 行，每行一个问题：先写改写后的问题，再写小问题。"
        "不要写别的内容。\n\n问题：{question}"
    ),
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

# ==============================================================================================
# Benchmarks' own answer prompts (memorag/prompting/answer_forms.py picks and fills them). Reproduced exactly,
# whitespace and typos included, so that scores are comparable with the benchmarks' own runs.
# ==============================================================================================

# LongBench (THUDM/LongBench, config/dataset2prompt.json): one template per dataset. Fields:
# context (the text, here the passages the generator is given) and input (the question).
LONGBENCH_PROMPTS: dict[str, str] = {
    'narrativeqa': 'You are given a story, which can be either a novel or a movie script, and a question. Answer the question as concisely as you can, using a single phrase if possible. Do not provide any explanation.\n\nStory: {context}\n\nNow, answer the question based on the story as concisely as you can, using a single phrase if possible. Do not provide any explanation.\n\nQuestion: {input}\n\nAnswer:',
    'qasper': 'You are given a scientific article and a question. Answer the question as concisely as you can, using a single phrase or sentence if possible. If the question cannot be answered based on the information in the article, write "unanswerable". If the question is a yes/no question, answer "yes", "no", or "unanswerable". Do not provide any explanation.\n\nArticle: {context}\n\n Answer the question based on the above article as concisely as you can, using a single phrase or sentence if possible. If the question cannot be answered based on the information in the article, write "unanswerable". If the question is a yes/no question, answer "yes", "no", or "unanswerable". Do not provide any explanation.\n\nQuestion: {input}\n\nAnswer:',
    'multifieldqa_en': 'Read the following text and answer briefly.\n\n{context}\n\nNow, answer the following question based on the above text, only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:',
    'multifieldqa_zh': '阅读以下文字并用中文简短回答：\n\n{context}\n\n现在请基于上面的文章回答下面的问题，只告诉我答案，不要输出任何其他字词。\n\n问题：{input}\n回答：',
    'hotpotqa': 'Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given passages. Only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:',
    '2wikimqa': 'Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given passages. Only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:',
    'musique': 'Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given passages. Only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:',
    'dureader': '请基于给定的文章回答下述问题。\n\n文章：{context}\n\n请基于上述文章回答下面的问题。\n\n问题：{input}\n回答：',
    'gov_report': 'You are given a report by a government agency. Write a one-page summary of the report.\n\nReport:\n{context}\n\nNow, write a one-page summary of the report.\n\nSummary:',
    'qmsum': 'You are given a meeting transcript and a query containing a question or instruction. Answer the query in one or more sentences.\n\nTranscript:\n{context}\n\nNow, answer the query based on the above meeting transcript in one or more sentences.\n\nQuery: {input}\nAnswer:',
    'multi_news': 'You are given several news passages. Write a one-page summary of all news. \n\nNews:\n{context}\n\nNow, write a one-page summary of all the news.\n\nSummary:',
    'vcsum': '下面有一段会议记录，请你阅读后，写一段总结，总结会议的内容。\n会议记录：\n{context}\n\n会议总结：',
    'trec': 'Please determine the type of the question below. Here are some examples of questions.\n\n{context}\n{input}',
    'triviaqa': 'Answer the question based on the given passage. Only give me the answer and do not output any other words. The following are some examples.\n\n{context}\n\n{input}',
    'samsum': 'Summarize the dialogue into a few short sentences. The following are some examples.\n\n{context}\n\n{input}',
    'lsht': '请判断给定新闻的类别，下面是一些例子。\n\n{context}\n{input}',
    'passage_count': 'There are some paragraphs below sourced from Wikipedia. Some of them may be duplicates. Please carefully read these paragraphs and determine how many unique paragraphs there are after removing duplicates. In other words, how many non-repeating paragraphs are there in total?\n\n{context}\n\nPlease enter the final count of unique paragraphs after removing duplicates. The output format should only contain the number, such as 1, 2, 3, and so on.\n\nThe final answer is: ',
    'passage_retrieval_en': 'Here are 30 paragraphs from Wikipedia, along with an abstract. Please determine which paragraph the abstract is from.\n\n{context}\n\nThe following is an abstract.\n\n{input}\n\nPlease enter the number of the paragraph that the abstract is from. The answer format must be like "Paragraph 1", "Paragraph 2", etc.\n\nThe answer is: ',
    'passage_retrieval_zh': '以下是若干段落文字，以及其中一个段落的摘要。请确定给定的摘要出自哪一段。\n\n{context}\n\n下面是一个摘要\n\n{input}\n\n请输入摘要所属段落的编号。答案格式必须是"段落1"，"段落2"等格式\n\n答案是：',
    'lcc': 'Please complete the code given below. \n{context}Next line of code:\n',
    'repobench-p': 'Please complete the code given below. \n{context}{input}Next line of code:\n',
}

# RULER (NVIDIA/RULER, scripts/data/synthetic/constants.py; the same file ships in the package
# nvidia-long-context-eval as long_context_eval/data/synthetic/constants.py): per task a template and
# an answer prefix, which RULER appends to the prompt (scripts/data/prepare.py). Fields: context, query,
# type_needle_v (niah), num_v (variable_tracking).
RULER_PROMPTS: dict[str, tuple[str, str]] = {
    "niah": (
        "Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. "
        "I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are all the special magic "
        "{type_needle_v} for {query} mentioned in the provided text?",
        " The special magic {type_needle_v} for {query} mentioned in the provided text are",
    ),
    "variable_tracking": (
        "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
        "Question: Find all variables that are assigned the value {query} in the text above.",
        " Answer: According to the chain(s) of variable assignment in the text above, {num_v} variables are "
        "assgined the value {query}, they are: ",
    ),
    "common_words_extraction": (
        "Below is a numbered list of words. In these words, some appear more often than others. Memorize the "
        "ones that appear most often.\n{context}\nQuestion: What are the 10 most common words in the above list?",
        " Answer: The top 10 words that appear most often in the list are:",
    ),
    "freq_words_extraction": (
        "Read the following coded text and track the frequency of each coded word. Find the three most "
        "frequently appeared coded words. {context}\nQuestion: Do not provide any explanation. Please ignore "
        "the dots '....'. What are the three most frequently appeared words in the above coded text?",
        " Answer: According to the coded text above, the three most frequently appeared words are:",
    ),
    "qa": (
        "Answer the question based on the given documents. Only give me the answer and do not output any other "
        "words.\n\nThe following are given documents.\n\n{context}\n\nAnswer the question based on the "
        "given documents. Only give me the answer and do not output any other words.\n\nQuestion: {query}",
        " Answer:",
    ),
}


# -- the memorag-lite mode (memorag/lite/, memorag/modes/memorag_lite.py): the official MemoRAG's
# Lite prompts, reproduced exactly from the qhjqhj00/MemoRAG repository's prompt tables (`en_prompts`
# and `zh_prompts`: "gist", "context", "span", "sur", "qa", "sum"). LITE_GIST (field: context) asks for the
# gist of one window of the text; LITE_CONTEXT (field: context) holds the joined gists, the memory;
# the others follow it in the same user turn (field: question).
LITE_GIST = {
    "en": "Please summarize the core content of the following text, remove redundant information, and compress "
          "it into concise and accurate text. Retain all key facts and points. The language should be "
          "straightforward and concise, and do not use any formatting.\n\nText: {context}\n\nPlease output the "
          "core content directly.",
    "zh": "请总结以下文本的核心内容，删除冗余信息，压缩为简洁、准确的文本，保留所有关键事实和要点，语言直观、简明，不要使用任何格式。"
          "\n\n文本：{context}\n\n请直接输出核心内容。",
}
LITE_CONTEXT = {
    "en": "You are provided with a long article. Read the article carefully. After reading, you will be asked to "
          "perform specific tasks based on the content of the article.\n\nNow, the article begins:\n- **Article "
          "Content:** {context}\n\nThe article ends here.\n\nNext, follow the instructions provided to complete "
          "the tasks.",
    "zh": "你将获得一篇长文章。请仔细阅读这篇文章。阅读完成后，你将根据文章的内容执行特定任务。\n\n现在，文章开始：\n- **文章内容：** "
          "{context}\n\n文章到此结束。\n\n接下来，请按照给出的指示完成任务。",
}
LITE_QUESTIONS = {
    "en": "\nYou are given a question related to the article. To answer it effectively, you need to recall specific "
          "details from the article. Your task is to generate precise clue questions that can help locate the "
          "necessary information.\n\n### Question: {question}\n### Instructions:\n1. You have a general "
          "understanding of the article. Your task is to generate one or more specific clues that will help in "
          "searching for supporting evidence within the article.\n2. The clues are in the form of precise surrogate "
          "questions that clarify the original question.\n3. Only output the clues. If there are multiple clues, "
          "separate them with a newline.",
    "zh": "\n你会得到一个与文章相关的问题。为了有效地回答这个问题，你需要回想文章中的具体细节。你的任务是生成精确的线索问题，帮助找到文章中必要的信息。"
          "\n\n### 问题：{question}\n### 指示：\n1. 你对文章有一个大致的理解。你的任务是生成一个或多个具体的线索，帮助查找文章中的支持证据。"
          "\n2. 线索应以精确的替代问题形式呈现，澄清原问题。\n3. 只输出线索。如果有多个线索，请用换行符分隔。\n4. 请用中文回答。",
}
LITE_SPANS = {
    "en": "\nYou are given a question related to the article. To answer it effectively, you need to recall specific "
          "details from the article. Your task is to identify and extract one or more specific clue texts from the "
          "article that are relevant to the question.\n\n### Question: {question}\n### Instructions:\n1. You have "
          "a general understanding of the article. Your task is to generate one or more specific clues that will "
          "help in searching for supporting evidence within the article.\n2. The clues are in the form of text "
          "spans that will assist in answering the question.\n3. Only output the clues. If there are multiple "
          "clues, separate them with a newline.",
    "zh": "\n你会得到一个与文章相关的问题。为了有效地回答这个问题，你需要回想文章中的具体细节。你的任务是识别并提取文章中与问题相关的一个或多个具体线索文本。"
          "\n\n### 问题：{question}\n### 指示：\n1. 你对文章有一个大致的理解。你的任务是生成一个或多个具体的线索，帮助查找文章中的支持证据。"
          "\n2. 线索应以文本片段的形式呈现，这些片段将有助于回答问题。\n3. 只输出线索。如果有多个线索，请用换行符分隔。\n4. 请用中文回答。",
}
LITE_ANSWER = {
    "en": "\nYou are given a question related to the article. Your task is to answer the question directly.\n\n### "
          "Question: {question}\n### Instructions:\nProvide a direct answer to the question based on the article's "
          "content. Do not include any additional text beyond the answer.",
    "zh": "\n你会得到一个与文章相关的问题。你的任务是直接回答这个问题。\n\n### 问题：{question}\n### 指示：\n基于文章的内容，直接回答问题。"
          "不要包含除答案之外的任何额外内容。",
}
LITE_KEY_POINTS = {
    "en": "\nYour task is to create a concise summary of the long article by listing its key points. Each key point "
          "should be listed on a new line and numbered sequentially.\n\n### Requirements:\n\n- The key points "
          "should be brief and focus on the main ideas or events.\n- Ensure that each key point captures the most "
          "critical and relevant information from the article.\n- Maintain clarity and coherence, making sure the "
          "summary effectively conveys the essence of the article.\n",
    "zh": "\n你的任务是通过列出文章的关键点来创建一个简明的总结。每个关键点应按顺序逐行列出并编号。\n\n### 要求：\n\n- 关键点应简短，并着重于主要思想或事件。"
          "\n- 确保每个关键点都捕捉到文章中最重要和相关的信息。\n- 保持清晰连贯，确保摘要能有效传达文章的精髓。\n- 请用中文回答。",
}


LANGUAGES = ("en", "zh")


def fill(prompt: dict[str, str], language: str = "en", **fields: str) -> str:
    """The prompt in `language` (English when it has no such version) with its fields filled.

    Field values are inserted as they are; braces inside them are never read as fields.
    """
    template = prompt.get(language) or prompt["en"]
    return template.format(**fields)
