"""Tiny random models built from a config (no download), shared by the tests."""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from pass_core.runtime.models import LoadedModel

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level tokenizer: 256 byte tokens plus 3 specials (V = 259)."""
    byte_vocab = {ch: i for i, ch in enumerate(pre_tokenizers.ByteLevel.alphabet())}
    byte_vocab = {ch: i for i, ch in enumerate(sorted(byte_vocab))}
    tok = Tokenizer(models.BPE(vocab=byte_vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                   pad_token="<|pad|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_model(vocab_size: int, seed: int = 0, layers: int = 2, hidden: int = 64) -> LlamaForCausalLM:
    """A random Llama with a small width; logits scaled up so distributions are peaked enough."""
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, tie_word_embeddings=False, bos_token_id=None,
                         eos_token_id=None, pad_token_id=None)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)  # sharper next-token distributions than the default init
    model.eval().requires_grad_(False)
    return model


def tiny_loaded(seed: int = 0, eos: bool = False, **kw) -> LoadedModel:
    """A ``LoadedModel`` around a tiny random Llama. ``eos=False`` removes the EOS id so runs
    go on to max_new_tokens (a random model would stop at random places otherwise)."""
    tokenizer = tiny_tokenizer()
    model = tiny_model(len(tokenizer), seed=seed, **kw)
    model.generation_config.eos_token_id = tokenizer.eos_token_id if eos else None
    if not eos:
        tokenizer.eos_token = None
    return LoadedModel(model=model, tokenizer=tokenizer, name=f"tiny-llama-{seed}", source="random init",
                       device=torch.device("cpu"), dtype=torch.float32)


def save_tiny(folder: Path, seed: int = 0) -> Path:
    """Write a tiny model + tokenizer folder (loadable with ``load_model(str(folder))``)."""
    tokenizer = tiny_tokenizer()
    model = tiny_model(len(tokenizer), seed=seed)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
