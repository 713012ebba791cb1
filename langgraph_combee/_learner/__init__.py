"""The learner side: the background learner that turns queued traces into versions.

The learner loop and its recovery, each step as a traced run (``step``, shared
with ``Combee.learn()``), verified adoption, the version writer with its lease
and fencing, hand-over between learners, feedback sources and the acceptance
decision. It imports neither the agent side nor the facade: the root gives it
its parts (``parts.LearnerParts``: store, queue, registry and engine per
tenant, the step function, the writer, and ``flush``/``ready``), and the
writer tells the agent side of its process about new versions only through
the callbacks it was given (``on_published``, ``on_canary``).
"""
