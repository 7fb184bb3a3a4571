"""Post-training quantization of Hugging Face causal LMs: fake quantization of selected layers and quantized
checkpoints (element codes + block scales, rebuilt bit-exactly). A recipe is applied to a model through the front
door, :func:`common.quantization.quantize_`.

>>> recipe = get_recipe("NVFP4", activations=True)                             # doctest: +SKIP
>>> names = select_linears(model, skip_proportion=(3 / 26, 2 / 26))            # doctest: +SKIP
>>> with quantize_(model, recipe, names=names):                                # doctest: +SKIP
...     logits = model(input_ids).logits                                       # model restored on exit
>>> save_quantized_checkpoint(model, tokenizer, recipe, names, "out/nvfp4")    # doctest: +SKIP
>>> qmodel, handle = load_quantized_checkpoint("out/nvfp4")                    # doctest: +SKIP
>>> qmodel = common.models.load_causal_lm("out/nvfp4")                         # doctest: +SKIP
>>> import common.ptq.hf                                                        # doctest: +SKIP
>>> qmodel = transformers.AutoModelForCausalLM.from_pretrained("out/nvfp4")     # doctest: +SKIP

:mod:`common.ptq.checkpoint` registers the checkpoint kind ``"quantized"`` with :func:`common.models.load_checkpoint`
(which imports it when it loads a folder). This package registers nothing with transformers: ``import
common.ptq.hf`` registers the quantization method ``"lowbit-lab"``, after which ``from_pretrained`` loads a quantized
checkpoint as :func:`load_quantized_checkpoint` does; without that import ``from_pretrained`` fails loudly on the
folder (:mod:`common.ptq.hf`).

Command line: ``python -m common.ptq checkpoint --model DIR --recipe NVFP4 --out DIR`` (:mod:`common.ptq.cli`).
"""

from common.recipes import QuantRecipe, QuantSpec
from common.select import DEFAULT_INCLUDE, block_index, num_blocks, select_linears

from .checkpoint import (
    checkpoint_size_bytes,
    dequantize_weight,
    load_quantized_checkpoint,
    read_quantization_config,
    save_quantized_checkpoint,
    size_report,
)

__all__ = [
    "DEFAULT_INCLUDE",
    "QuantRecipe",
    "QuantSpec",
    "block_index",
    "checkpoint_size_bytes",
    "dequantize_weight",
    "load_quantized_checkpoint",
    "num_blocks",
    "read_quantization_config",
    "save_quantized_checkpoint",
    "select_linears",
    "size_report",
]
