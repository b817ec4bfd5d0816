"""One run's answer: which strategy wins where (``winners.json``), and that answer in words.

The runner builds the answer at the end of every run (and asks it, between blocks,
whether the run has settled); the report, the notebooks, ``lblab compare`` and the
scorecard read it, and none computes its own. Nothing here draws: the answer is read
without loading the charting stack (the report is ``analysis.report``).

- ``decide``: the answer, paired within blocks: per scenario and headline metric a
  winner, a tie or unresolved; ``winners.json`` written and read back.
- ``winners``: the answer as a table and in plain words.
- ``summary_csv``: ``summary.csv``, the headline metrics per phase for a spreadsheet.
"""

from lblab.analysis.run.decide import (
    TIE,
    UNRESOLVED,
    WINNER,
    WINNERS_FILE,
    Cell,
    Pair,
    answer,
    build_answer,
    compare,
    equivalence_of,
    read_answer,
    run_answer,
    scenarios_to_settle,
    settled,
    untrusted,
    write_answer,
)
from lblab.analysis.run.winners import (
    hover,
    label,
    margin_words,
    rule_words,
    unresolved_reasons,
    verdict,
    winner_frame,
)

__all__ = [
    "TIE",
    "UNRESOLVED",
    "WINNER",
    "WINNERS_FILE",
    "Cell",
    "Pair",
    "answer",
    "build_answer",
    "compare",
    "equivalence_of",
    "hover",
    "label",
    "margin_words",
    "read_answer",
    "rule_words",
    "run_answer",
    "scenarios_to_settle",
    "settled",
    "unresolved_reasons",
    "untrusted",
    "verdict",
    "winner_frame",
    "write_answer",
]
