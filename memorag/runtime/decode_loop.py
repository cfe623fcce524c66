"""The one decode loop: sequences join and leave a running batch, each step picks every sequence's next
token (docs/memory-model.md, "Decoding").

`DecodeBatch` is the loop, over any model's rows (`DecodeRows`: `prefill` the sequences that join,
`decode_step` one token per running sequence, `remove` one that leaves): the memory model's
(`MemoryRows`, memorag/memory/decoding.py) and a plain causal LM's with a KV cache (the generator's,
memorag/generation/batched.py). It knows no model, so it sits under both packages. A sequence joins between steps, prefilled with the others that join
at that step; it leaves when it stops, reaches its budget or its caller drops it.

`Sampling` says how a token is chosen from a sequence's next-token logits: greedy (the
likeliest, the first of a tie) or drawn after a temperature, top-k and top-p, each sequence
from a `torch.Generator` of its own (seeded from `seed` and its index in the call, so no
global random state is read or changed); a repetition penalty applies to both, as
transformers' `generate` applies it (every id the sequence has seen, the prompt's included,
score divided by the penalty where positive and multiplied where negative), and so does an
`opening_bias`, amounts added to a few ids' scores when a reply's first token is chosen (the
reader's refusal margin, memorag/generation/local.py). `Stops` says when a
reply ends: a stop token (never part of the reply), a stop string (the reply ends with the
token that completes it) or the token budget. Nothing here knows of a model; the loop
calls `choose_token` once per sequence per step.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

# (the sequence's ids [1, L], its scores [1, V]) -> scores [1, V]: transformers' logits-processor protocol
LogitsProcessor = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
# (the sequence's ids [1, L] with its new token, the scores that token was chosen from [1, V]) -> [1] bool:
# transformers' stopping-criteria protocol; True ends the sequence after that token
StoppingCriterion = Callable[[torch.Tensor, torch.Tensor], Any]


@dataclass(frozen=True)
class Sampling:
    """Greedy unless `do_sample` with a `temperature` above 0; `top_k` 0 keeps every token."""

    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    seed: int | None = None
    opening_bias: tuple[tuple[int, float], ...] = ()
    """(token id, amount) pairs: each amount is added to that id's score when a reply's first token is chosen."""

    def __post_init__(self) -> None:
        if not 0 <= self.temperature < math.inf:
            raise ValueError(f"temperature={self.temperature} must be a finite number, 0 or above (0: greedy)")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p={self.top_p} must be in (0, 1]")
        if self.top_k < 0:
            raise ValueError(f"top_k={self.top_k} must be 0 (every token) or more")
        if not 0 < self.repetition_penalty < math.inf:
            raise ValueError(f"repetition_penalty={self.repetition_penalty} must be a finite number above 0")
        if any(not math.isfinite(amount) for _, amount in self.opening_bias):
            raise ValueError(f"opening_bias={self.opening_bias}: each amount must be a finite number")

    @property
    def greedy(self) -> bool:
        return not (self.do_sample and self.temperature > 0)

    def generator(self, index: int, device: torch.device) -> torch.Generator | None:
        """The random numbers of the `index`-th sequence of a call: seeded with `seed + index` (a fresh
        seed without `seed`); None when greedy."""
        if self.greedy:
            return None
        generator = torch.Generator(device=device)
        if self.seed is None:
            generator.seed()
        else:
            generator.manual_seed(self.seed + index)
        return generator


GREEDY = Sampling()


@dataclass(frozen=True)
class Stops:
    """What ends a reply: `token_ids`, or a `strings` entry appearing in the reply's text (`text_of` turns
    the reply's ids into text; needed with `strings`)."""

    token_ids: frozenset[int] = frozenset()
    strings: tuple[str, ...] = ()
    text_of: Callable[[list[int]], str] | None = None

    @classmethod
    def of(cls, token_ids: Sequence[int], strings: Sequence[str] = (),
           text_of: Callable[[list[int]], str] | None = None) -> Stops:
        if strings and text_of is None:
            raise ValueError("stop strings need the tokenizer's text of the reply; this model has no tokenizer")
        if any(not text for text in strings):
            raise ValueError("a stop string must not be empty")
        return cls(frozenset(int(token) for token in token_ids), tuple(strings), text_of)

    def ends_text(self, new_ids: list[int]) -> bool:
        """Whether the reply `new_ids` contains a stop string."""
        if not self.strings:
            return False
        assert self.text_of is not None
        text = self.text_of(new_ids)
        return any(string in text for string in self.strings)


