"""What the models are asked and how answers are read: the prompts (`prompts`), the chat layout a
template renders (`chat_layout`), the clue text (`clues`), the answer forms a task expects
(`answer_forms`) and the checks of an answer against its evidence (`answer_check`)."""
