"""The learner side: the background learner that turns queued traces into versions.

The learner loop and its recovery, each step as a traced run, verified adoption,
the version writer with its lease and fencing, hand-over between learners,
feedback sources and the acceptance decision. It never imports the agent side:
it reads traces from the queue and writes versions to the registry.
"""