def choose_token(logits: torch.Tensor, sampling: Sampling, seen: torch.Tensor | None,
                 generator: torch.Generator | None, banned: Sequence[int] = (),
                 processors: Sequence[LogitsProcessor] = (), opening: bool = False) -> tuple[int, torch.Tensor]:
    """The next token from one sequence's logits [V], in float32: the repetition penalty over `seen` [1, L]
    (the ids so far; None: no penalty), the sampling's `opening_bias` when `opening` (the reply's first token),
    `banned` ids made impossible (stop tokens before `min_new_tokens`), `processors` called with (`seen`,
    scores), then greedy or a draw. Returns the token and the scores [1, V] it was chosen from (before
    temperature and filtering)."""
    scores = logits.detach().to(torch.float32).reshape(1, -1)
    if sampling.repetition_penalty != 1.0 and seen is not None:
        index = seen.to(scores.device)
        picked = torch.gather(scores, 1, index)
        penalty = sampling.repetition_penalty
        scores = scores.scatter(1, index, torch.where(picked < 0, picked * penalty, picked / penalty))
    if opening and sampling.opening_bias:
        ids, amounts = zip(*sampling.opening_bias, strict=True)
        scores = scores.index_add(1, torch.tensor(ids, device=scores.device),
                                  torch.tensor([amounts], dtype=scores.dtype, device=scores.device))
    if banned:
        scores = scores.index_fill(1, torch.tensor(list(banned), device=scores.device), -math.inf)
    for processor in processors:
        scores = processor(seen, scores)
    if sampling.greedy:
        return int(scores.argmax(-1)), scores
    return _draw(scores, sampling, generator), scores


# tokens ranked before a full sort: a nucleus inside them is found without sorting the vocabulary
CANDIDATES = 1024


def _draw(scores: torch.Tensor, sampling: Sampling, generator: torch.Generator | None) -> int:
    """A token drawn from scores [1, V] after the temperature, top-k and top-p (the likeliest token always stays).
    The filters keep a prefix of the tokens ranked by score: when the `CANDIDATES` likeliest hold it (the top-k
    within them, or their probability reaching top-p), only they are ranked, else the whole vocabulary."""
    scores = scores / sampling.temperature
    probabilities = scores.softmax(-1)
    if not (sampling.top_k or sampling.top_p < 1.0):
        ranked, order = probabilities, None  # no filter: a draw over the whole vocabulary, nothing ranked
    else:
        candidates = min(CANDIDATES, scores.shape[-1])
        ranked, order = probabilities.topk(candidates, dim=-1)  # [1, C], the likeliest first
        if not ((0 < sampling.top_k <= candidates) or float(ranked.sum()) >= sampling.top_p):
            ranked, order = probabilities.sort(dim=-1, descending=True)
    keep = torch.ones_like(ranked, dtype=torch.bool)
    if sampling.top_k:
        keep[:, sampling.top_k:] = False
    if sampling.top_p < 1.0:
        keep &= ranked.cumsum(-1) - ranked < sampling.top_p  # the probability of the tokens ranked above
    keep[:, 0] = True
    drawn = torch.multinomial(ranked.masked_fill(~keep, 0.0), 1, generator=generator)  # [1, 1]
    return int(drawn[0, 0]) if order is None else int(order[0, drawn[0, 0]])


class DecodeRows(Protocol):
    """A model's state for the rows of a batch, in the order they joined (each row one sequence)."""

    def prefill(self, prompts: Sequence[Any], max_new_tokens: Sequence[int]) -> torch.Tensor:
        """Read each prompt (each alone: as if decoded by itself) as new last rows, with room for its
        `max_new_tokens`; their next-token logits [n, V]."""

    def decode_step(self, tokens: list[int]) -> torch.Tensor:
        """Read `tokens[i]` into row i, every row in one step; their next-token logits [n, V]."""

    def remove(self, index: int) -> None:
        """Drop row `index`."""

    def prompt_ids(self, prompt: Any) -> Sequence[int]:
        """The token ids of `prompt` (what a repetition penalty counts as seen)."""


class SharedBatch(Protocol):
    """A running batch that many callers' sequences join (the server's, memorag/serve/batching.py): a model
    view made by `decoding_through(shared)` (`MemoryModel`, `LocalGenerator`) sends its greedy decodings
    there instead of running the loop itself; the model it was made from is left as it was."""

    def decode(self, prompts: Sequence[Any], max_new_tokens: int,
               on_token: Callable[[int], None] | None = None) -> list[list[int]]:
        """The greedy tokens of each prompt (as the batch's rows read it), each ending before its first stop
        token; `on_token` (one prompt only) gets each token as it comes."""


@dataclass
class Request:
    """One sequence a caller asks for: its key in the batch, the prompt the rows read, its budget, and
    what else ends or watches it (`processors` and `criteria` follow transformers' protocols)."""

    key: Hashable
    prompt: Any
    max_new_tokens: int
    min_new_tokens: int = 0
    on_token: Callable[[int], None] | None = None
    processors: Sequence[LogitsProcessor] = ()
    criteria: Sequence[StoppingCriterion] = ()


