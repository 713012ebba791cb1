"""``--model``: which chat model plays the learner.

* ``test``: ``langgraph_combee.testing.fake_learner()``, deterministic and offline;
* ``local:1.5b`` / ``local:0.5b``: a small local model from
  ``langgraph_combee.local.local_chat_model(size)`` (the ``[local]`` extra);
* ``provider:name``: anything ``init_chat_model`` accepts (``openai:gpt-4.1-mini``...).
"""

from __future__ import annotations

import importlib

from langchain_core.language_models import BaseChatModel

from langgraph_combee._errors import ConfigurationError, MissingExtraError

LOCAL_SIZES = ("1.5b", "0.5b")
MODEL_HELP = (
    "The learner LLM: 'test' (offline scripted learner), 'local:1.5b' / 'local:0.5b' "
    "(small local model, \\[local] extra) or 'provider:name' for init_chat_model."
)


def resolve_model(spec: str) -> BaseChatModel:
    """Build the chat model a ``--model`` value names.

    Resolved here, before any store is opened, so that a bad model leaves no
    new store file behind.

    Raises:
        ConfigurationError: When the value names no model ``init_chat_model``
            can build, or no known local size.
        MissingExtraError: When a local model is asked for without the ``[local]`` extra.
    """
    spec = spec.strip()
    if spec == "test":
        from langgraph_combee.testing import fake_learner

        return fake_learner()
    if spec.startswith("local:"):
        return _local(spec)
    if not spec:
        raise ConfigurationError("--model", spec, "test, local:SIZE or provider:name")
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(spec)
    except Exception as exc:  # ImportError, ValueError, a provider's own config errors alike
        raise ConfigurationError(
            "--model", spec, f"a 'provider:name' init_chat_model can build ({exc})"
        ) from exc


def _local(spec: str) -> BaseChatModel:
    size = spec.removeprefix("local:")
    if size not in LOCAL_SIZES:
        raise ConfigurationError("--model", spec, f"local:{' or local:'.join(LOCAL_SIZES)}")
    try:
        module = importlib.import_module("langgraph_combee.local")
        factory = module.local_chat_model
    except (ImportError, AttributeError) as exc:
        raise MissingExtraError("local", f"--model {spec}") from exc
    model = factory(size)
    if not isinstance(model, BaseChatModel):
        raise ConfigurationError("--model", spec, "a local model that is a BaseChatModel")
    return model
