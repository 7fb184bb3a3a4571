"""Quantization-aware training runs, on top of the front door :mod:`common.quantization` (which attaches the
quantizers of :mod:`common.quantizers`): the run skeleton shared by every QAT method (:mod:`common.qat.run`), the
BF16 warmup of W8A8 QAT (:class:`BF16Warmup`), seeds as a level of a training cell's path (:mod:`common.qat.seeds`)
and the checkpoint folders of low-bit QAT runs (:func:`load_lowbit_model`, :mod:`common.qat.lowbit_io`)."""

from common.lazy import lazy_exports

# torch and the training loop on first use
__getattr__, __dir__, _LAZY = lazy_exports(__name__, {
    "lowbit_io": ("load_lowbit_model",),
    "warmup": ("BF16Warmup",),
})

__all__ = [*_LAZY]