@dataclass
class DecodeRow:
    """A running sequence: its request, the token it chose next, the tokens it took, the ids it has seen
    (kept only where something reads them) and its random numbers."""

    request: Request
    next_token: int = -1
    new_ids: list[int] = field(default_factory=list)
    seen: list[int] | None = None
    generator: torch.Generator | None = None
    scores: torch.Tensor | None = None  # [1, V] what `next_token` was chosen from

    @property
    def key(self) -> Hashable:
        return self.request.key


class DecodeBatch:
    """Sequences decoded together; `join`, `leave` and `step` are called from one thread."""

    def __init__(self, rows: DecodeRows, stops: Stops, sampling: Sampling = GREEDY):
        self.engine = rows
        self.stops = stops
        self.sampling = sampling
        self.rows: list[DecodeRow] = []
        self.steps_by_size: Counter[int] = Counter()  # rows per step -> steps taken with that many
        self._joined = 0  # sequences joined so far: each one's index for its random numbers

    def __len__(self) -> int:
        return len(self.rows)

    def join(self, key: Hashable, prompt: Any, max_new_tokens: int, **options) -> DecodeRow:
        """`join_all` of one sequence (`options`: the other fields of a `Request`)."""
        return self.join_all([Request(key, prompt, max_new_tokens, **options)])[0]

    def join_all(self, requests: Sequence[Request]) -> list[DecodeRow]:
        """Prefill the requests' prompts (each as alone) and add them to the batch; their first tokens are chosen here."""
        keys = [row.key for row in self.rows]
        for request in requests:
            if request.key in keys:
                raise ValueError(f"a prompt with the key {request.key!r} is already decoding; give each its own key")
            if request.max_new_tokens < 1:
                raise ValueError(f"max_new_tokens={request.max_new_tokens}: a prompt to decode needs at least 1")
            keys.append(request.key)
        if not requests:
            return []
        logits = self.engine.prefill([request.prompt for request in requests],
                                     [request.max_new_tokens for request in requests])
        joined = []
        for request, row_logits in zip(requests, logits, strict=True):
            row = DecodeRow(request, generator=self.sampling.generator(self._joined, row_logits.device))
            self._joined += 1
            if self.sampling.repetition_penalty != 1.0 or request.processors or request.criteria:
                row.seen = [int(token) for token in self.engine.prompt_ids(request.prompt)]
            row.next_token = self._choose(row, row_logits)
            self.rows.append(row)
            joined.append(row)
        return joined

    def leave(self, key: Hashable) -> None:
        """Drop the sequence `key` from the batch (unknown keys are an error: a caller's bookkeeping is off)."""
        index = next((i for i, row in enumerate(self.rows) if row.key == key), None)
        if index is None:
            raise ValueError(f"no prompt with the key {key!r} is decoding")
        self.rows.pop(index)
        self.engine.remove(index)

    def step(self) -> list[DecodeRow]:
        """Take each row's chosen token; rows that end (a stop, the budget) leave and are returned; the
        others get their next token from one step of the whole batch."""
        finished = [row for row in self.rows if self._take(row)]
        for row in finished:
            self.leave(row.key)
        if self.rows:
            self.steps_by_size[len(self.rows)] += 1
            logits = self.engine.decode_step([row.next_token for row in self.rows])
            for row, row_logits in zip(self.rows, logits, strict=True):
                row.next_token = self._choose(row, row_logits)
        return finished

    def run(self, requests: Sequence[Request], on_step: Callable[[list[int]], None] | None = None) -> list[list[int]]:
        """Join `requests` and step until every sequence ended; each one's new ids, in order. `on_step` is
        told the tokens the running sequences chose, once after the prefill and once after each step
        (a stop token among them, as transformers' streamers are)."""
        rows = self.join_all(requests)
        while self.rows:
            if on_step is not None:
                on_step([row.next_token for row in self.rows])
            self.step()
        return [row.new_ids for row in rows]

    def _choose(self, row: DecodeRow, logits: torch.Tensor) -> int:
        seen = torch.tensor([row.seen], dtype=torch.long) if row.seen is not None else None
        banned = sorted(self.stops.token_ids) if len(row.new_ids) < row.request.min_new_tokens else ()
        token, row.scores = choose_token(logits, self.sampling, seen, row.generator, banned, row.request.processors,
                                         opening=not row.new_ids)
        return token

    def _take(self, row: DecodeRow) -> bool:
        """Record the row's chosen token; True when the row ends."""
        token = row.next_token
        if token in self.stops.token_ids:
            return True
        row.new_ids.append(token)
        if row.seen is not None:
            row.seen.append(token)
        if row.request.on_token is not None:
            row.request.on_token(token)
        if len(row.new_ids) >= row.request.max_new_tokens or self.stops.ends_text(row.new_ids):
            return True
        if row.request.criteria:
            ids = torch.tensor([row.seen], dtype=torch.long)
            return any(bool(torch.as_tensor(criterion(ids, row.scores)).all()) for criterion in row.request.criteria)
        return False
