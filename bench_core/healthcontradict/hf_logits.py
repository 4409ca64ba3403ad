"""Local Hugging Face causal language models as a ``ChatModel`` that scores the next token (extra ``hf``).

HealthContradict scores a model by its next-token distribution after the prompt (paper Eq. 1-3):
the logits at the last position, restricted to the YES and NO label tokens. This adapter answers a
``ChatRequest`` with one forward pass and returns, as ``ChatResponse.logprobs``, one position whose
``top_logprobs`` are the label tokens with their log-probabilities over the whole vocabulary (the
``text`` is the vocabulary's argmax token, what greedy decoding would emit). Being a ``ChatModel``, it
runs under the one runner with its store, resume and progress bar; concurrent requests are gathered
into batches (``batch_size``) and scored together in a worker thread, left-padded, with position ids
taken from the attention mask so a padded prompt gets the same logits as the prompt alone.

Label tokens (``find_label_tokens``), recorded in the run manifest:

- ``variants`` (default): every single-token spelling of each label that can follow the prompt's
  ``Answer:`` cue: "YES", "Yes", "yes" and the same with a leading space (" Yes", which byte-level
  BPE tokenizers such as Llama 3 and Qwen spell "ĠYes" and SentencePiece tokenizers "▁Yes"). Each is
  found by tokenizing ``"Answer:" + form`` and taking what the form adds, so the id is the one the
  model would emit in context; a form that splits into several tokens is left out, because its first
  piece ("Y", "N") does not spell the label. The probability of a label is the sum over its
  spellings: after "Answer:" models put most of the mass on " Yes"/" No" rather than the
  upper-case "YES" the instruction asks for, and summing does not reward or punish a casing.
- ``original``: only the vocabulary tokens "YES" and "NO" (``convert_tokens_to_ids``), as the
  authors' ``b1_inference.py``, to reproduce the paper's numbers; refused if either is not a token.

Prompts are fed raw (no chat template), as the authors did, unless ``chat_template=True``. A prompt
longer than the context window is refused, never cut silently: the HealthContradict run truncates
documents beforehand and records it (``bench_core.healthcontradict.run``).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_core.healthcontradict.scoring import LABELS, SURFACE_FORMS
from bench_core.kernel.providers.base import ChatRequest, ChatResponse, ProviderError

LABEL_MODES = ("variants", "original")
ANSWER_CUE = "Answer:"


class HFUnavailableError(ImportError):
    """The ``hf`` extra (transformers + torch) is not installed."""


def _import_hf() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise HFUnavailableError(
            "local Hugging Face scoring needs the 'hf' extra: pip install 'medrev[hf]' "
            "(on a CPU-only machine install torch first, e.g. pip install torch==2.13.0)"
        ) from exc
    return torch, transformers


@dataclass(frozen=True)
class LabelTokens:
    """The token ids (and their vocabulary strings) that count for each label."""

    mode: str
    ids: dict[str, tuple[int, ...]]
    tokens: dict[str, tuple[str, ...]]

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "ids": {k: list(v) for k, v in self.ids.items()}, "tokens": dict(self.tokens)}


def find_label_tokens(tokenizer: Any, mode: str = "variants", *, cue: str = ANSWER_CUE) -> LabelTokens:
    """The label token ids for ``mode`` (see the module docstring); ValueError when a label has none."""
    if mode not in LABEL_MODES:
        raise ValueError(f"label mode must be one of {', '.join(LABEL_MODES)}; got {mode!r}")
    unk = getattr(tokenizer, "unk_token_id", None)
    ids: dict[str, list[int]] = {label: [] for label in LABELS}
    if mode == "original":
        for label, token in (("yes", "YES"), ("no", "NO")):
            token_id = tokenizer.convert_tokens_to_ids(token)
            if token_id is None or token_id == unk:
                raise ValueError(
                    f"label mode 'original' needs {token!r} as a single vocabulary token, and this tokenizer "
                    "has none; use the default label mode 'variants'"
                )
            ids[label].append(int(token_id))
    else:
        base = tokenizer.encode(cue, add_special_tokens=False)
        for label in LABELS:
            for form in SURFACE_FORMS[label]:
                for prefix in (" ", ""):
                    full = tokenizer.encode(cue + prefix + form, add_special_tokens=False)
                    if full[: len(base)] != base:
                        continue  # the form merged with the cue: no token of its own
                    added = full[len(base) :]
                    if len(added) == 1 and added[0] != unk and added[0] not in ids[label]:
                        ids[label].append(int(added[0]))
        missing = [label.upper() for label in LABELS if not ids[label]]
        if missing:
            raise ValueError(f"no single-token spelling of {', '.join(missing)} in this tokenizer's vocabulary")
        shared = set(ids["yes"]) & set(ids["no"])
        if shared:
            raise ValueError(f"token ids {sorted(shared)} spell both YES and NO")
    tokens = {label: tuple(tokenizer.convert_ids_to_tokens(list(values))) for label, values in ids.items()}
    return LabelTokens(mode, {k: tuple(v) for k, v in ids.items()}, tokens)


class HFLogitModel:
    """A local causal LM as a ``ChatModel`` returning label-token log-probabilities for the next token.

    ``model_dir`` is a folder written by ``save_pretrained`` (loaded with ``local_files_only``:
    nothing is downloaded). ``max_context_tokens`` overrides the context window taken from the
    config (``max_position_embeddings``). ``max_batch_tokens`` caps padded tokens per forward pass.
    """

    provider = "hf"

    def __init__(
        self,
        model_dir: str | Path,
        *,
        name: str | None = None,
        label_mode: str = "variants",
        batch_size: int = 4,
        max_batch_tokens: int | None = None,
        max_context_tokens: int | None = None,
        device: str = "auto",
        dtype: str = "auto",
        chat_template: bool = False,
    ) -> None:
        torch, transformers = _import_hf()
        self._torch = torch
        path = Path(model_dir).expanduser().resolve()
        if not path.is_dir():
            raise ValueError(f"{model_dir}: not a folder (expected a model saved with save_pretrained)")
        self.model_dir = path
        self.name = name or path.name
        self.endpoint = f"hf://{path}"
        self.batch_size = max(1, batch_size)
        self.max_batch_tokens = max_batch_tokens
        self.chat_template = chat_template
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: cannot load a tokenizer ({exc})") from exc
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            if tokenizer.eos_token_id is None:
                raise ValueError(f"{path}: the tokenizer has neither a pad nor an eos token to pad batches with")
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        if dtype == "auto":
            torch_dtype = torch.float16 if self.device.type == "cuda" else torch.float32
        else:
            torch_dtype = getattr(torch, dtype)
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch_dtype)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: cannot load a causal language model ({exc})") from exc
        self.model = model.to(self.device).eval()
        window = max_context_tokens or getattr(model.config, "max_position_embeddings", None)
        if window is None and 0 < getattr(tokenizer, "model_max_length", 0) < 10**8:
            window = tokenizer.model_max_length
        if not window:
            raise ValueError(f"{path}: unknown context window; give max_context_tokens")
        self.context_window = int(window)
        self.labels = find_label_tokens(tokenizer, label_mode)
        self._label_ids = [(label, token_id) for label in LABELS for token_id in self.labels.ids[label]]
        self._keep_last = "logits_to_keep" in inspect.signature(model.forward).parameters
        self._pending: list[tuple[str, asyncio.Future[ChatResponse]]] = []
        self._drainer: asyncio.Task[None] | None = None
        self._forward_lock = threading.Lock()
        # A fast (Rust) tokenizer is not safe to share between threads: padding a batch in the scoring
        # thread while the run fits documents in the event loop's thread fails with "Already borrowed".
        self._tokenizer_lock = threading.RLock()
        self.forward_passes = 0
        self.prompts_scored = 0

    # -- tokens (used by the HealthContradict run to fit documents into the window) ----------
    @property
    def token_counter_name(self) -> str:
        return f"hf-tokenizer:{self.tokenizer.name_or_path or self.model_dir.name}"

    def encode(self, text: str) -> list[int]:
        with self._tokenizer_lock:
            return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        with self._tokenizer_lock:
            return self.tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def prompt_tokens(self, prompt: str) -> int:
        """Tokens the model sees for ``prompt`` (special tokens included)."""
        with self._tokenizer_lock:
            return len(self.tokenizer(self._wrap(prompt))["input_ids"])

    def _wrap(self, prompt: str) -> str:
        if not self.chat_template:
            return prompt
        with self._tokenizer_lock:
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
            )

    # -- scoring ----------------------------------------------------------------------------
    def score_prompts(self, prompts: Sequence[str]) -> list[ChatResponse]:
        """Score prompts synchronously, in batches; one ``ChatResponse`` per prompt, in order."""
        results = self._score(prompts)
        for result in results:
            if isinstance(result, ProviderError):
                raise result
        return results  # type: ignore[return-value]

    def _score(self, prompts: Sequence[str]) -> list[ChatResponse | ProviderError]:
        """Like ``score_prompts``, but a prompt longer than the window gets its own error, not the batch's."""
        texts = [self._wrap(p) for p in prompts]
        with self._tokenizer_lock:
            lengths = [len(ids) for ids in self.tokenizer(texts)["input_ids"]]
        results: dict[int, ChatResponse | ProviderError] = {}
        for index, length in enumerate(lengths):
            if length > self.context_window:
                results[index] = ProviderError(
                    f"prompt of {length} tokens exceeds the context window of {self.context_window}",
                    retryable=False,
                    kind="context_length",
                )
        order = sorted((i for i in range(len(texts)) if i not in results), key=lambda i: lengths[i])
        batch: list[int] = []
        for index in order:
            longest = max(lengths[i] for i in [*batch, index])
            over = self.max_batch_tokens is not None and longest * (len(batch) + 1) > self.max_batch_tokens
            if batch and (len(batch) >= self.batch_size or over):
                results.update(zip(batch, self._forward([texts[i] for i in batch]), strict=True))
                batch = []
            batch.append(index)
        if batch:
            results.update(zip(batch, self._forward([texts[i] for i in batch]), strict=True))
        return [results[i] for i in range(len(texts))]

    def _forward(self, texts: list[str]) -> list[ChatResponse]:
        torch = self._torch
        with self._tokenizer_lock:
            encoded = self.tokenizer(texts, return_tensors="pt", padding=True)
        input_ids = encoded["input_ids"].to(self.device)
        mask = encoded["attention_mask"].to(self.device)
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        kwargs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": mask, "position_ids": positions}
        if self._keep_last:
            kwargs["logits_to_keep"] = 1
        with self._forward_lock, torch.inference_mode():
            logits = self.model(**kwargs).logits[:, -1, :].float()
            logprobs = torch.log_softmax(logits, dim=-1)
        self.forward_passes += 1
        self.prompts_scored += len(texts)
        ids = [token_id for _, token_id in self._label_ids]
        chosen = logprobs[:, ids].cpu().tolist()
        best = logprobs.argmax(dim=-1).cpu().tolist()
        best_lp = logprobs.max(dim=-1).values.cpu().tolist()
        with self._tokenizer_lock:
            names = {token_id: self.tokenizer.convert_ids_to_tokens(token_id) for _, token_id in self._label_ids}
            greedy_texts = [self.tokenizer.decode([token_id]) for token_id in best]
        responses = []
        for row in range(len(texts)):
            top = [
                {"token": names[token_id], "id": token_id, "logprob": chosen[row][k]}
                for k, (_, token_id) in enumerate(self._label_ids)
            ]
            greedy = greedy_texts[row]
            entry = {"token": greedy, "id": best[row], "logprob": best_lp[row], "top_logprobs": top}
            responses.append(
                ChatResponse(
                    text=greedy,
                    finish_reason="length",
                    usage={"prompt_tokens": int(mask[row].sum().item()), "completion_tokens": 1},
                    model=self.name,
                    logprobs=(entry,),
                )
            )
        return responses

    # -- ChatModel --------------------------------------------------------------------------
    def _prompt_of(self, request: ChatRequest) -> str:
        users = [m for m in request.messages if m.get("role") == "user"]
        if len(request.messages) != 1 or len(users) != 1 or not isinstance(users[0].get("content"), str):
            raise ProviderError(
                "the hf scorer takes exactly one user message (a raw prompt)", retryable=False, kind="request"
            )
        return users[0]["content"]

    async def complete(self, request: ChatRequest, *, timeout: float | None = None) -> ChatResponse:
        prompt = self._prompt_of(request)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ChatResponse] = loop.create_future()
        self._pending.append((prompt, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            for _ in range(20):  # let callers woken by the last batch queue their next prompt
                if len(self._pending) >= self.batch_size:
                    break
                await asyncio.sleep(0)
            batch = [entry for entry in self._pending[: self.batch_size] if not entry[1].done()]
            del self._pending[: self.batch_size]
            if not batch:
                continue
            try:
                outcomes = await asyncio.to_thread(self._score, [prompt for prompt, _ in batch])
            except Exception as exc:  # out of memory, a model bug: fail these calls, keep serving
                error = ProviderError(f"{type(exc).__name__}: {exc}", retryable=False, kind="hf")
                outcomes = [error] * len(batch)
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if future.done():
                    continue
                if isinstance(outcome, ProviderError):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)

    async def aclose(self) -> None:
        if self._drainer is not None and not self._drainer.done():
            self._drainer.cancel()
            await asyncio.gather(self._drainer, return_exceptions=True)
        self._drainer = None
