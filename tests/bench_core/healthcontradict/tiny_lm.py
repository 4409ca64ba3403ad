"""A tiny causal language model built offline: a byte-level BPE tokenizer trained here, random Llama weights.

Nothing is downloaded. The tokenizer is trained on a few sentences that contain the label spellings
the HealthContradict scorer looks for, so " Yes", "Yes", "YES", " no" ... become single tokens, while
" yes" is left out of the corpus on purpose and splits into pieces (the scorer must skip it). A BOS
token is prepended by the post-processor, as Llama tokenizers do.
"""

from __future__ import annotations

from pathlib import Path

CORPUS = [
    "Answer: Yes",
    "Answer: No",
    "Answer:YES",
    "Answer:NO",
    "Answer: YES",
    "Answer: NO",
    "Answer:Yes",
    "Answer:No",
    "Answer:yes",
    "Answer:no",
    "Answer: no",
    "Question: Can coffee help you lose weight? Context: green coffee is useful for weight loss.",
    "Answer the following question with only YES or NO based on your parametric knowledge.",
    "Answer the following question with only YES or NO based on the given contextual knowledge.",
    "Does vitamin C cure the common cold? Of course not! Studies show no benefit for treatment.",
    "Cell phones do not cause cancer according to large cohort studies of mobile phone users.",
]


def build_tiny_lm(target: Path, *, seed: int = 0, max_positions: int = 512) -> Path:
    """Write tokenizer and model files to ``target`` (``from_pretrained`` loads them offline)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        min_frequency=1,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CORPUS * 5, trainer=trainer)
    bos = tokenizer.token_to_id("<s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token=None)
    target.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(target)

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        bos_token_id=bos,
        eos_token_id=tokenizer.token_to_id("</s>"),
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # spread the output logits so label probabilities are far from 0.5
        model.lm_head.weight.mul_(40.0)
    model.save_pretrained(target)
    return target
