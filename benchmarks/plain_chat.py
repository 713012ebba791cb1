"""A user's own model, live: a plain ``ChatOpenAI`` on the local server, ``Combee``'s defaults.

What a user of Ollama, LM Studio or vLLM would do: point ``ChatOpenAI`` at their
server, build a ``create_agent`` agent with ``combee.middleware()``, run it,
report each run's ground truth with ``combee.feedback``, and let the background
learner learn. Nothing from ``langgraph_combee.local`` reaches the learner
(``LocalModel`` only starts the server), and no ``Combee`` setting is changed.

Two tasks: ticket routing (``langgraph_combee.tasks``) and a clinic-desk task
written for this benchmark (queue codes for a veterinary clinic's messages),
which the prompts were never tuned on. For each: held-out accuracy with no
playbook, with the hand-written rules (the ceiling), and with the learned one
after one pass over the training examples.

    python -m benchmarks.plain_chat            # both tasks, about 15 minutes on 2 cores

Writes ``benchmarks/results/plain_chat.json``.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks._common import RESULTS, command, machine_info, write_json
from langgraph_combee._rules.rules import conflicts

MODULE = "benchmarks.plain_chat"

_CODE = re.compile(r"\b[A-Z]{2,5}-[0-9A-Z]{1,3}\b")


@dataclass(frozen=True)
class Case:
    """One message and its right queue code."""

    text: str
    code: str
    family: str


@dataclass(frozen=True)
class Desk:
    """A routing task: its prompt, its rules and its examples."""

    name: str
    system_prompt: str
    rules: str
    train: list[Case]
    test: list[Case]

    def score(self, reply: str, case: Case) -> bool:
        """The first code-looking token of the reply, upper-cased, against the truth."""
        found = _CODE.search(reply.upper())
        return found is not None and found.group(0) == case.code


# A veterinary clinic's front desk: eight queues with codes no model can guess.
_CLINIC = {
    "vaccines": ("Vaccinations and booster shots", "VAX-2",
        ["Is {pet} due for the rabies booster soon?",
         "I would like to book the yearly shots for {pet}.",
         "Can {pet} get the kennel cough vaccine next week?",
         "When should the puppy vaccinations for {pet} start?"],
        ["{pet} needs the annual jabs, what dates are free?",
         "Do you still do the leptospirosis vaccine for dogs like {pet}?"]),
    "refills": ("Repeat prescriptions and medication refills", "RX-11",
        ["{pet} is almost out of the heart pills, can I get more?",
         "Please renew the thyroid medication for {pet}.",
         "Could you refill the flea tablets you gave {pet} last time?",
         "I need another bottle of the ear drops for {pet}."],
        ["The arthritis medicine for {pet} runs out on Friday.",
         "Can the vet sign a new prescription for {pet}'s insulin?"]),
    "billing": ("Invoices, payments and insurance claims", "ACCT-3",
        ["I was charged twice for {pet}'s visit.",
         "Can you send the invoice for {pet}'s surgery to my insurer?",
         "Do you take payment plans for {pet}'s treatment?",
         "The bill for {pet} looks higher than the estimate."],
        ["My pet insurance needs an itemised receipt for {pet}.",
         "How do I pay the balance left on {pet}'s account?"]),
    "urgent": ("Injuries, poisoning and emergencies", "URG-0",
        ["{pet} just ate chocolate, what do I do?",
         "{pet} was hit by a bike and is limping badly.",
         "{pet} is bleeding from the paw and will not stop.",
         "{pet} collapsed and is breathing strangely."],
        ["{pet} swallowed a sock an hour ago and keeps retching.",
         "There is a deep cut on {pet}'s leg from a fence."]),
    "grooming": ("Grooming, baths and nail trims", "GRM-5",
        ["Can {pet} have a bath and a trim on Saturday?",
         "{pet}'s nails are too long, do you clip them?",
         "I want {pet}'s coat shaved for the summer.",
         "Do you do de-matting for long-haired cats like {pet}?"],
        ["{pet} smells awful, can your groomer wash him?",
         "Is there a slot for a full groom for {pet} this month?"]),
    "boarding": ("Boarding and pet hotel stays", "BRD-7",
        ["We go on holiday in July, can {pet} stay with you?",
         "How much is a week of boarding for {pet}?",
         "Is there room for {pet} to board over Christmas?",
         "Can {pet} stay overnight while we move house?"],
        ["We need somewhere for {pet} to sleep for ten nights in August.",
         "Do you have kennel space for {pet} during our trip?"]),
    "microchip": ("Microchips and pet registration details", "CHIP-4",
        ["We moved, please update {pet}'s microchip address.",
         "Can you scan {pet} to check the chip still works?",
         "I adopted {pet}, how do I put the chip in my name?",
         "{pet} needs a microchip before we travel abroad."],
        ["The chip database still shows the old phone number for {pet}.",
         "Could {pet} be chipped at the next appointment?"]),
    "results": ("Lab and test results", "LAB-9",
        ["Are {pet}'s blood test results back yet?",
         "What did the urine sample from {pet} show?",
         "The vet took a biopsy from {pet}, any news?",
         "When will the x-ray report for {pet} be ready?"],
        ["Has the lab sent anything about {pet}'s stool sample?",
         "I am still waiting to hear about {pet}'s thyroid test."]),
}  # fmt: skip
_PETS = ("Biscuit", "Luna", "Max", "Pepper", "Milo", "Daisy", "Rocky", "Nala", "Oscar", "Willow")
_OPENERS = ("Hi,", "Hello there.", "Good morning!", "Hey,", "")
_CLOSERS = ("Thanks.", "Many thanks, Sam", "Cheers!", "Regards, J.", "")


def clinic_desk(seed: int = 0) -> Desk:
    """The clinic-desk task: 32 training and 16 held-out messages (disjoint templates)."""
    rng = random.Random(seed)

    def fill(template: str, family: str, code: str) -> Case:
        text = " ".join(
            part
            for part in (
                rng.choice(_OPENERS),
                template.format(pet=rng.choice(_PETS)),
                rng.choice(_CLOSERS),
            )
            if part
        )
        return Case(text, code, family)

    train, test = [], []
    for family, (_, code, train_t, test_t) in _CLINIC.items():
        train += [fill(t, family, code) for t in train_t]
        test += [fill(t, family, code) for t in test_t]
    rng.shuffle(train)
    rng.shuffle(test)
    rules = "Queues:\n" + "\n".join(f"- {label}: {code}" for label, code, _, _ in _CLINIC.values())
    prompt = (
        "You are the front desk assistant of a veterinary clinic. Read the client's "
        "message and reply with the code of the queue that must handle it, and nothing else."
    )
    return Desk("clinic", prompt, rules, train, test)


def tickets_desk(n_train: int, n_test: int, seed: int = 0) -> Desk:
    """Ticket routing from ``langgraph_combee.tasks``, as a ``Desk``."""
    from langgraph_combee.tasks import get_task

    task = get_task("tickets")

    def cases(split: str, n: int) -> list[Case]:
        return [
            Case(e.input, e.answer, e.meta.get("rule", ""))
            for e in task.examples(n, seed, split)  # type: ignore[arg-type]
        ]

    return Desk(
        "tickets", task.prompt(), task.rules, cases("train", n_train), cases("test", n_test)
    )


def _messages(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def run_all(agent: Any, cases: Sequence[Case], concurrency: int) -> list[tuple[str, str]]:
    """Run every case (in parallel); return (run_id, reply) per case ("" for a failed run)."""
    ids = [str(uuid.uuid4()) for _ in cases]
    configs = [{"run_id": uuid.UUID(i), "max_concurrency": concurrency} for i in ids]
    results = agent.batch([_messages(c.text) for c in cases], configs, return_exceptions=True)
    out = []
    for run_id, result in zip(ids, results, strict=True):
        text = "" if isinstance(result, BaseException) else str(result["messages"][-1].text)
        out.append((run_id, text))
    return out


def accuracy(desk: Desk, replies: Sequence[tuple[str, str]], cases: Sequence[Case]) -> float:
    """Fraction of cases answered right."""
    right = [desk.score(text, case) for (_, text), case in zip(replies, cases, strict=True)]
    return sum(right) / len(right) if right else 0.0


def wait_until_learned(combee: Any, fed: int, timeout: float) -> dict[str, Any]:
    """Wait until the background learner has taken every fed trace (or ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = combee.learner.describe()
        if stats["traces_learned"] + stats["traces_dropped"] >= fed:
            break
        time.sleep(2.0)
    return dict(combee.learner.describe())


def one_task(
    desk: Desk,
    agent_model: Any,
    learner_model: Any,
    *,
    concurrency: int,
    timeout: float,
    log: Callable[[str], None],
    examples: int = 0,
    source: str | None = None,
) -> dict[str, Any]:
    """v0, the ceiling, one live pass of learning, and the learned prompt, on held-out cases.

    ``examples`` > 0 turns on worked examples (``AlgorithmSettings.examples``);
    ``source`` is passed to ``combee.feedback`` when given.
    """
    from langchain.agents import create_agent

    from langgraph_combee import AlgorithmSettings, Combee

    def agent(system_prompt: str, middleware: Sequence[Any] = ()) -> Any:
        return create_agent(
            agent_model, tools=[], system_prompt=system_prompt, middleware=list(middleware)
        )

    v0 = accuracy(desk, run_all(agent(desk.system_prompt), desk.test, concurrency), desk.test)
    ceiling_prompt = f"{desk.system_prompt}\n\n{desk.rules}"
    ceiling = accuracy(desk, run_all(agent(ceiling_prompt), desk.test, concurrency), desk.test)
    log(f"{desk.name}: v0 {v0:.0%}, hand-written rules {ceiling:.0%}")

    # The defaults, but for worked examples when asked for.
    settings = AlgorithmSettings(examples=examples) if examples else None
    combee = Combee(prompt_id=f"plain-{desk.name}", model=learner_model, algorithm=settings)
    by = {"source": source} if source else {}
    live = agent(desk.system_prompt, [combee.middleware()])
    started = time.monotonic()
    right_in_stream = []
    with combee.running():
        # In chunks, as traffic would come: later chunks are served what was learned.
        for start in range(0, len(desk.train), 8):
            chunk = desk.train[start : start + 8]
            for (run_id, text), case in zip(run_all(live, chunk, concurrency), chunk, strict=True):
                right = desk.score(text, case)
                right_in_stream.append(right)
                combee.feedback(run_id, correct=right, ground_truth=case.code, **by)
        learner = wait_until_learned(combee, len(desk.train), timeout)
    learn_seconds = time.monotonic() - started
    head = combee.current()
    served = agent(desk.system_prompt, [combee.middleware(capture=False)])
    learned = accuracy(desk, run_all(served, desk.test, concurrency), desk.test)
    reports = list(combee.learner.stats.reports)

    row = {
        "task": desk.name,
        "examples": examples,
        "feedback_source": source,
        "train": len(desk.train),
        "test": len(desk.test),
        "v0": v0,
        "ceiling": ceiling,
        "learned": learned,
        "of_ceiling": round(learned / ceiling, 3) if ceiling else None,
        "stream_accuracy": sum(right_in_stream) / len(right_in_stream),
        "learn_seconds": round(learn_seconds, 1),
        "roles": combee.describe_roles(),
        "version": head.version,
        "bullets": len(head.playbook.bullets),
        "contradictions_left": len(conflicts(head.playbook)),
        "steps": learner["steps"],
        "failed_steps": learner["failed_steps"],
        "last_error": learner["last_error"],
        "aggregation": [r.aggregation for r in reports],
        "truncated": sum(sum(r.truncated.values()) for r in reports),
        "unparsed": sum(sum(r.unparsed.values()) for r in reports),
        "conflicts": [c for r in reports for c in r.conflicts],
        "calls": sum(sum(r.calls.values()) for r in reports),
        "playbook": head.render(),
    }
    log(
        f"{desk.name}: learned {learned:.0%} ({row['of_ceiling']} of the ceiling), "
        f"{row['bullets']} bullets, {row['steps']} steps ({row['failed_steps']} failed), "
        f"roles {row['roles']['profile']} ({row['roles']['reason']}), {learn_seconds:.0f} s"
    )
    return row


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Start the local server, run both tasks, write the record."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog=f"python -m {MODULE}", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--size", default="1.5b", choices=("1.5b", "0.5b"))
    parser.add_argument(
        "--tasks", nargs="+", default=["tickets", "clinic"], choices=("tickets", "clinic")
    )
    parser.add_argument("--tickets-train", type=int, default=48)
    parser.add_argument("--tickets-test", type=int, default=24)
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="most seconds of learning per task"
    )
    parser.add_argument(
        "--examples", type=int, default=0, help="AlgorithmSettings.examples (0: the default)"
    )
    parser.add_argument("--source", default=None, help="Feedback source passed to feedback()")
    parser.add_argument("--out", default="plain_chat.json", help="record file in the results")
    args = parser.parse_args(argv)
    from langchain_openai import ChatOpenAI

    from langgraph_combee.local import LocalModel

    cmd = command(MODULE, argv)
    print(f"reproduce: {cmd}", flush=True)
    concurrency = 4
    record: dict[str, Any] = {
        "benchmark": "plain_chat",
        "command": cmd,
        "machine": machine_info(),
        "rows": [],
    }
    with LocalModel(args.size, n_parallel=concurrency + 2) as server:
        # What a user writes: a plain ChatOpenAI on their own server. The agent's
        # replies are capped (a code is a few tokens); the learner's is left as is.
        agent_model = ChatOpenAI(
            base_url=server.base_url, api_key="x", temperature=0, max_tokens=48
        )
        learner_model = ChatOpenAI(base_url=server.base_url, api_key="x", temperature=0)
        desks = {
            "tickets": lambda: tickets_desk(args.tickets_train, args.tickets_test),
            "clinic": lambda: clinic_desk(),
        }
        for name in args.tasks:
            row = one_task(
                desks[name](), agent_model, learner_model, concurrency=concurrency,
                timeout=args.timeout, log=lambda line: print(line, flush=True),
                examples=args.examples, source=args.source,
            )  # fmt: skip
            record["rows"].append(row)
            write_json(RESULTS / args.out, record)
    print(f"wrote {RESULTS / args.out}\nreproduce: {cmd}")
    return record


if __name__ == "__main__":
    main()
