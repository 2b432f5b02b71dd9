"""One refresh: ask the sources, score, publish an immutable Snapshot; the
refresher process, the Scoreboard, the scores document and the tier labels
written after each measurement.

Inside, each imports only those below it: refresher_process; engine;
scoreboard, scoreview and tier_labels (not each other); measurement.
May import: learning, sources, scoring, kube and the foundation.
"""
